/**
 * §4.5, §5.11, §2.13, §2.12: every check that must hold before an execution leaves the proxy.
 * Each rejection asserts the exact status and `error` code AND that the recording upstream saw
 * nothing; where a check could be vacuous, the same agent first (or afterwards) executes
 * successfully, so the test fails if the rejection came from somewhere else.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, signJwt, unsignedJwt, type TestKey } from '../../helpers/keys.js';
import { TestClock, type Reply } from '../../helpers/protocol.js';

// `ping` is used only by the rate-limit test: its bucket is shared by every agent.
// No capability is granted by default (a policy file replaces the built-in defaults), so every
// grant in this file is one the test asked for and the operator approved.
const BASE_POLICY = `
rate_limits:
  unknown_host_registration: null
`;
const POLICY = `${BASE_POLICY}  per_capability:
    ping: 2/1m
capabilities:
  blocked: [put_note]
`;
const CREDENTIALS = `    credentials:
      apiKeyHeader: {env: GW_KEY}
      bearerAuth: {env: GW_BEARER}
`;
const ENV = { GW_KEY: 'service-key-0123456789', GW_BEARER: 'service-bearer-0123456789' };
const MAX_BODY = 16_384;

/** The §5.11 / §2.13 example grant. */
const TRANSFER_LIMITS = { amount: { max: 1000 }, currency: { in: ['USD', 'EUR'] } };

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({
    api: CREDENTIALS,
    config: `server:\n  max_body_bytes: ${MAX_BODY}\n`,
    policy: POLICY,
    env: ENV,
  });
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

function expectError(reply: Reply, status: number, code: string, message?: RegExp): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error: code });
  expect(typeof reply.body.message).toBe('string');
  if (message) expect(reply.body.message).toMatch(message);
}

/** Nothing left the proxy (§5.11: a rejected request never reaches the upstream). */
function expectUpstreamUntouched(g: Gateway = gw): void {
  expect(g.upstream.requests).toEqual([]);
}

/** POST /capability/execute with a raw body and the given headers. */
function postRaw(
  token: string | undefined,
  rawBody: string,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return gw.p.request('POST', '/capability/execute', {
    ...(token !== undefined ? { token } : {}),
    rawBody,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

function executeToken(agent: TestKey, agentId: string, extra: Record<string, unknown> = {}): Promise<string> {
  return gw.p.agentToken(agent, agentId, extra, gw.p.executeLocation);
}

function nowSec(): number {
  return Math.floor(gw.p.clock.now() / 1000);
}

describe('§4.5 / §4.3 agent JWT for execution', () => {
  let fx: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['get_item', 'list_items']);
  });

  it('accepts a JWT whose aud is the execute location (§4.3), the baseline for the rejections below', async () => {
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'a1' });
    expect(reply.status).toBe(200);
    expect(gw.upstream.received('/v1/items/a1')).toHaveLength(1);
  });

  it('rejects aud = the issuer: protocol-endpoint JWTs cannot execute (§4.3) → 401 invalid_jwt', async () => {
    const reply = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'get_item',
      { itemId: 'a1' },
      { aud: gw.p.issuer },
    );
    expectError(reply, 401, 'invalid_jwt', /aud/);
    expectUpstreamUntouched();
  });

  it('rejects aud = another location (§4.3) → 401 invalid_jwt', async () => {
    const reply = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'get_item',
      { itemId: 'a1' },
      { aud: 'https://banking-api.example.com/agent/execute' },
    );
    expectError(reply, 401, 'invalid_jwt', /aud/);
    expectUpstreamUntouched();
  });

  it('rejects typ host+jwt signed by the agent key (§4.3, token confusion) → 401 invalid_jwt', async () => {
    const token = await signJwt(
      fx.agent,
      'host+jwt',
      { sub: fx.agentId, aud: gw.p.executeLocation },
      { nowMs: gw.p.clock.now() },
    );
    const reply = await postRaw(
      token,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
    );
    expectError(reply, 401, 'invalid_jwt', /typ/);
    expectUpstreamUntouched();
  });

  it('rejects alg none (§4.5) → 401 invalid_jwt', async () => {
    const token = unsignedJwt(
      { alg: 'none', typ: 'agent+jwt' },
      { sub: fx.agentId, aud: gw.p.executeLocation, iat: nowSec(), exp: nowSec() + 60, jti: 'alg-none-1' },
    );
    const reply = await postRaw(
      token,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
    );
    expectError(reply, 401, 'invalid_jwt', /alg/);
    expectUpstreamUntouched();
  });

  it('rejects a replayed jti (§4.6): the first use executes, the second never leaves the proxy', async () => {
    const token = await executeToken(fx.agent, fx.agentId);
    const body = JSON.stringify({ capability: 'get_item', arguments: { itemId: 'replayed' } });
    expect((await postRaw(token, body)).status).toBe(200);
    const replay = await postRaw(token, body);
    expectError(replay, 401, 'invalid_jwt', /jti/);
    expect(gw.upstream.received('/v1/items/replayed')).toHaveLength(1);
  });

  it('rejects an expired JWT (§8.2, past the skew) → 401 invalid_jwt', async () => {
    const iat = nowSec() - 300;
    const token = await executeToken(fx.agent, fx.agentId, { iat, exp: iat + 60 });
    const reply = await postRaw(
      token,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
    );
    expectError(reply, 401, 'invalid_jwt', /expired/);
    expectUpstreamUntouched();
  });

  it('rejects a JWT signed by another key (§4.5 step 7) → 401 invalid_jwt', async () => {
    const stranger = await generateTestKey();
    const token = await gw.p.agentToken(stranger, fx.agentId, {}, gw.p.executeLocation);
    const reply = await postRaw(
      token,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
    );
    expectError(reply, 401, 'invalid_jwt', /signature/);
    expectUpstreamUntouched();
  });

  it('answers a request without Authorization with 401 authentication_required and a challenge', async () => {
    const reply = await postRaw(
      undefined,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
    );
    expectError(reply, 401, 'authentication_required');
    expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectUpstreamUntouched();
  });

  it('refuses a non-Bearer Authorization (src/http/credentials.ts: 401 with a Bearer challenge, RFC 6750 §3.1)', async () => {
    const reply = await postRaw(
      undefined,
      JSON.stringify({ capability: 'get_item', arguments: { itemId: 'a1' } }),
      {
        authorization: 'Basic dXNlcjpwYXNz',
      },
    );
    expectError(reply, 401, 'authentication_required', /Bearer/);
    expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectUpstreamUntouched();
  });
});

describe('§4.3 / §4.5 the capabilities claim narrows a JWT', () => {
  let fx: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['get_item', 'list_items']);
  });

  it('a JWT listing only get_item executes get_item', async () => {
    const reply = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'get_item',
      { itemId: 'n1' },
      {
        extra: { capabilities: ['get_item'] },
      },
    );
    expect(reply.status).toBe(200);
    expect(gw.upstream.received('/v1/items/n1')).toHaveLength(1);
  });

  it('a JWT listing only get_item cannot execute list_items, although granted → 403 capability_not_granted', async () => {
    const reply = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'list_items',
      {},
      {
        extra: { capabilities: ['get_item'] },
      },
    );
    expectError(reply, 403, 'capability_not_granted', /capabilities claim/);
    expectUpstreamUntouched();
    // The grant itself stands: without the claim the same agent may list.
    expect((await gw.p.execute(fx.agent, fx.agentId, 'list_items', {})).status).toBe(200);
  });

  it('an empty capabilities claim authorizes nothing → 403 capability_not_granted', async () => {
    const reply = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'get_item',
      { itemId: 'n1' },
      {
        extra: { capabilities: [] },
      },
    );
    expectError(reply, 403, 'capability_not_granted');
    expectUpstreamUntouched();
  });

  it.each([
    ['a string', 'get_item'],
    ['an array with a non-string', ['get_item', 7]],
    ['an object', { get_item: true }],
    ['null', null],
  ])(
    'a malformed capabilities claim (%s) never reads as "absent" → 401 invalid_jwt',
    async (_what, claim) => {
      const reply = await gw.p.execute(
        fx.agent,
        fx.agentId,
        'get_item',
        { itemId: 'n1' },
        {
          extra: { capabilities: claim },
        },
      );
      expectError(reply, 401, 'invalid_jwt', /capabilities claim/);
      expectUpstreamUntouched();
    },
  );
});

describe('§5.11 / §2.12 capability and grant', () => {
  it('an unknown capability → 404 capability_not_found', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'transfer_everything', {});
    expectError(reply, 404, 'capability_not_found');
    expectUpstreamUntouched();
  });

  it('a capability the agent was never granted → 403 capability_not_granted', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'delete_item', { itemId: 'x' });
    expectError(reply, 403, 'capability_not_granted', /no active grant/);
    expectUpstreamUntouched();
  });

  it('a grant the approver denied → 403 capability_not_granted', async () => {
    const { key: host } = await gw.p.linkedHost();
    const reg = await gw.p.register(host, { capabilities: ['get_item', 'delete_item'] });
    expect(reg.status).toBe(200);
    const approval = await gw.p.pendingApproval(reg.body.agent_id);
    const decided = await gw.p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
      capabilities: ['get_item'],
    });
    expect(decided.body).toMatchObject({ approved: ['get_item'], denied: ['delete_item'] });

    const denied = await gw.p.execute(reg.agent, reg.body.agent_id, 'delete_item', { itemId: 'x' });
    expectError(denied, 403, 'capability_not_granted');
    expectUpstreamUntouched();
    expect((await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'x' })).status).toBe(200);
  });

  it('a capability blocked by policy → 403 capability_not_granted', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'put_note', { noteId: 'n', body: 'hi' });
    expectError(reply, 403, 'capability_not_granted', /blocked/);
    expectUpstreamUntouched();
  });

  it('a capability removed from the catalog while a grant exists → 403 capability_not_granted "removed" (§2.12); one blocked after granting → 403', async () => {
    const clock = new TestClock();
    const first = await startGateway({ api: CREDENTIALS, env: ENV, policy: BASE_POLICY, clock });
    let second: Gateway | undefined;
    try {
      const fx = await first.p.activeAgent(['delete_item', 'get_item']);
      const other = await first.p.activeAgent(['get_item']);
      expect((await first.p.execute(fx.agent, fx.agentId, 'delete_item', { itemId: 'd1' })).status).toBe(200);
      expect((await first.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'd1' })).status).toBe(200);
      expect(first.upstream.received('/v1/items/d1')).toHaveLength(2);
      await first.p.close();

      // Restart on the same database: deleteItem excluded from the catalog, get_item blocked.
      second = await startGateway({
        api: `${CREDENTIALS}    exclude:\n      - operation_ids: [deleteItem]\n`,
        env: ENV,
        policy: `${BASE_POLICY}capabilities:\n  blocked: [get_item]\n`,
        clock,
        db: first.db,
      });
      expect(second.p.proxy.catalog.get('delete_item')).toBeUndefined();

      const removed = await second.p.execute(fx.agent, fx.agentId, 'delete_item', { itemId: 'd1' });
      expectError(removed, 403, 'capability_not_granted', /delete_item.*removed/);
      // Without a grant, the same name is simply unknown.
      const unknown = await second.p.execute(other.agent, other.agentId, 'delete_item', { itemId: 'd1' });
      expectError(unknown, 404, 'capability_not_found');
      const blocked = await second.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'd1' });
      expectError(blocked, 403, 'capability_not_granted', /blocked/);
      expectUpstreamUntouched(second);
    } finally {
      await second?.close();
      await first.close();
    }
  });
});

describe('§4.5 step 6 / §5.13 agent and host state', () => {
  it('a pending agent → 403 agent_pending', async () => {
    // An active host linked to no user cannot vouch for a delegated agent: it stays pending (§2.9).
    const host = await generateTestKey();
    const pre = await gw.p.admin('POST', '/admin/hosts', { name: 'unlinked', public_key: host.publicJwk });
    expect(pre.status).toBe(201);
    const reg = await gw.p.register(host, { capabilities: ['get_item'] });
    expect(reg.body.status).toBe('pending');
    const reply = await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'p' });
    expectError(reply, 403, 'agent_pending');
    expectUpstreamUntouched();
  });

  it('an agent of a pending host → 403 host_pending', async () => {
    const host = await generateTestKey();
    const reg = await gw.p.register(host, { capabilities: ['get_item'] });
    expect(reg.status).toBe(200);
    const reply = await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'p' });
    expectError(reply, 403, 'host_pending');
    expectUpstreamUntouched();
  });

  it('an active agent whose grant still awaits approval → 403 capability_not_granted', async () => {
    const { key: host } = await gw.p.linkedHost();
    const reg = await gw.p.register(host, { capabilities: ['get_item'] });
    expect(reg.body.status).toBe('active');
    expect(reg.body.agent_capability_grants).toEqual([
      expect.objectContaining({ capability: 'get_item', status: 'pending' }),
    ]);
    const reply = await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'p' });
    expectError(reply, 403, 'capability_not_granted');
    expectUpstreamUntouched();
  });

  it('a revoked agent → 403 agent_revoked', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    expect((await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'r' })).status).toBe(200);
    expect((await gw.p.admin('POST', `/admin/agents/${fx.agentId}/revoke`, {})).status).toBe(200);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'r' });
    expectError(reply, 403, 'agent_revoked');
    expect(gw.upstream.requests).toHaveLength(1);
  });

  it('an agent of a revoked host → 403 host_revoked', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    expect((await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'h' })).status).toBe(200);
    expect((await gw.p.admin('POST', `/admin/hosts/${fx.hostId}/revoke`, {})).status).toBe(200);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'h' });
    expectError(reply, 403, 'host_revoked');
    expect(gw.upstream.requests).toHaveLength(1);
  });

  it('an agent idle past the session TTL → 403 agent_expired (§2.4)', async () => {
    const clock = new TestClock();
    const g = await startGateway({
      api: CREDENTIALS,
      env: ENV,
      policy: `${BASE_POLICY}lifetimes:\n  session_ttl: 5m\n`,
      clock,
    });
    try {
      const fx = await g.p.activeAgent(['get_item']);
      expect((await g.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'e' })).status).toBe(200);
      clock.advance(4 * 60_000);
      expect((await g.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'e' })).status).toBe(200);
      clock.advance(5 * 60_000 + 1_000);
      const reply = await g.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'e' });
      expectError(reply, 403, 'agent_expired');
      expect(g.upstream.requests).toHaveLength(2);
    } finally {
      await g.close();
    }
  });
});

describe('§5.11 request body', () => {
  let fx: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['get_item', 'list_items']);
  });

  it.each([
    ['not JSON', '{"capability": "get_item",'],
    ['a JSON array', '["get_item"]'],
    ['capability missing', '{"arguments": {"itemId": "b"}}'],
    ['capability not a string', '{"capability": ["get_item"], "arguments": {"itemId": "b"}}'],
    ['capability empty', '{"capability": "", "arguments": {}}'],
    ['arguments an array', '{"capability": "get_item", "arguments": ["b"]}'],
    ['arguments a string', '{"capability": "get_item", "arguments": "itemId=b"}'],
    ['arguments null', '{"capability": "get_item", "arguments": null}'],
  ])('%s → 400 invalid_request', async (_what, raw) => {
    const reply = await postRaw(await executeToken(fx.agent, fx.agentId), raw);
    expectError(reply, 400, 'invalid_request');
    expectUpstreamUntouched();
  });

  it('an empty body → 400 invalid_request', async () => {
    const reply = await postRaw(await executeToken(fx.agent, fx.agentId), '');
    expectError(reply, 400, 'invalid_request');
    expectUpstreamUntouched();
  });

  it('a body that is not application/json → 400 invalid_request', async () => {
    const reply = await postRaw(await executeToken(fx.agent, fx.agentId), '{"capability": "list_items"}', {
      'content-type': 'text/plain',
    });
    expectError(reply, 400, 'invalid_request', /application\/json/);
    expectUpstreamUntouched();
  });

  it('arguments may be omitted for a capability without required inputs', async () => {
    const reply = await postRaw(await executeToken(fx.agent, fx.agentId), '{"capability": "list_items"}');
    expect(reply.status).toBe(200);
    expect(gw.upstream.received('/v1/items')).toHaveLength(1);
  });

  it('a declared body over the cap → 413 payload_too_large', async () => {
    const body = JSON.stringify({ capability: 'get_item', arguments: { itemId: 'x'.repeat(MAX_BODY) } });
    const reply = await rawPost(await executeToken(fx.agent, fx.agentId), body, false);
    expect(reply.status).toBe(413);
    expect(JSON.parse(reply.body).error).toBe('payload_too_large');
    expectUpstreamUntouched();
  });

  it('a chunked body (no Content-Length) over the cap → 413 payload_too_large', async () => {
    const body = JSON.stringify({ capability: 'get_item', arguments: { itemId: 'x'.repeat(MAX_BODY) } });
    const reply = await rawPost(await executeToken(fx.agent, fx.agentId), body, true);
    expect(reply.status).toBe(413);
    expect(JSON.parse(reply.body).error).toBe('payload_too_large');
    expectUpstreamUntouched();
  });
});

describe('§5.11 arguments against the input schema (no coercion)', () => {
  let fx: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    fx = await gw.p.activeAgent(['create_item']);
  });

  it('valid arguments reach the upstream as the JSON body', async () => {
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'create_item', { name: 'lamp', price: 5 });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items');
    expect(seen).toHaveLength(1);
    expect(JSON.parse(seen[0]?.body.toString('utf8') ?? '')).toEqual({ name: 'lamp', price: 5 });
  });

  async function expectInvalid(args: Record<string, unknown>, paths: string[]): Promise<any[]> {
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'create_item', args);
    expectError(reply, 400, 'invalid_request');
    expect(Array.isArray(reply.body.errors)).toBe(true);
    expect(reply.body.errors.map((e: { path: string }) => e.path).sort()).toEqual([...paths].sort());
    for (const e of reply.body.errors) expect(typeof e.message).toBe('string');
    expectUpstreamUntouched();
    return reply.body.errors as any[];
  }

  it('"5" for a number is not coerced → 400 invalid_request at /price', async () => {
    const [error] = await expectInvalid({ name: 'lamp', price: '5' }, ['/price']);
    expect(error.message).toMatch(/number/);
  });

  it('a missing required input → 400 invalid_request at /price', async () => {
    const [error] = await expectInvalid({ name: 'lamp' }, ['/price']);
    expect(error.message).toBe('is required');
  });

  it('an input the capability does not declare → 400 invalid_request at /color', async () => {
    await expectInvalid({ name: 'lamp', price: 5, color: 'red' }, ['/color']);
  });

  it('maxLength and minimum are enforced', async () => {
    await expectInvalid({ name: 'x'.repeat(51), price: -0.5 }, ['/name', '/price']);
  });

  it('several errors at once list every failing path', async () => {
    await expectInvalid({ name: 42, currency: ['USD'], color: 'red', size: 'L' }, [
      '/name',
      '/price',
      '/currency',
      '/color',
      '/size',
    ]);
  });
});

describe('§2.13 / §5.11 grant constraints', () => {
  let limited: { agent: TestKey; agentId: string };
  beforeAll(async () => {
    limited = await gw.p.activeAgent([{ name: 'create_transfer', constraints: TRANSFER_LIMITS }]);
  });

  it('the approved grant carries the proposed constraints', async () => {
    const detail = await gw.p.admin('GET', `/admin/agents/${limited.agentId}`);
    const grant = detail.body.agent_capability_grants.find(
      (g: { capability: string }) => g.capability === 'create_transfer',
    );
    expect(grant).toMatchObject({ status: 'active', constraints: TRANSFER_LIMITS });
  });

  it('arguments within the constraints reach the upstream', async () => {
    const args = { amount: 1000, currency: 'EUR', account: 'acc_1' };
    const reply = await gw.p.execute(limited.agent, limited.agentId, 'create_transfer', args);
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/transfers');
    expect(seen).toHaveLength(1);
    expect(JSON.parse(seen[0]?.body.toString('utf8') ?? '')).toEqual(args);
  });

  it('amount 5000 → 403 constraint_violated with the §5.11 violations shape', async () => {
    const reply = await gw.p.execute(limited.agent, limited.agentId, 'create_transfer', {
      amount: 5000,
      currency: 'USD',
    });
    expect(reply.status).toBe(403);
    expect(reply.body).toEqual({
      error: 'constraint_violated',
      message: expect.any(String),
      violations: [{ field: 'amount', constraint: { max: 1000 }, actual: 5000 }],
    });
    expectUpstreamUntouched();
  });

  it('two violations at once are both listed', async () => {
    const reply = await gw.p.execute(limited.agent, limited.agentId, 'create_transfer', {
      amount: 5000,
      currency: 'GBP',
    });
    expectError(reply, 403, 'constraint_violated');
    expect(reply.body.violations).toEqual([
      { field: 'amount', constraint: { max: 1000 }, actual: 5000 },
      { field: 'currency', constraint: { in: ['USD', 'EUR'] }, actual: 'GBP' },
    ]);
    expectUpstreamUntouched();
  });

  it('amount "500" (a string) is rejected by the schema first → 400 invalid_request, not read as 500', async () => {
    const reply = await gw.p.execute(limited.agent, limited.agentId, 'create_transfer', {
      amount: '500',
      currency: 'USD',
    });
    expectError(reply, 400, 'invalid_request');
    expect(reply.body.errors.map((e: { path: string }) => e.path)).toEqual(['/amount']);
    expectUpstreamUntouched();
  });

  it('currency ["USD"] (an array holding an allowed value) → 400 invalid_request', async () => {
    const reply = await gw.p.execute(limited.agent, limited.agentId, 'create_transfer', {
      amount: 10,
      currency: ['USD'],
    });
    expectError(reply, 400, 'invalid_request');
    expect(reply.body.errors.map((e: { path: string }) => e.path)).toEqual(['/currency']);
    expectUpstreamUntouched();
  });

  describe('an exact-value constraint on an optional field', () => {
    let pinned: { agent: TestKey; agentId: string };
    beforeAll(async () => {
      pinned = await gw.p.activeAgent([
        { name: 'create_transfer', constraints: { account: 'acc_456', amount: { min: 0, max: 1000 } } },
      ]);
    });

    it('the exact value passes', async () => {
      const reply = await gw.p.execute(pinned.agent, pinned.agentId, 'create_transfer', {
        amount: 0,
        currency: 'USD',
        account: 'acc_456',
      });
      expect(reply.status).toBe(200);
      expect(gw.upstream.received('/v1/transfers')).toHaveLength(1);
    });

    it('another value → 403 constraint_violated', async () => {
      const reply = await gw.p.execute(pinned.agent, pinned.agentId, 'create_transfer', {
        amount: 10,
        currency: 'USD',
        account: 'acc_999',
      });
      expectError(reply, 403, 'constraint_violated');
      expect(reply.body.violations).toEqual([{ field: 'account', constraint: 'acc_456', actual: 'acc_999' }]);
      expectUpstreamUntouched();
    });

    it('the constrained field left out → 403 constraint_violated (a missing value satisfies nothing)', async () => {
      const reply = await gw.p.execute(pinned.agent, pinned.agentId, 'create_transfer', {
        amount: 10,
        currency: 'USD',
      });
      expectError(reply, 403, 'constraint_violated');
      expect(reply.body.violations).toEqual([{ field: 'account', constraint: 'acc_456', actual: null }]);
      expectUpstreamUntouched();
    });

    it('below min → 403 constraint_violated naming min', async () => {
      const reply = await gw.p.execute(pinned.agent, pinned.agentId, 'create_transfer', {
        amount: -1,
        currency: 'USD',
        account: 'acc_456',
      });
      expectError(reply, 403, 'constraint_violated');
      expect(reply.body.violations).toEqual([{ field: 'amount', constraint: { min: 0 }, actual: -1 }]);
      expectUpstreamUntouched();
    });
  });

  it('a stored grant with an unknown operator → 400 unknown_constraint_operator, never "no constraint"', async () => {
    const fx = await gw.p.activeAgent([{ name: 'create_transfer', constraints: { amount: { max: 1000 } } }]);
    const ctx = gw.p.proxy.protocol;
    const grant = (await ctx.store.grants(fx.agentId)).find((g) => g.capability === 'create_transfer');
    expect(grant?.status).toBe('active');
    await ctx.write((tx) =>
      tx.updateGrant(grant?.id ?? '', {
        constraints: { amount: { max: 1000, less_than_or_close: 5 }, currency: { regex: '^U' } },
      }),
    );
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'create_transfer', { amount: 1, currency: 'USD' });
    expectError(reply, 400, 'unknown_constraint_operator');
    expect(reply.body.unknown_operators).toEqual(['less_than_or_close', 'regex']);
    expectUpstreamUntouched();
  });
});

describe('§8.13 per-capability rate limit (policy rate_limits.per_capability)', () => {
  it('past the limit → 429 rate_limited with Retry-After, and the upstream is not called', async () => {
    const a = await gw.p.activeAgent(['ping']);
    const b = await gw.p.activeAgent(['ping']);
    expect((await gw.p.execute(a.agent, a.agentId, 'ping', {})).status).toBe(200);
    // The limit counts executions of the capability over all agents.
    expect((await gw.p.execute(b.agent, b.agentId, 'ping', {})).status).toBe(200);
    const limited = await gw.p.execute(a.agent, a.agentId, 'ping', {});
    expectError(limited, 429, 'rate_limited');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(gw.upstream.received('/v1/public/ping')).toHaveLength(2);
    // Another capability is not limited by ping's bucket.
    const other = await gw.p.activeAgent(['get_item']);
    expect((await gw.p.execute(other.agent, other.agentId, 'get_item', { itemId: 'rl' })).status).toBe(200);

    gw.p.clock.advance(61_000);
    expect((await gw.p.execute(b.agent, b.agentId, 'ping', {})).status).toBe(200);
    expect(gw.upstream.received('/v1/public/ping')).toHaveLength(3);
  });
});

describe('§8.13 high-risk capabilities: tighter limits (policy rate_limits.high_risk)', () => {
  it('each high-risk capability has its own per-agent budget; other capabilities keep theirs', async () => {
    const g = await startGateway({
      api: CREDENTIALS,
      env: ENV,
      policy: `${BASE_POLICY}  high_risk: {per_agent: 2/1m}\ncapabilities:\n  high_risk: [create_item, delete_item]\n`,
    });
    try {
      const a = await g.p.activeAgent(['create_item', 'delete_item', 'get_item']);
      const create = () => g.p.execute(a.agent, a.agentId, 'create_item', { name: 'lamp', price: 5 });
      expect((await create()).status).toBe(200);
      expect((await create()).status).toBe(200);
      const limited = await create();
      expectError(limited, 429, 'rate_limited', /create_item/);
      expect(g.upstream.received('/v1/items')).toHaveLength(2);
      // Another high-risk capability has a budget of its own; a read is not limited by either.
      expect((await g.p.execute(a.agent, a.agentId, 'delete_item', { itemId: 'x' })).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        expect((await g.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'x' })).status).toBe(200);
      }
      // Another agent is not held back by this one's budget.
      const b = await g.p.activeAgent(['create_item']);
      expect((await g.p.execute(b.agent, b.agentId, 'create_item', { name: 'cup', price: 1 })).status).toBe(
        200,
      );
    } finally {
      await g.close();
    }
  });
});

describe('§11 activity log of executions', () => {
  async function executeActivity(g: Gateway, agentId: string): Promise<any[]> {
    await g.p.proxy.flushActivity();
    const reply = await g.p.admin('GET', `/admin/activity?agent_id=${encodeURIComponent(agentId)}`);
    expect(reply.status).toBe(200);
    return (reply.body.activity as any[]).filter((r: { type: string }) => r.type === 'execute');
  }

  it('records success and rejection with agent, host, user, capability, outcome and jti; arguments off by default', async () => {
    const fx = await gw.p.activeAgent([{ name: 'create_transfer', constraints: { amount: { max: 1000 } } }]);
    const args = { amount: 10, currency: 'USD', account: 'acct-private-4242' };
    const ok = await gw.p.execute(fx.agent, fx.agentId, 'create_transfer', args, {
      extra: { jti: 'act-ok-1' },
    });
    expect(ok.status).toBe(200);
    const bad = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'create_transfer',
      { ...args, amount: 5000 },
      {
        extra: { jti: 'act-bad-1' },
      },
    );
    expectError(bad, 403, 'constraint_violated');
    const missing = await gw.p.execute(
      fx.agent,
      fx.agentId,
      'get_item',
      { itemId: 'acct-private-4242' },
      {
        extra: { jti: 'act-ng-1' },
      },
    );
    expectError(missing, 403, 'capability_not_granted');

    const records = await executeActivity(gw, fx.agentId);
    const byJti = new Map(records.map((r) => [r.jti, r]));
    expect(records).toHaveLength(3);
    const common = { type: 'execute', agent_id: fx.agentId, host_id: fx.hostId, user_id: 'alice' };
    expect(byJti.get('act-ok-1')).toMatchObject({
      ...common,
      capability: 'create_transfer',
      outcome: 'success',
      upstream_status: 200,
      latency_ms: expect.any(Number),
    });
    expect(byJti.get('act-bad-1')).toMatchObject({
      ...common,
      capability: 'create_transfer',
      outcome: 'constraint_violated',
    });
    expect(byJti.get('act-bad-1')).not.toHaveProperty('upstream_status');
    expect(byJti.get('act-ng-1')).toMatchObject({
      ...common,
      capability: 'get_item',
      outcome: 'capability_not_granted',
    });
    expect(ok.headers.get('x-request-id')).toBe(byJti.get('act-ok-1').detail.request_id);
    for (const r of records) expect(r.detail).not.toHaveProperty('arguments');
    expect(JSON.stringify(records)).not.toContain('acct-private-4242');
  });

  it('a rejected JWT is not attributed to the agent it names (nothing verified to record)', async () => {
    const fx = await gw.p.activeAgent(['get_item']);
    const reply = await gw.p.execute(fx.agent, fx.agentId, 'get_item', { itemId: 'z' }, { aud: gw.p.issuer });
    expectError(reply, 401, 'invalid_jwt');
    expect(await executeActivity(gw, fx.agentId)).toEqual([]);
  });

  it('records the arguments when the policy sets audit.log_arguments: true', async () => {
    const g = await startGateway({
      api: CREDENTIALS,
      env: ENV,
      policy: `${BASE_POLICY}audit:\n  log_arguments: true\n`,
    });
    try {
      const fx = await g.p.activeAgent([{ name: 'create_transfer', constraints: { amount: { max: 1000 } } }]);
      const args = { amount: 10, currency: 'USD', account: 'acct-logged-77' };
      expect((await g.p.execute(fx.agent, fx.agentId, 'create_transfer', args)).status).toBe(200);
      const bad = { amount: 5000, currency: 'USD' };
      expectError(
        await g.p.execute(fx.agent, fx.agentId, 'create_transfer', bad),
        403,
        'constraint_violated',
      );
      const records = await executeActivity(g, fx.agentId);
      expect(records).toHaveLength(2);
      const success = records.find((r) => r.outcome === 'success');
      const rejected = records.find((r) => r.outcome === 'constraint_violated');
      expect(success.detail.arguments).toEqual(args);
      expect(rejected.detail.arguments).toEqual(bad);
      expect(g.upstream.received('/v1/transfers')).toHaveLength(1);
    } finally {
      await g.close();
    }
  });
});

/**
 * A POST over raw HTTP, so the body can be sent with a declared Content-Length or chunked. The
 * proxy may answer and close before the whole body is written; that write error is expected.
 */
function rawPost(token: string, body: string, chunked: boolean): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(gw.p.proxy.url);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest(
      {
        hostname,
        port,
        method: 'POST',
        path: '/capability/execute',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...(chunked
            ? { 'transfer-encoding': 'chunked' }
            : { 'content-length': String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        answered = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (chunked) {
      for (let i = 0; i < body.length; i += 1024) req.write(body.slice(i, i + 1024));
      req.end();
    } else {
      req.end(body);
    }
  });
}
