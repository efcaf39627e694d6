/**
 * Issue 10, class 5 (constraints on what is actually sent) and class 11 (lookalike values), over
 * real HTTP: the proxy in front of a recording upstream, agents with constrained grants (§2.13),
 * and arguments that pass the check on the arguments but would carry a value outside the grant once
 * serialized upstream (styles, explode, free-form objects, aliases). Each attack must end in
 * 403 constraint_violated with the §5.11 violations array and NOTHING reaching the upstream; each
 * capability first executes within its grant, so a refusal cannot come from somewhere else.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { Reply } from '../../helpers/protocol.js';
import type { TestKey } from '../../helpers/keys.js';
import { ROOT } from '../../helpers/proxy.js';

const SPEC = join(ROOT, 'test/fixtures/specs/smuggling.yaml');

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({ spec: SPEC });
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

interface Agent {
  agent: TestKey;
  agentId: string;
}

async function grantee(name: string, constraints: Record<string, unknown>): Promise<Agent> {
  const fx = await gw.p.activeAgent([{ name, constraints }]);
  const grant = fx.body.agent_capability_grants.find((g: { capability: string }) => g.capability === name);
  expect(grant).toMatchObject({ status: 'active', constraints });
  return fx;
}

function run(who: Agent, capability: string, args: Record<string, unknown>): Promise<Reply> {
  return gw.p.execute(who.agent, who.agentId, capability, args);
}

/** 403 constraint_violated, the listed violations, and nothing sent upstream. */
function expectRefused(reply: Reply, violations: unknown[]): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({
    status: 403,
    error: 'constraint_violated',
  });
  expect(reply.body.violations).toEqual(violations);
  expect(gw.upstream.requests).toEqual([]);
}

function expectSent(reply: Reply): { url: string; query: URLSearchParams } {
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(gw.upstream.requests).toHaveLength(1);
  const request = gw.upstream.requests[0]!;
  return { url: request.url, query: request.query };
}

describe('class 5: query smuggling into a constrained field (list_payments)', () => {
  const LIMITS = {
    amount: { max: 1000 },
    account: { not_in: ['admin', 'root'] },
    roles: { not_in: ['admin'] },
  };
  let fx: Agent;
  beforeAll(async () => {
    fx = await grantee('list_payments', LIMITS);
  });
  const ok = { amount: 5, account: 'acc_1', roles: ['viewer'] };

  it('within the grant, the upstream receives exactly the approved values', async () => {
    const { url } = expectSent(await run(fx, 'list_payments', { ...ok, filter: { status: 'open' } }));
    expect(url).toBe('/v1/payments?amount=5&account=acc_1&roles=viewer&status=open');
  });

  it('refuses an exploded free-form object repeating the constrained key (filter: {amount: 5000})', async () => {
    expectRefused(await run(fx, 'list_payments', { ...ok, filter: { amount: 5000 } }), [
      {
        field: 'amount',
        constraint: LIMITS.amount,
        actual: '5000',
        sent: { in: 'query', name: 'amount', by: 'filter' },
      },
    ]);
  });

  it('refuses the repeated key even with a value inside the grant: only amount may send amount', async () => {
    const reply = await run(fx, 'list_payments', { ...ok, filter: { amount: 10 } });
    expect(reply.status).toBe(403);
    expect(gw.upstream.requests).toEqual([]);
  });

  for (const alias of [
    'AMOUNT',
    'Amount',
    'amount[]',
    'amount[0]',
    'ａｍｏｕｎｔ',
    'am\u200bount',
    'amount ',
    // Rack 2 (Rails ≤ 7.0, Sinatra) skips leading brackets, then reads up to the next one.
    ']amount',
    '[amount]',
    '[]amount',
    '[amount',
    // PHP reads a decoded name as a C string: up to its first NUL.
    'amount\u0000x',
  ]) {
    it(`refuses an alias servers read as amount: filter key ${JSON.stringify(alias)}`, async () => {
      expectRefused(await run(fx, 'list_payments', { ...ok, filter: { [alias]: 5000 } }), [
        {
          field: 'amount',
          constraint: LIMITS.amount,
          actual: '5000',
          sent: { in: 'query', name: alias, by: 'filter' },
        },
      ]);
    });
  }

  it('refuses a repeated key from an array argument that not_in on the argument never saw (account: [acc_1, admin])', async () => {
    expectRefused(await run(fx, 'list_payments', { ...ok, account: ['acc_1', 'admin'] }), [
      {
        field: 'account',
        constraint: LIMITS.account,
        actual: 'admin',
        sent: { in: 'query', name: 'account' },
      },
    ]);
  });

  it('refuses a forbidden role inside a pipe-delimited list (roles: [viewer, admin] → viewer|admin)', async () => {
    expectRefused(await run(fx, 'list_payments', { ...ok, roles: ['viewer', 'admin'] }), [
      {
        field: 'roles',
        constraint: LIMITS.roles,
        actual: 'viewer|admin',
        sent: { in: 'query', name: 'roles' },
      },
    ]);
  });

  it('refuses a forbidden value hidden in a scalar by the style separator (account: "acc_1,root")', async () => {
    const reply = await run(fx, 'list_payments', { ...ok, account: 'acc_1,root' });
    expect(reply.body.violations).toEqual([
      {
        field: 'account',
        constraint: LIMITS.account,
        actual: 'acc_1,root',
        sent: { in: 'query', name: 'account' },
      },
    ]);
    expect(gw.upstream.requests).toEqual([]);
  });

  it('refuses an empty list that leaves the constrained field missing upstream (account: [])', async () => {
    expectRefused(await run(fx, 'list_payments', { ...ok, account: [] }), [
      { field: 'account', constraint: LIMITS.account, actual: null },
    ]);
  });

  it('lets a deepObject member named like the field through: opts[amount] is not amount', async () => {
    const { query } = expectSent(await run(fx, 'list_payments', { ...ok, opts: { amount: 5000 } }));
    expect(query.getAll('amount')).toEqual(['5']);
    expect(query.get('opts[amount]')).toBe('5000');
  });
});

describe('arguments of any size within the body limit', () => {
  it('an array of 130,000 items is serialized, not a stack overflow (500)', async () => {
    const fx = await gw.p.activeAgent(['list_payments']);
    const reply = await run(fx, 'list_payments', { account: Array<string>(130_000).fill('a') });
    // The ~400 KB query reaches the upstream, whose 16 KiB header limit refuses it: its answer.
    expect({ status: reply.status, error: reply.body?.error }).toEqual({
      status: 431,
      error: 'upstream_error',
    });
    expect(gw.upstream.requests).toEqual([]);
  });
});

describe('class 5: smuggling through other locations', () => {
  it('refuses a path parameter repeated in the query by an exploded object (get_statement)', async () => {
    const fx = await grantee('get_statement', { account: 'acc_1' });
    expectSent(await run(fx, 'get_statement', { account: 'acc_1', filter: { year: 2024 } }));
    gw.upstream.reset();
    expectRefused(await run(fx, 'get_statement', { account: 'acc_1', filter: { account: 'acc_2' } }), [
      {
        field: 'account',
        constraint: 'acc_1',
        actual: 'acc_2',
        sent: { in: 'query', name: 'account', by: 'filter' },
      },
    ]);
  });

  it('refuses an exploded matrix object in the path naming the constrained query key (;amount=5000)', async () => {
    const fx = await grantee('get_ledger_entry', { amount: { max: 1000 } });
    const { url } = expectSent(await run(fx, 'get_ledger_entry', { entry: { id: 'e1' }, amount: 5 }));
    expect(url).toBe('/v1/ledger/;id=e1?amount=5');
    gw.upstream.reset();
    expectRefused(await run(fx, 'get_ledger_entry', { entry: { id: 'e1', amount: 5000 }, amount: 5 }), [
      {
        field: 'amount',
        constraint: { max: 1000 },
        actual: '5000',
        sent: { in: 'path', name: 'amount', by: 'entry' },
      },
    ]);
  });

  it('refuses a header alias that CGI-style servers read as the constrained header (X_Account for X-Account)', async () => {
    const fx = await grantee('read_audit', { 'X-Account': 'acc_1' });
    expectSent(await run(fx, 'read_audit', { 'X-Account': 'acc_1' }));
    expect(gw.upstream.requests[0]!.headers['x-account']).toBe('acc_1');
    gw.upstream.reset();
    expectRefused(await run(fx, 'read_audit', { 'X-Account': 'acc_1', X_Account: 'acc_2' }), [
      {
        field: 'X-Account',
        constraint: 'acc_1',
        actual: 'acc_2',
        sent: { in: 'header', name: 'x_account', by: 'X_Account' },
      },
    ]);
  });

  it('refuses a cookie of the constrained name from an exploded cookie object (prefs: {region: us})', async () => {
    const fx = await grantee('read_region', { region: { in: ['eu'] } });
    expectSent(await run(fx, 'read_region', { region: 'eu', prefs: { theme: 'dark' } }));
    expect(gw.upstream.requests[0]!.headers.cookie).toBe('region=eu; theme=dark');
    gw.upstream.reset();
    expectRefused(await run(fx, 'read_region', { region: 'eu', prefs: { region: 'us' } }), [
      {
        field: 'region',
        constraint: { in: ['eu'] },
        actual: 'us',
        sent: { in: 'cookie', name: 'region', by: 'prefs' },
      },
    ]);
  });

  it('refuses a cookie named like a constrained query field (PHP $_REQUEST reads the cookie last)', async () => {
    const fx = await grantee('list_refunds', { amount: { max: 10 } });
    expectSent(await run(fx, 'list_refunds', { amount: 5, prefs: { theme: 'dark' } }));
    gw.upstream.reset();
    expectRefused(await run(fx, 'list_refunds', { amount: 5, prefs: { amount: 5000 } }), [
      {
        field: 'amount',
        constraint: { max: 10 },
        actual: '5000',
        sent: { in: 'cookie', name: 'amount', by: 'prefs' },
      },
    ]);
  });

  it('refuses a form body field repeated by an exploded free-form field (extra: {amount: 5000})', async () => {
    const fx = await grantee('create_payout', { amount: { max: 1000 } });
    expectSent(await run(fx, 'create_payout', { amount: 5, extra: { memo: 'x' } }));
    expect(gw.upstream.requests[0]!.body.toString()).toBe('amount=5&memo=x');
    gw.upstream.reset();
    expectRefused(await run(fx, 'create_payout', { amount: 5, extra: { amount: 5000 } }), [
      {
        field: 'amount',
        constraint: { max: 1000 },
        actual: '5000',
        sent: { in: 'body', name: 'amount', by: 'extra' },
      },
    ]);
  });

  it('refuses a query parameter repeated as a key of the JSON body (frameworks merge query and body)', async () => {
    const fx = await grantee('create_transfer', { amount: { max: 1000 } });
    expectSent(await run(fx, 'create_transfer', { amount: 5, body: { memo: 'x', nested: { amount: 1 } } }));
    gw.upstream.reset();
    expectRefused(await run(fx, 'create_transfer', { amount: 5, body: { Amount: 5000 } }), [
      {
        field: 'amount',
        constraint: { max: 1000 },
        actual: 5000,
        sent: { in: 'body', name: 'Amount', by: 'body' },
      },
    ]);
  });

  it('refuses a forbidden role as an element of a JSON array (role: [viewer, admin])', async () => {
    const fx = await grantee('grant_role', { role: { not_in: ['admin'] } });
    expectSent(await run(fx, 'grant_role', { user: 'u1', role: ['viewer'] }));
    gw.upstream.reset();
    expectRefused(await run(fx, 'grant_role', { user: 'u1', role: ['viewer', 'admin'] }), [
      {
        field: 'role',
        constraint: { not_in: ['admin'] },
        actual: ['viewer', 'admin'],
        sent: { in: 'body', name: 'role' },
      },
    ]);
  });
});

describe('class 5: pinned arguments cannot be overridden through another argument', () => {
  let pinned: Gateway;
  beforeAll(async () => {
    pinned = await startGateway({
      spec: SPEC,
      api: `    operations:
      get_statement:
        pin: {account: acc_pinned}`,
    });
  });
  afterAll(() => pinned.close());

  it('refuses an exploded object that repeats the pinned name (filter: {Account: acc_other}) → 400, nothing sent', async () => {
    const fx = await pinned.p.activeAgent(['get_statement']);
    const ok = await pinned.p.execute(fx.agent, fx.agentId, 'get_statement', { filter: { year: 2024 } });
    expect(ok.status).toBe(200);
    expect(pinned.upstream.requests.map((r) => r.url)).toEqual([
      '/v1/accounts/acc_pinned/statement?year=2024',
    ]);
    pinned.upstream.reset();
    const reply = await pinned.p.execute(fx.agent, fx.agentId, 'get_statement', {
      filter: { Account: 'acc_other' },
    });
    expect({ status: reply.status, error: reply.body.error }).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    expect(reply.body.errors).toEqual([{ path: '/filter', message: expect.stringMatching(/operator pins/) }]);
    expect(pinned.upstream.requests).toEqual([]);
  });

  for (const alias of [']account', '[account]', 'account\u0000x']) {
    it(`refuses the pinned name as Rack or PHP read it (filter key ${JSON.stringify(alias)})`, async () => {
      const fx = await pinned.p.activeAgent(['get_statement']);
      pinned.upstream.reset();
      const reply = await pinned.p.execute(fx.agent, fx.agentId, 'get_statement', {
        filter: { [alias]: 'acc_other' },
      });
      expect(reply.status).toBe(400);
      expect(reply.body.errors).toEqual([
        { path: '/filter', message: expect.stringMatching(/operator pins/) },
      ]);
      expect(pinned.upstream.requests).toEqual([]);
    });
  }
});

describe('class 11: not_in refuses lookalikes over HTTP', () => {
  let fx: Agent;
  beforeAll(async () => {
    fx = await grantee('grant_role', { role: { not_in: ['admin'] } });
  });

  it('a value that only shares letters with the forbidden one is executed', async () => {
    expectSent(await run(fx, 'grant_role', { user: 'u1', role: 'administrator' }));
  });

  const lookalikes: [string, string][] = [
    ['upper case', 'ADMIN'],
    ['fullwidth letters', 'ａｄｍｉｎ'],
    ['zero-width joiner', 'ad\u200dmin'],
    ['soft hyphen', 'adm\u00adin'],
    ['right-to-left override', '\u202eadmin'],
    ['variation selector', 'admin\ufe0f'],
    ['mathematical letters', '𝐚𝐝𝐦𝐢𝐧'],
  ];
  for (const [why, role] of lookalikes) {
    it(`refuses the ${why} lookalike ${JSON.stringify(role)} of a forbidden value`, async () => {
      expectRefused(await run(fx, 'grant_role', { user: 'u1', role }), [
        { field: 'role', constraint: { not_in: ['admin'] }, actual: role },
      ]);
    });
  }
});

describe('class 5 property over real HTTP: the upstream never receives a value outside the grant', () => {
  const LIMITS = { amount: { max: 1000 }, account: { not_in: ['admin'] } };
  let fx: Agent;
  beforeAll(async () => {
    fx = await grantee('list_payments', LIMITS);
  });

  const key = fc.oneof(
    { arbitrary: fc.constantFrom('status', 'note'), weight: 3 },
    {
      arbitrary: fc.constantFrom('amount', 'AMOUNT', 'amount[]', 'ａｍｏｕｎｔ', 'account', 'Account'),
      weight: 1,
    },
  );
  const text = fc.oneof(
    { arbitrary: fc.constant('acc_1'), weight: 4 },
    {
      arbitrary: fc.constantFrom('admin', 'ADMIN', 'ａｄｍｉｎ', 'ad\u200bmin', 'x,admin', 'open', ''),
      weight: 3,
    },
  );
  const scalar = fc.oneof(text, fc.integer({ min: -10, max: 5000 }));
  const args = fc.record(
    {
      amount: fc.oneof(fc.integer({ min: 0, max: 1200 }), fc.constantFrom(1000, 1000.5)),
      account: fc.oneof(
        { arbitrary: text, weight: 3 },
        { arbitrary: fc.array(text, { maxLength: 3 }), weight: 1 },
      ),
      filter: fc.dictionary(key, scalar, { maxKeys: 2 }),
      opts: fc.dictionary(key, scalar, { maxKeys: 2 }),
    },
    { requiredKeys: ['amount', 'account'] },
  );

  const norm = (s: string): string =>
    s
      .normalize('NFKC')
      .replace(/\u200b/gu, '')
      .toLowerCase();

  it('fast-check: a 200 carries only values inside the grant; any refusal reaches nothing', async () => {
    const seen = { sent: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(args, async (a) => {
        gw.upstream.reset();
        const reply = await run(fx, 'list_payments', a);
        if (reply.status !== 200) {
          expect([400, 403]).toContain(reply.status);
          expect(gw.upstream.requests).toEqual([]);
          seen.refused++;
          return;
        }
        seen.sent++;
        expect(gw.upstream.requests).toHaveLength(1);
        // The upstream's view: every query key a lenient server reads as amount or account.
        for (const [name, value] of gw.upstream.requests[0]!.query) {
          const base = norm(name).split('[')[0];
          if (base === 'amount') expect(Number(value)).toBeLessThanOrEqual(1000);
          if (base === 'account') expect(value.split(',').map(norm)).not.toContain('admin');
        }
      }),
      { numRuns: 80, seed: 0x10ad },
    );
    expect(seen.sent).toBeGreaterThan(10);
    expect(seen.refused).toBeGreaterThan(10);
  });
});
