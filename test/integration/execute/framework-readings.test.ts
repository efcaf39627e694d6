/**
 * The request the proxy checks must be the request real upstream frameworks read (§5.11: the
 * proxy builds the upstream request; §2.13: constraints hold for it). Each case here was a way
 * the serialized request read differently in PHP, Rack/Rails, Laravel/Symfony, Express or Python
 * than in the proxy's own reading; each asserts the exact raw request the recording upstream
 * receives, or that nothing reaches it. No framework runs here: the rules are cited beside each.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { Reply, TestProtocol } from '../../helpers/protocol.js';
import { ROOT } from '../../helpers/proxy.js';

const SPEC = join(ROOT, 'test/fixtures/specs/framework-readings.yaml');
const SESSION = 'svc-session-SECRET-4242';
const QUERY_KEY = 'svc-query-key-SECRET-77';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({
    spec: SPEC,
    api: [
      '    credentials:',
      `      sessionCookie: {value: ${SESSION}}`,
      `      queryKey: {value: ${QUERY_KEY}}`,
      '    operations:',
      '      create_owned_transfer:',
      '        pin: {owner: acme}',
    ].join('\n'),
    policy: [
      'rate_limits:',
      '  unknown_host_registration: null',
      'capabilities:',
      '  blocked: [delete_note, get_payroll]',
    ].join('\n'),
  });
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

function run(who: Agent, capability: string, args: Record<string, unknown>): Promise<Reply> {
  return gw.p.execute(who.agent, who.agentId, capability, args);
}

/** 400 invalid_request naming `argument`, and nothing sent upstream. */
function expectInvalid(reply: Reply, argument: string, message: RegExp): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({
    status: 400,
    error: 'invalid_request',
  });
  expect(reply.body.message).toMatch(message);
  expect(reply.body.errors).toEqual([{ path: `/${argument}`, message: expect.stringMatching(message) }]);
  expect(gw.upstream.requests).toEqual([]);
}

function sentOnce(reply: Reply): (typeof gw.upstream.requests)[number] {
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(gw.upstream.requests).toHaveLength(1);
  return gw.upstream.requests[0]!;
}

async function inputOf(who: Agent, name: string): Promise<string[]> {
  const token = await gw.p.agentToken(who.agent, who.agentId);
  const reply = await gw.p.request('GET', `/capability/describe?name=${name}`, { token });
  expect(reply.status).toBe(200);
  return Object.keys((reply.body.input?.properties ?? {}) as Record<string, unknown>).sort();
}

describe('F1: a cookie or query name PHP reads as a credential name', () => {
  let fx: Agent;
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['lookup', 'legacy_session']);
  });

  // PHP turns `.` and spaces in cookie names into `_` and keeps the FIRST of repeated cookies, so
  // `Cookie: session.id=x; session_id=SECRET` was read as session_id=x: the service's session
  // replaced by the agent's. Rack and Werkzeug also keep the first.
  it('prefs: {"session.id": …} and other spellings are dropped; the service cookie comes first', async () => {
    for (const spelling of ['session.id', 'session id', 'Session.Id', '[session_id]', 'session_id[x]']) {
      gw.upstream.reset();
      const r = sentOnce(
        await run(fx, 'lookup', { prefs: { [spelling]: 'attacker-chosen', theme: 'dark' } }),
      );
      expect(r.headers.cookie, spelling).toBe(`session_id=${SESSION}; theme=dark`);
    }
  });

  it('opts: {"api.key": …} is dropped from the query; the service key is the only one', async () => {
    const r = sentOnce(
      await run(fx, 'lookup', { opts: { 'api.key': 'attacker-key', 'api key': 'x', page: '2' } }),
    );
    expect(r.url).toBe(`/v1/lookup?page=2&api_key=${QUERY_KEY}`);
  });

  it('a declared cookie parameter named session.id is not part of the input, and cannot be sent', async () => {
    expect(await inputOf(fx, 'legacy_session')).toEqual(['q']);
    const r = sentOnce(await run(fx, 'legacy_session', { q: 'x' }));
    expect(r.headers.cookie).toBe(`session_id=${SESSION}`);
  });
});

describe('F2: a path value a case-insensitive or format-suffix router reads as a blocked sibling', () => {
  let fx: Agent;
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['get_report']);
  });

  // Express, Koa and ASP.NET route case-insensitively by default: /reports/PAYROLL is payroll's.
  // Rails appends (.:format) to every route and Spring MVC matched /payroll.* (suffix patterns).
  it('reportId "PAYROLL", "Payroll", "payroll.json" are refused; nothing is sent', async () => {
    for (const reportId of ['PAYROLL', 'Payroll', 'payroll.json', 'PayRoll.XML']) {
      gw.upstream.reset();
      const reply = await run(fx, 'get_report', { reportId });
      expect({ reportId, status: reply.status, error: reply.body.error }).toEqual({
        reportId,
        status: 403,
        error: 'capability_not_granted',
      });
      expect(reply.body.message).toContain('GET /reports/payroll');
      expect(gw.upstream.requests).toEqual([]);
    }
  });

  it('ordinary ids, also with a dot, go through as built', async () => {
    for (const reportId of ['q3', 'q3.json', 'payrolls', 'payroll-2024', '2024.03']) {
      gw.upstream.reset();
      const r = sentOnce(await run(fx, 'get_report', { reportId }));
      expect(r.path).toBe(`/v1/reports/${reportId}`);
    }
  });

  // Only a value the agent chose is read in any case: two operations whose literal paths differ
  // in case alone are the operator's API as written, not a path an agent steered.
  it('two operations whose paths differ in case alone both stay callable', async () => {
    const both = await gw.p.activeAgent(['get_archive', 'get_legacy_archive']);
    expect(sentOnce(await run(both, 'get_archive', { year: '2024' })).path).toBe('/v1/archive/2024');
    gw.upstream.reset();
    expect(sentOnce(await run(both, 'get_legacy_archive', { year: '2024' })).path).toBe('/v1/Archive/2024');
  });
});

describe('F3: _method and override headers (Rack::MethodOverride, Laravel, Symfony)', () => {
  let fx: Agent;
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['update_note', 'upload_attachment', 'create_json_note']);
  });

  // Rack::MethodOverride (Rails' default) and Laravel/Symfony route a POST whose form body holds
  // `_method=DELETE` as DELETE: the blocked delete_note would be reached through update_note.
  it('a form body key that reads as _method is refused, naming the argument', async () => {
    for (const key of ['_method', '_METHOD', '.method', '[_method]', '_method[]', '_method\u0000x']) {
      gw.upstream.reset();
      expectInvalid(
        await run(fx, 'update_note', { noteId: 'n1', body: { [key]: 'DELETE', text: 'x' } }),
        'body',
        /method override/,
      );
    }
  });

  // Laravel and Symfony read _method from the query as well.
  it('a free-form query key _method is refused, naming the argument', async () => {
    expectInvalid(
      await run(fx, 'update_note', { noteId: 'n1', opts: { _method: 'delete' }, body: { text: 'x' } }),
      'opts',
      /method override/,
    );
  });

  it('multipart and (Laravel) JSON bodies too', async () => {
    expectInvalid(
      await run(fx, 'upload_attachment', { body: { _method: 'DELETE' } }),
      'body',
      /method override/,
    );
    expectInvalid(await run(fx, 'create_json_note', { body: { _method: 'PUT' } }), 'body', /method override/);
  });

  it("_method with the operation's own method (any case) is sent as it is", async () => {
    const r = sentOnce(await run(fx, 'update_note', { noteId: 'n1', body: { _method: 'post', text: 'x' } }));
    expect(r.method).toBe('POST');
    expect(r.body.toString('latin1')).toBe('_method=post&text=x');
  });

  // X-HTTP-Method is ASP.NET's and OData's spelling of the same override.
  it('X-HTTP-Method-Override, X-HTTP-Method and X-Method-Override are not part of the input, and not sent', async () => {
    expect(await inputOf(fx, 'update_note')).toEqual(['X-Trace', 'body', 'noteId', 'opts']);
    for (const header of ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override']) {
      const reply = await run(fx, 'update_note', { noteId: 'n1', body: { text: 'x' }, [header]: 'DELETE' });
      expect(reply.status, header).toBe(400);
      expect(gw.upstream.requests).toEqual([]);
    }
  });
});

describe('F4: JSON sent in UTF-16 is read back in UTF-16', () => {
  // inCharset sends `application/json; charset=utf-16` as UTF-16 with a BOM; read back as UTF-8 it
  // parsed as nothing, and the body's keys escaped the checks on what is sent (§2.13).
  it('grant amount max 1000: body {amount: 5000} beside query amount 5 is refused', async () => {
    const fx = await gw.p.activeAgent([{ name: 'create_transfer', constraints: { amount: { max: 1000 } } }]);
    const r = sentOnce(await run(fx, 'create_transfer', { amount: 5, body: { note: 'rent' } }));
    expect(r.body.subarray(0, 2)).toEqual(Buffer.from([0xff, 0xfe]));
    expect(r.body.subarray(2).toString('utf16le')).toBe('{"note":"rent"}');
    gw.upstream.reset();
    const reply = await run(fx, 'create_transfer', { amount: 5, body: { amount: 5000 } });
    expect({ status: reply.status, error: reply.body.error }).toEqual({
      status: 403,
      error: 'constraint_violated',
    });
    expect(reply.body.violations).toEqual([
      expect.objectContaining({
        field: 'amount',
        sent: expect.objectContaining({ in: 'body', name: 'amount', by: 'body' }),
      }),
    ]);
    expect(gw.upstream.requests).toEqual([]);
  });

  it('a pinned owner repeated in the UTF-16 body is refused', async () => {
    const fx = await gw.p.activeAgent(['create_owned_transfer']);
    const r = sentOnce(await run(fx, 'create_owned_transfer', { body: { note: 'x' } }));
    expect(r.url).toBe(`/v1/owned-transfers?owner=acme&api_key=${QUERY_KEY}`);
    gw.upstream.reset();
    expectInvalid(
      await run(fx, 'create_owned_transfer', { body: { owner: 'mallory' } }),
      'body',
      /operator pins/,
    );
  });
});

describe('F5: `;` in an allowReserved query value', () => {
  // Rack 2 and Python's parse_qs before 3.10 split the query on `;` too: `q=x;amount` added a
  // valueless `amount`, which Rack reads last, as nil, past the grant's amount bound.
  it('is percent-encoded, so the upstream reads one q and one amount', async () => {
    const fx = await gw.p.activeAgent([{ name: 'search', constraints: { amount: { max: 1000 } } }]);
    const r = sentOnce(await run(fx, 'search', { amount: 5, q: 'x;amount' }));
    expect(r.url).toBe(`/v1/search?amount=5&q=x%3Bamount&api_key=${QUERY_KEY}`);
  });
});
