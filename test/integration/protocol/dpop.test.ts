/**
 * §4.4 proof of possession, the DPoP profile (RFC 9449): a JWT whose `cnf.jkt` names a key counts
 * only with `Authorization: DPoP` and a proof that key signed for this request; the policy's
 * `capabilities.dpop` requires such a JWT for the capabilities it lists (§4.5). Every proof here
 * is really signed; each refusal is checked to leave the upstream uncalled.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dpopProof } from '../../helpers/dpop.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { TestClock, type Reply } from '../../helpers/protocol.js';
import { json } from '../../helpers/upstream.js';

const POLICY = [
  'rate_limits:',
  '  unknown_host_registration: null',
  // Every refusal here is a failed authentication from one address.
  '  failed_auth_per_ip: null',
  'capabilities:',
  '  dpop: [create_item, start_job]',
].join('\n');

const ITEM = { name: 'lamp', price: 5 };

let gw: Gateway;
let clock: TestClock;
let agent: TestKey;
let agentId: string;
/** The key the agent binds its JWTs to (a key of its own, apart from its signing key). */
let proofKey: TestKey;

beforeAll(async () => {
  clock = new TestClock();
  gw = await startGateway({ policy: POLICY, clock });
  ({ agent, agentId } = await gw.p.activeAgent(['list_items', 'create_item', 'start_job', 'get_job']));
  proofKey = await generateTestKey();
});
afterAll(() => gw.close());
beforeEach(() => {
  gw.upstream.reset();
  gw.upstream.on('GET /v1/items', (_req, res) => json(res, 200, [{ id: 'i1' }]));
  gw.upstream.on('POST /v1/items', (_req, res) => json(res, 201, { id: 'i2' }));
});

/** A DPoP proof by `key` for `method url`, bound to `token`; `claims` and `header` override. */
function proof(
  key: TestKey,
  method: string,
  url: string,
  token: string,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  return dpopProof(key, { method, url, token, nowMs: clock.now() }, claims, header);
}

/** An agent JWT for the execute location, bound to `bindTo` (none: a plain bearer JWT). */
function executeToken(
  bindTo: TestKey | null = proofKey,
  extra: Record<string, unknown> = {},
): Promise<string> {
  return gw.p.agentToken(
    agent,
    agentId,
    { ...(bindTo ? { cnf: { jkt: bindTo.thumbprint } } : {}), ...extra },
    gw.p.executeLocation,
  );
}

function execute(
  token: string,
  capability: string,
  headers: Record<string, string>,
  args: Record<string, unknown> = {},
): Promise<Reply> {
  return gw.p.request('POST', '/capability/execute', {
    headers: { ...headers, 'content-type': 'application/json' },
    rawBody: JSON.stringify({ capability, arguments: args }),
  });
}

/** Execute with `Authorization: DPoP` and a proof made by `makeProof` for the bound token. */
async function executeProven(
  capability: string,
  makeProof: (token: string) => Promise<string> = (t) => proof(proofKey, 'POST', gw.p.executeLocation, t),
  token?: string,
): Promise<Reply> {
  const jwt = token ?? (await executeToken());
  const args = capability === 'create_item' ? ITEM : {};
  return execute(jwt, capability, { authorization: `DPoP ${jwt}`, dpop: await makeProof(jwt) }, args);
}

function expectProofRefused(reply: Reply, message: RegExp): void {
  expect(reply.status).toBe(401);
  expect(reply.body).toMatchObject({ error: 'invalid_jwt', message: expect.stringMatching(message) });
  expect(reply.headers.get('www-authenticate')).toContain('DPoP error="invalid_dpop_proof", algs="EdDSA"');
  expect(gw.upstream.received('/v1/items')).toHaveLength(0);
}

describe('§4.4 DPoP: discovery', () => {
  it('advertises the proof algorithms (RFC 9449 §5.1)', async () => {
    const reply = await gw.p.request('GET', '/.well-known/agent-configuration');
    expect(reply.body.dpop_signing_alg_values_supported).toEqual(['EdDSA']);
  });
});

describe('§4.4 DPoP: a bound JWT with its proof', () => {
  it('executes a capability the policy requires it for, and one it does not', async () => {
    const created = await executeProven('create_item');
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ data: { id: 'i2' } });
    const listed = await executeProven('list_items');
    expect(listed.body).toEqual({ data: [{ id: 'i1' }] });
    expect(gw.upstream.received('/v1/items')).toHaveLength(2);
  });

  it('a proof whose htu differs only in case of scheme and host, and carries a query, still matches', async () => {
    const url = new URL(gw.p.executeLocation);
    const shouted = `HTTP://${url.host.toUpperCase()}${url.pathname}?x=1#f`;
    const reply = await executeProven('list_items', (t) => proof(proofKey, 'POST', shouted, t));
    expect(reply.status).toBe(200);
  });

  it('the DPoP proof is not forwarded upstream', async () => {
    await executeProven('list_items');
    const [seen] = gw.upstream.received('/v1/items');
    expect(seen?.headers.dpop).toBeUndefined();
    expect(JSON.stringify(seen?.headers)).not.toContain('DPoP');
  });
});

describe('§4.4 DPoP: refusals (nothing reaches the upstream)', () => {
  it('a bound JWT sent as a bearer token → 401 (RFC 9449 §7.1: a stolen bound JWT is useless alone)', async () => {
    const token = await executeToken();
    const reply = await execute(token, 'list_items', { authorization: `Bearer ${token}` });
    expectProofRefused(reply, /bound to a key/);
  });

  it('a bound JWT as a bearer token with a valid proof beside it → 401 all the same', async () => {
    const token = await executeToken();
    const reply = await execute(token, 'list_items', {
      authorization: `Bearer ${token}`,
      dpop: await proof(proofKey, 'POST', gw.p.executeLocation, token),
    });
    expectProofRefused(reply, /bound to a key/);
  });

  it('"Authorization: DPoP" with a JWT that carries no cnf.jkt → 401', async () => {
    const token = await executeToken(null);
    const reply = await executeProven('list_items', undefined, token);
    expectProofRefused(reply, /cnf\.jkt/);
  });

  it('"Authorization: DPoP" without a DPoP header → 401', async () => {
    const token = await executeToken();
    expectProofRefused(
      await execute(token, 'list_items', { authorization: `DPoP ${token}` }),
      /needs a DPoP header/,
    );
  });

  it("a proof by the thief's own key, not the one cnf.jkt names → 401", async () => {
    const thief = await generateTestKey();
    const reply = await executeProven('list_items', (t) => proof(thief, 'POST', gw.p.executeLocation, t));
    expectProofRefused(reply, /another key than cnf\.jkt/);
  });

  it('a proof made for another URL, method or JWT → 401', async () => {
    const other = `${gw.p.issuer}/agent/request-capability`;
    expectProofRefused(
      await executeProven('list_items', (t) => proof(proofKey, 'POST', other, t)),
      /"htu" must be/,
    );
    expectProofRefused(
      await executeProven('list_items', (t) => proof(proofKey, 'GET', gw.p.executeLocation, t)),
      /"htm" must be POST/,
    );
    const another = await executeToken();
    expectProofRefused(
      await executeProven('list_items', () => proof(proofKey, 'POST', gw.p.executeLocation, another)),
      /"ath"/,
    );
    expectProofRefused(
      await executeProven('list_items', (t) =>
        proof(proofKey, 'POST', gw.p.executeLocation, t, { ath: undefined }),
      ),
      /"ath"/,
    );
  });

  it('a proof older than the JWT lifetime and skew, or from the future → 401', async () => {
    const now = Math.floor(clock.now() / 1000);
    expectProofRefused(
      await executeProven('list_items', (t) =>
        proof(proofKey, 'POST', gw.p.executeLocation, t, { iat: now - 91 }),
      ),
      /older than 60 seconds/,
    );
    expectProofRefused(
      await executeProven('list_items', (t) =>
        proof(proofKey, 'POST', gw.p.executeLocation, t, { iat: now + 31 }),
      ),
      /in the future/,
    );
    // Within the 60 s lifetime and the 30 s skew: accepted.
    const ok = await executeProven('list_items', (t) =>
      proof(proofKey, 'POST', gw.p.executeLocation, t, { iat: now - 85 }),
    );
    expect(ok.status).toBe(200);
  });

  it('a proof with the wrong typ or alg, a private key, no jwk, or a forged signature → 401', async () => {
    const url = gw.p.executeLocation;
    const cases: [(t: string) => Promise<string>, RegExp][] = [
      [(t) => proof(proofKey, 'POST', url, t, {}, { typ: 'JWT' }), /"typ" must be "dpop\+jwt"/],
      [(t) => proof(proofKey, 'POST', url, t, {}, { alg: 'ES256' }), /"alg" must be one of EdDSA/],
      [(t) => proof(proofKey, 'POST', url, t, {}, { jwk: undefined }), /"jwk"/],
      [
        (t) => proof(proofKey, 'POST', url, t, {}, { jwk: { ...proofKey.publicJwk, d: 'AAAA' } }),
        /private key material/,
      ],
      [(t) => proof(proofKey, 'POST', url, t, {}, { jku: 'https://evil.example/jwks' }), /"jku"/],
      [(t) => proof(proofKey, 'POST', url, t, { jti: undefined }), /"jti"/],
      [
        async (t) => {
          // The proof key's header, another key's signature.
          const forged = await proof(
            await generateTestKey(),
            'POST',
            url,
            t,
            {},
            { jwk: proofKey.publicJwk },
          );
          return forged;
        },
        /signature is invalid/,
      ],
    ];
    for (const [make, message] of cases) expectProofRefused(await executeProven('list_items', make), message);
  });

  it('two DPoP headers → 401', async () => {
    const token = await executeToken();
    const one = await proof(proofKey, 'POST', gw.p.executeLocation, token);
    const headers = new Headers({ authorization: `DPoP ${token}`, 'content-type': 'application/json' });
    headers.append('dpop', one);
    headers.append('dpop', one);
    const res = await fetch(`${gw.p.issuer}/capability/execute`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ capability: 'list_items' }),
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { message: string }).message).toMatch(/exactly one compact JWS/);
    expect(gw.upstream.received('/v1/items')).toHaveLength(0);
  });

  it('a JWT bound by mTLS (cnf["x5t#S256"]), which this server cannot check → 401, not a bearer token', async () => {
    const token = await gw.p.agentToken(
      agent,
      agentId,
      { cnf: { 'x5t#S256': 'A'.repeat(43) } },
      gw.p.executeLocation,
    );
    const reply = await execute(token, 'list_items', { authorization: `Bearer ${token}` });
    expectProofRefused(reply, /Only DPoP bindings/);
  });

  it('a JWT bound by DPoP and mTLS at once is refused: the mTLS half cannot be checked, so it is not dropped', async () => {
    const token = await executeToken(null, { cnf: { jkt: proofKey.thumbprint, 'x5t#S256': 'A'.repeat(43) } });
    const reply = await executeProven(
      'create_item',
      (t) => proof(proofKey, 'POST', gw.p.executeLocation, t),
      token,
    );
    expectProofRefused(reply, /Only DPoP bindings/);
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a refused proof does not use up the JWT: the same JWT with a good proof then works', async () => {
    const token = await executeToken();
    const thief = await generateTestKey();
    expectProofRefused(
      await executeProven('list_items', (t) => proof(thief, 'POST', gw.p.executeLocation, t), token),
      /another key/,
    );
    const reply = await executeProven('list_items', undefined, token);
    expect(reply.status).toBe(200);
  });
});

describe('§4.5 capabilities.dpop: proof of possession required by policy', () => {
  it('a plain bearer JWT for a listed capability → 401 with the DPoP challenge, the upstream not called', async () => {
    const token = await executeToken(null);
    const reply = await execute(token, 'create_item', { authorization: `Bearer ${token}` }, ITEM);
    expect(reply.status).toBe(401);
    expect(reply.body).toMatchObject({
      error: 'invalid_jwt',
      message: expect.stringContaining('create_item'),
    });
    expect(reply.headers.get('www-authenticate')).toMatch(/^DPoP algs="EdDSA", Bearer/);
    expect(gw.upstream.received('/v1/items')).toHaveLength(0);
    // The same agent's bearer JWTs still serve what the policy does not list.
    const listed = await execute(await executeToken(null), 'list_items', {
      authorization: `Bearer ${await executeToken(null)}`,
    });
    expect(listed.status).toBe(200);
  });

  it("an async job's status poll of a listed capability needs a proven JWT too", async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, {}, { location: '/v1/jobs/j1' }));
    gw.upstream.on('GET /v1/jobs/j1', (_req, res) => json(res, 200, { status: 'completed', result: 7 }));
    const started = await executeProven('start_job');
    expect(started.status).toBe(202);
    const statusUrl: string = started.body.status_url;
    const path = new URL(statusUrl).pathname;

    const bearer = await gw.p.agentToken(agent, agentId, {}, statusUrl);
    const refused = await gw.p.request('GET', path, { token: bearer });
    expect(refused.status).toBe(401);
    expect(refused.body.message).toContain('start_job');
    expect(gw.upstream.received('/v1/jobs/j1')).toHaveLength(0);

    const bound = await gw.p.agentToken(agent, agentId, { cnf: { jkt: proofKey.thumbprint } }, statusUrl);
    const polled = await gw.p.request('GET', path, {
      headers: { authorization: `DPoP ${bound}`, dpop: await proof(proofKey, 'GET', statusUrl, bound) },
    });
    expect(polled.body).toEqual({ status: 'completed', result: 7 });
  });
});

describe('§4.4 DPoP beyond execute', () => {
  it("introspection reports a bound JWT's key as cnf.jkt (RFC 9449 §6.2)", async () => {
    const token = await gw.p.agentToken(agent, agentId, { cnf: { jkt: proofKey.thumbprint } });
    const reply = await gw.p.admin('POST', '/agent/introspect', { token });
    expect(reply.body).toMatchObject({ active: true, agent_id: agentId, cnf: { jkt: proofKey.thumbprint } });
    const capabilities = (body: { agent_capability_grants: { capability: string }[] }) =>
      body.agent_capability_grants.map((g) => g.capability).sort();
    expect(capabilities(reply.body)).toEqual(['create_item', 'get_job', 'list_items', 'start_job']);
    const plain = await gw.p.admin('POST', '/agent/introspect', {
      token: await gw.p.agentToken(agent, agentId),
    });
    expect(plain.body.active).toBe(true);
    expect(plain.body.cnf).toBeUndefined();
    // An unbound token cannot be used for what capabilities.dpop lists: a resource server asking
    // is not told it may.
    expect(capabilities(plain.body)).toEqual(['get_job', 'list_items']);
  });

  it('a host JWT bound to a key registers only with its proof (§4.4 on host-authenticated registration)', async () => {
    const host = await generateTestKey();
    const newAgent = await generateTestKey();
    const url = `${gw.p.issuer}/agent/register`;
    const hostToken = await gw.p.hostToken(host, {
      agent_public_key: newAgent.publicJwk,
      cnf: { jkt: proofKey.thumbprint },
    });
    const body = JSON.stringify({ name: 'bound host agent', capabilities: ['list_items'] });
    const asBearer = await gw.p.request('POST', '/agent/register', {
      headers: { authorization: `Bearer ${hostToken}`, 'content-type': 'application/json' },
      rawBody: body,
    });
    expect(asBearer.status).toBe(401);
    expect(asBearer.body.message).toMatch(/bound to a key/);

    const proven = await gw.p.request('POST', '/agent/register', {
      headers: {
        authorization: `DPoP ${hostToken}`,
        dpop: await proof(proofKey, 'POST', url, hostToken),
        'content-type': 'application/json',
      },
      rawBody: body,
    });
    expect(proven.status).toBe(200);
    expect(proven.body.agent_id).toEqual(expect.any(String));
  });
});
