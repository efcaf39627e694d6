/**
 * A stranger's host JWT is admitted only while its client has budget left for new hosts
 * (unknown_host_registration on POST /agent/register, per_ip on GET /capability/list), and that is
 * asked before the `host_jwks_url` it names is fetched (§8.12) or its signature checked: once the
 * budget is used up, further requests cost no fetch (README "One order for every request").
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeConfig } from '../../helpers/browser.js';
import { jsonRoute, startJwksServer, type JwksServer } from '../../helpers/jwks-server.js';
import { generateTestKey, signJwt, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { createTestPki, type TestPki } from '../../helpers/tls-ca.js';

type Kid = TestKey & { kid: string };

let pki: TestPki;
let server: JwksServer;
let p: TestProtocol | undefined;

const POLICY = [
  'rate_limits:',
  '  per_ip: 2/1m',
  '  failed_auth_per_ip: 2/1m',
  '  unknown_host_registration: 2/10m',
  '',
].join('\n');
const ATTEMPTS = 10;

beforeAll(async () => {
  pki = createTestPki();
  server = await startJwksServer({ key: pki.key, cert: pki.cert });
});
afterAll(async () => {
  await server.close();
  pki.cleanup();
});
afterEach(async () => {
  await p?.close();
  p = undefined;
});

async function start(): Promise<TestProtocol> {
  const config = writeConfig(
    `jwks:\n  allowed_cidrs: [127.0.0.1]\n  ca_file: ${pki.caFile}\n  timeout: 2s\n  refresh_interval: 30s\n`,
  );
  return startProtocol({ policy: POLICY, overrides: { config, specs: [PETSTORE], mockUpstream: true } });
}

/** A fresh host key published at its own path; its host JWT naming that URL. */
async function strangerToken(q: TestProtocol, path: string): Promise<string> {
  const host: Kid = { ...(await generateTestKey()), kid: `k-${path}` };
  server.route(path, jsonRoute({ keys: [{ ...host.publicJwk, kid: host.kid }] }));
  const agent = await generateTestKey();
  return signJwt(
    host,
    'host+jwt',
    {
      iss: host.thumbprint,
      aud: q.issuer,
      host_jwks_url: `https://127.0.0.1:${server.port}${path}`,
      agent_public_key: agent.publicJwk,
    },
    { nowMs: q.clock.now(), header: { kid: host.kid } },
  );
}

describe('a used-up budget stops the work, not only the answer', () => {
  it('registrations past unknown_host_registration make the proxy fetch nothing', async () => {
    p = await start();
    const before = server.requests.length;
    const statuses: number[] = [];
    for (let i = 0; i < ATTEMPTS; i++) {
      const r = await p.request('POST', '/agent/register', {
        token: await strangerToken(p, `/reg/${i}.json`),
        body: { name: `stranger ${i}` },
      });
      statuses.push(r.status);
    }
    // The budget answers as documented …
    expect(statuses.slice(0, 2)).toEqual([200, 200]);
    expect(statuses.slice(2).every((s) => s === 429)).toBe(true);
    // … but each refused request was fetched first: the bound on outbound fetches is the budget.
    const fetches = server.requests.length - before;
    expect(fetches, `JWKS fetches for ${ATTEMPTS} requests, ${statuses.join(',')}`).toBeLessThanOrEqual(2);
  });

  it('capability listing with a stranger’s host_jwks_url past per_ip fetches nothing', async () => {
    p = await start();
    const before = server.requests.length;
    const statuses: number[] = [];
    for (let i = 0; i < ATTEMPTS; i++) {
      const r = await p.request('GET', '/capability/list', {
        token: await strangerToken(p, `/list/${i}.json`),
      });
      statuses.push(r.status);
    }
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(ATTEMPTS - 2);
    const fetches = server.requests.length - before;
    expect(fetches, `JWKS fetches for ${ATTEMPTS} listings, ${statuses.join(',')}`).toBeLessThanOrEqual(2);
  });
});

describe('a pending host at its agent cap', () => {
  it('is refused before the agent_jwks_url it names is fetched', async () => {
    const config = writeConfig(
      `jwks:\n  allowed_cidrs: [127.0.0.1]\n  ca_file: ${pki.caFile}\n  timeout: 2s\n  refresh_interval: 30s\n`,
    );
    p = await startProtocol({
      policy: 'rate_limits:\n  unknown_host_registration: null\npending_hosts:\n  max_agents: 2\n',
      overrides: { config, specs: [PETSTORE], mockUpstream: true },
    });
    const host = await generateTestKey();
    for (let i = 0; i < 2; i++) {
      expect((await p.register(host, { name: `agent ${i}` })).status).toBe(200);
    }
    const agent: Kid = { ...(await generateTestKey()), kid: 'capped' };
    server.route('/capped/agent.json', jsonRoute({ keys: [{ ...agent.publicJwk, kid: agent.kid }] }));
    const before = server.requests.length;
    const token = await signJwt(
      host,
      'host+jwt',
      {
        iss: host.thumbprint,
        aud: p.issuer,
        host_public_key: host.publicJwk,
        agent_jwks_url: `https://127.0.0.1:${server.port}/capped/agent.json`,
        agent_kid: agent.kid,
      },
      { nowMs: p.clock.now() },
    );
    const third = await p.request('POST', '/agent/register', { token, body: { name: 'agent 3' } });
    expect(third.status).toBe(403);
    expect(third.body.limit).toBe('pending_hosts.max_agents');
    expect(server.requests.length).toBe(before);
  });
});

describe('the longer budget of new hosts kept pending', () => {
  it('once a client has used it up, a stranger host_jwks_url is not fetched either', async () => {
    const config = writeConfig(
      `jwks:\n  allowed_cidrs: [127.0.0.1]\n  ca_file: ${pki.caFile}\n  timeout: 2s\n  refresh_interval: 30s\n`,
    );
    // max_hosts 10: one client may keep a tenth, one new host over the pending lifetime.
    p = await startProtocol({
      policy: 'rate_limits:\n  unknown_host_registration: 1000/10m\npending_hosts:\n  max_hosts: 10\n',
      overrides: { config, specs: [PETSTORE], mockUpstream: true },
    });
    const before = server.requests.length;
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await p.request('POST', '/agent/register', {
        token: await strangerToken(p, `/kept/${i}.json`),
        body: { name: `stranger ${i}` },
      });
      statuses.push(r.status);
    }
    expect(statuses).toEqual([200, 429, 429, 429, 429]);
    expect(server.requests.length - before).toBe(1);
  });
});
