/**
 * Keys from URLs end to end (§4.1, §4.2, §8.7, §8.12, §10.4): hosts and agents registered by
 * JWKS URL served over real TLS by a test server whose certificate a test CA issued.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CACHE_MIN_MS } from '../../../src/protocol/jwks/cache.js';
import { writeConfig } from '../../helpers/browser.js';
import { jsonRoute, redirectRoute, startJwksServer, type JwksServer } from '../../helpers/jwks-server.js';
import { generateTestKey, signJwt, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { createTestPki, type TestPki } from '../../helpers/tls-ca.js';

type Kid = TestKey & { kid: string };

let pki: TestPki;
let server: JwksServer;
let p: TestProtocol;

function jwk(key: Kid): Record<string, unknown> {
  return { ...key.publicJwk, kid: key.kid };
}
async function kidKey(kid: string): Promise<Kid> {
  return { ...(await generateTestKey()), kid };
}
function publish(path: string, ...keys: Kid[]): void {
  server.route(path, jsonRoute({ keys: keys.map(jwk) }));
}
const base = (): string => `https://127.0.0.1:${server.port}`;

function hostToken(host: Kid, claims: Record<string, unknown>, q: TestProtocol = p): Promise<string> {
  return signJwt(
    host,
    'host+jwt',
    { iss: host.thumbprint, aud: q.issuer, ...claims },
    { nowMs: q.clock.now(), header: { kid: host.kid } },
  );
}
function agentToken(agent: Kid, agentId: string, iss?: string): Promise<string> {
  return signJwt(
    agent,
    'agent+jwt',
    { sub: agentId, aud: p.executeLocation, ...(iss ? { iss } : {}) },
    { nowMs: p.clock.now(), header: { kid: agent.kid } },
  );
}
async function execute(agent: Kid, agentId: string, iss?: string) {
  return p.request('POST', '/capability/execute', {
    token: await agentToken(agent, agentId, iss),
    body: { capability: 'list_pets', arguments: {} },
  });
}

/** A host and agent by URL, approved by the operator with list_pets. */
async function registeredPair(name: string) {
  const host = await kidKey(`${name}-h1`);
  const agent = await kidKey(`${name}-a1`);
  publish(`/${name}/host.json`, host);
  publish(`/${name}/agent.json`, agent);
  const token = await hostToken(host, {
    host_jwks_url: `${base()}/${name}/host.json`,
    agent_jwks_url: `${base()}/${name}/agent.json`,
    agent_kid: agent.kid,
  });
  const reg = await p.request('POST', '/agent/register', {
    token,
    body: { name: `${name} agent`, capabilities: ['list_pets'] },
  });
  expect(reg.status, JSON.stringify(reg.body)).toBe(200);
  const approval = await p.pendingApproval(reg.body.agent_id);
  const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
  expect(ok.status).toBe(200);
  return { host, agent, agentId: reg.body.agent_id as string, hostId: reg.body.host_id as string };
}

beforeAll(async () => {
  pki = createTestPki();
  server = await startJwksServer({ key: pki.key, cert: pki.cert });
  const config = writeConfig(
    `jwks:\n  allowed_cidrs: [127.0.0.1]\n  ca_file: ${pki.caFile}\n  timeout: 500ms\n  refresh_interval: 30s\n`,
  );
  p = await startProtocol({ overrides: { config, specs: [PETSTORE], mockUpstream: true } });
});
afterAll(async () => {
  await p.close();
  await server.close();
  pki.cleanup();
});

describe('hosts and agents registered by JWKS URL (§4.2, §5.3)', () => {
  it('registers a host and an agent by URL; the agent executes', async () => {
    const { agent, agentId, host } = await registeredPair('basic');
    const reply = await execute(agent, agentId, host.thumbprint);
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    const status = await p.request('GET', `/agent/status?agent_id=${agentId}`, {
      token: await hostToken(host, { host_jwks_url: `${base()}/basic/host.json` }),
    });
    expect(status.body).toMatchObject({ status: 'active' });
  });

  it('§8.7 picks up a new agent kid on a kid miss and drops a removed key after the refresh', async () => {
    const { agent, agentId } = await registeredPair('rotate');
    const next = { ...agent, ...(await generateTestKey()), kid: 'rotate-a2' };
    publish('/rotate/agent.json', agent, next);
    // A kid miss right after the last fetch waits for refresh_interval (bounded refresh).
    p.clock.advance(30_000);
    expect((await execute(next, agentId)).status).toBe(200);
    publish('/rotate/agent.json', next);
    expect((await execute(agent, agentId)).status).toBe(200);
    p.clock.advance(CACHE_MIN_MS);
    const old = await execute(agent, agentId);
    expect({ status: old.status, error: old.body.error }).toEqual({ status: 401, error: 'invalid_jwt' });
    expect((await execute(next, agentId)).status).toBe(200);
  });

  it('§8.7 a host rotating its JWKS key is found by its URL and its identifier follows', async () => {
    const { host, agent, agentId, hostId } = await registeredPair('hostrot');
    const next = await kidKey('hostrot-h2');
    publish('/hostrot/host.json', host, next);
    p.clock.advance(30_000);
    // An agent JWT with the new iss before any host JWT: resolved by sub (§4.5 step 4).
    expect((await execute(agent, agentId, next.thumbprint)).status).toBe(200);
    const status = await p.request('GET', `/agent/status?agent_id=${agentId}`, {
      token: await hostToken(next, { host_jwks_url: `${base()}/hostrot/host.json` }),
    });
    expect(status.status, JSON.stringify(status.body)).toBe(200);
    expect(status.body.host_id).toBe(hostId);
    const view = await p.admin('GET', `/admin/hosts/${hostId}`);
    expect(view.body).toMatchObject({ thumbprint: next.thumbprint, jwks_url: `${base()}/hostrot/host.json` });
  });

  it('§8.7 the old host identifier works while the old key is published, and not after it is removed', async () => {
    const { host, agent, agentId, hostId } = await registeredPair('grace');
    const url = `${base()}/grace/host.json`;
    const next = await kidKey('grace-h2');
    publish('/grace/host.json', host, next);
    p.clock.advance(30_000); // past refresh_interval, so the kid miss fetches h2
    // A host JWT signed with h2 records the rotation: the stored identifier is now h2's thumbprint.
    const rotated = await p.request('GET', `/agent/status?agent_id=${agentId}`, {
      token: await hostToken(next, { host_jwks_url: url }),
    });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    expect((await p.admin('GET', `/admin/hosts/${hostId}`)).body).toMatchObject({
      thumbprint: next.thumbprint,
    });
    // Grace period: both keys published, so an agent JWT still naming the old iss is accepted.
    const graced = await execute(agent, agentId, host.thumbprint);
    expect(graced.status, JSON.stringify(graced.body)).toBe(200);
    expect((await execute(agent, agentId, next.thumbprint)).status).toBe(200);
    // The host drops h1: the cached set still has it until it is stale (grace matching the cache TTL)...
    publish('/grace/host.json', next);
    expect((await execute(agent, agentId, host.thumbprint)).status).toBe(200);
    // ...then, past CACHE_MIN_MS, the set is fetched again without h1 and the old iss is refused.
    p.clock.advance(CACHE_MIN_MS);
    const old = await execute(agent, agentId, host.thumbprint);
    expect({ status: old.status, error: old.body.error }).toEqual({ status: 401, error: 'invalid_jwt' });
    expect(old.body.message).toMatch(/iss does not identify the host/);
    const current = await execute(agent, agentId, next.thumbprint);
    expect(current.status, JSON.stringify(current.body)).toBe(200);
  });

  it('§4.5 step 4: an agent JWT whose iss is neither its host nor a key of its host set is refused', async () => {
    const { agent, agentId } = await registeredPair('iss');
    const other = await p.linkedHost('bob');
    for (const iss of [other.key.thumbprint, (await generateTestKey()).thumbprint, 'not-a-thumbprint']) {
      const reply = await execute(agent, agentId, iss);
      expect({ status: reply.status, error: reply.body.error }, iss).toEqual({
        status: 401,
        error: 'invalid_jwt',
      });
      expect(reply.body.message).toMatch(/iss does not identify the host/);
    }
  });

  it('§8.7 the key delivery mode is fixed: a JWKS host cannot present an inline key or rotate inline', async () => {
    const { host, agentId } = await registeredPair('mode');
    const inline = await signJwt(
      host,
      'host+jwt',
      { iss: host.thumbprint, aud: p.issuer, host_public_key: host.publicJwk },
      { nowMs: p.clock.now(), header: { kid: host.kid } },
    );
    const status = await p.request('GET', `/agent/status?agent_id=${agentId}`, { token: inline });
    expect({ status: status.status, error: status.body.error }).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    const rotate = await p.request('POST', '/host/rotate-key', {
      token: await hostToken(host, { host_jwks_url: `${base()}/mode/host.json` }),
      body: { public_key: (await generateTestKey()).publicJwk },
    });
    expect({ status: rotate.status, message: rotate.body.message }).toMatchObject({
      status: 400,
      message: expect.stringMatching(/publish the new key there/),
    });
  });

  it('§10.4 keeps the last good keys while the URL is down', async () => {
    const { agent, agentId } = await registeredPair('down');
    server.route('/down/agent.json', (_req, res) => {
      res.writeHead(503);
      res.end();
    });
    p.clock.advance(CACHE_MIN_MS);
    expect((await execute(agent, agentId)).status).toBe(200);
  });
});

describe('a JWKS host JWT is bound to the key its kid names (§4.2, §4.5.1)', () => {
  async function hostStatus(agentId: string, token: string) {
    return p.request('GET', `/agent/status?agent_id=${agentId}`, { token });
  }
  function expectInvalidJwt(reply: { status: number; body: any }, message: RegExp): void {
    expect({ status: reply.status, error: reply.body.error }).toEqual({ status: 401, error: 'invalid_jwt' });
    expect(reply.body.message, reply.body.message).toMatch(message);
  }

  it('§4.5.1 step 4: a stranger cannot "rotate" into a host by its URL and the kid of its key', async () => {
    const { host, agentId, hostId } = await registeredPair('hijack');
    const url = `${base()}/hijack/host.json`;
    const before = await p.admin('GET', `/admin/hosts/${hostId}`);
    // Its own key, its own iss (its thumbprint), the victim's URL and kid.
    const stranger = { ...(await generateTestKey()), kid: host.kid };
    const reply = await hostStatus(agentId, await hostToken(stranger, { host_jwks_url: url }));
    expectInvalidJwt(reply, /iss is not the JWK thumbprint .* of the key kid names/);
    const after = await p.admin('GET', `/admin/hosts/${hostId}`);
    expect(after.body).toEqual(before.body);
    expect(after.body).toMatchObject({ thumbprint: host.thumbprint, public_key: host.publicJwk });
    const genuine = await hostStatus(agentId, await hostToken(host, { host_jwks_url: url }));
    expect(genuine.status, JSON.stringify(genuine.body)).toBe(200);
    expect(genuine.body.host_id).toBe(hostId);
  });

  it('§4.2 iss must be the thumbprint of the key kid names, even another key of the host set', async () => {
    const { host, agentId, hostId } = await registeredPair('other-kid');
    const url = `${base()}/other-kid/host.json`;
    const h2 = await kidKey('other-kid-h2');
    publish('/other-kid/host.json', host, h2);
    p.clock.advance(30_000); // past refresh_interval, so the kid miss fetches h2
    const reply = await hostStatus(
      agentId,
      await hostToken(h2, { iss: host.thumbprint, host_jwks_url: url }),
    );
    expectInvalidJwt(reply, /iss is not the JWK thumbprint .* of the key kid names/);
    const view = await p.admin('GET', `/admin/hosts/${hostId}`);
    expect(view.body).toMatchObject({ thumbprint: host.thumbprint, public_key: host.publicJwk });
    expect((await hostStatus(agentId, await hostToken(host, { host_jwks_url: url }))).status).toBe(200);
  });

  it.each([
    ['with host_jwks_url', true, /A host JWT using host_jwks_url must name its key in the kid header/],
    ['without host_jwks_url', false, /A JWKS-based host must name its key in the kid header/],
  ])('§4.2 a known JWKS host JWT without kid, %s, is refused', async (_how, withUrl, message) => {
    const name = withUrl ? 'nokid-url' : 'nokid';
    const { host, agentId } = await registeredPair(name);
    const claims = {
      iss: host.thumbprint,
      aud: p.issuer,
      host_jwks_url: withUrl ? `${base()}/${name}/host.json` : undefined,
    };
    // No kid at all (an empty one is refused earlier, by the JWT decoder).
    const token = await signJwt(host, 'host+jwt', claims, { nowMs: p.clock.now() });
    expectInvalidJwt(await hostStatus(agentId, token), message);
  });
});

describe('§8.12 refusals at registration', () => {
  let n = 0;
  /** A fresh host (own URL) each time: a cached set keeps a kid's first key for its TTL. */
  async function register(claims: Record<string, unknown>) {
    n += 1;
    const host = await kidKey('r-h1');
    publish(`/r${n}/host.json`, host);
    return p.request('POST', '/agent/register', {
      token: await hostToken(host, { host_jwks_url: `${base()}/r${n}/host.json`, ...claims }),
      body: { name: 'refused agent' },
    });
  }
  function expectRefused(reply: { status: number; body: any }, message: RegExp): void {
    expect({ status: reply.status, error: reply.body.error }).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    expect(reply.body.message, reply.body.message).toMatch(message);
  }

  it('refuses plain http (no development flag)', async () => {
    const plain = `http://127.0.0.1:${server.port}/a.json`;
    expectRefused(await register({ agent_jwks_url: plain, agent_kid: 'x' }), /must use https/);
  });

  it('refuses a redirect to a private address', async () => {
    server.route('/to-private', redirectRoute('https://10.0.0.1/agent.json'));
    expectRefused(
      await register({ agent_jwks_url: `${base()}/to-private`, agent_kid: 'x' }),
      /10\.0\.0\.1 is a private/,
    );
  });

  it('refuses an oversized JWKS', async () => {
    server.route('/huge.json', jsonRoute({ keys: [], pad: 'x'.repeat(70_000) }));
    expectRefused(await register({ agent_jwks_url: `${base()}/huge.json`, agent_kid: 'x' }), /larger than/);
  });

  it('gives up on a slow server at jwks.timeout', async () => {
    server.route('/slow.json', () => {
      /* never answers */
    });
    expectRefused(await register({ agent_jwks_url: `${base()}/slow.json`, agent_kid: 'x' }), /within 500 ms/);
  });

  it('refuses the same URL for host and agent (§4.2)', async () => {
    expectRefused(
      await register({ agent_jwks_url: `${base()}/r${n + 1}/host.json`, agent_kid: 'r-h1' }),
      /must point to different endpoints/,
    );
  });

  // Once shared, the host's key (a kid of the host's set) would sign agent JWTs accepted as the agent.
  it.each([
    ['a fragment (never sent)', (url: string) => `${url}#agent`],
    [
      'an upper-case scheme and a dot segment',
      (url: string) => url.replace('https:', 'HTTPS:').replace(/\/(r\d+)\//, '/x/../$1/'),
    ],
  ])('refuses the host URL spelled with %s for the agent (§4.2)', async (_how, spell) => {
    expectRefused(
      await register({ agent_jwks_url: spell(`${base()}/r${n + 1}/host.json`), agent_kid: 'r-h1' }),
      /must point to different endpoints/,
    );
  });
});

describe('§8.12 the address guard through the proxy', () => {
  it('refuses a URL resolving to 127.0.0.1 without the allow-list', async () => {
    const q = await startProtocol({
      overrides: { config: writeConfig(`jwks:\n  ca_file: ${pki.caFile}\n`), specs: [PETSTORE] },
    });
    try {
      const host = await kidKey('g-h1');
      publish('/g/host.json', host);
      const before = server.requests.length;
      const reply = await q.request('POST', '/agent/register', {
        token: await hostToken(
          host,
          { host_jwks_url: `${base()}/g/host.json`, agent_public_key: host.publicJwk },
          q,
        ),
        body: { name: 'guarded' },
      });
      expect({ status: reply.status, error: reply.body.error }).toEqual({
        status: 401,
        error: 'invalid_jwt',
      });
      expect(reply.body.message).toMatch(/127\.0\.0\.1 is a private, loopback/);
      expect(server.requests.length).toBe(before);
    } finally {
      await q.close();
    }
  });
});
