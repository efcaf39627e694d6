/**
 * Agent JWTs of hosts registered by JWKS URL (§4.2, §4.5 steps 4–5, §8.7): iss names the agent's
 * own host, or a key its host's JWKS serves now; and the host/agent JWKS URL separation (§4.2
 * "Host and agent JWKS URLs MUST point to different endpoints"), however the URL is spelled.
 * Real proxy, real TLS JWKS server, real Ed25519 signatures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeConfig } from '../../helpers/browser.js';
import { jsonRoute, startJwksServer, type JwksServer } from '../../helpers/jwks-server.js';
import { generateTestKey, signJwt, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { createTestPki, type TestPki } from '../../helpers/tls-ca.js';

type Kid = TestKey & { kid: string };

let pki: TestPki;
let server: JwksServer;
let p: TestProtocol;

async function kidKey(kid: string): Promise<Kid> {
  return { ...(await generateTestKey()), kid };
}
function publish(path: string, ...keys: Kid[]): void {
  server.route(path, jsonRoute({ keys: keys.map((k) => ({ ...k.publicJwk, kid: k.kid })) }));
}
const base = (): string => `https://127.0.0.1:${server.port}`;

function hostToken(host: Kid, claims: Record<string, unknown>): Promise<string> {
  return signJwt(
    host,
    'host+jwt',
    { iss: host.thumbprint, aud: p.issuer, ...claims },
    { nowMs: p.clock.now(), header: { kid: host.kid } },
  );
}
function agentToken(key: Kid, agentId: string, claims: Record<string, unknown> = {}): Promise<string> {
  return signJwt(
    key,
    'agent+jwt',
    { sub: agentId, aud: p.executeLocation, ...claims },
    { nowMs: p.clock.now(), header: { kid: key.kid } },
  );
}
async function execute(token: string) {
  return p.request('POST', '/capability/execute', {
    token,
    body: { capability: 'list_pets', arguments: {} },
  });
}

async function registeredPair(name: string, agentUrl?: (hostUrl: string) => string) {
  const host = await kidKey(`${name}-h1`);
  const agent = await kidKey(`${name}-a1`);
  const hostUrl = `${base()}/${name}/host.json`;
  publish(`/${name}/host.json`, host, ...(agentUrl ? [agent] : []));
  publish(`/${name}/agent.json`, agent);
  const token = await hostToken(host, {
    host_jwks_url: hostUrl,
    agent_jwks_url: agentUrl ? agentUrl(hostUrl) : `${base()}/${name}/agent.json`,
    agent_kid: agent.kid,
  });
  const reg = await p.request('POST', '/agent/register', {
    token,
    body: { name: `${name} agent`, capabilities: ['list_pets'] },
  });
  return { host, agent, reg };
}

async function approvedPair(name: string) {
  const { host, agent, reg } = await registeredPair(name);
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
    `jwks:\n  allowed_cidrs: [127.0.0.1]\n  ca_file: ${pki.caFile}\n  timeout: 2s\n  refresh_interval: 30s\n`,
  );
  p = await startProtocol({
    overrides: { config, specs: [PETSTORE], mockUpstream: true },
    policy: 'rate_limits:\n  unknown_host_registration: null\n  failed_auth_per_ip: null\n',
  });
});
afterAll(async () => {
  await p.close();
  await server.close();
  pki.cleanup();
});

describe('§4.5 steps 4–5: an agent of a JWKS-based host and its iss claim', () => {
  it('control: iss = its own host thumbprint → 200', async () => {
    const { host, agent, agentId } = await approvedPair('ctl');
    const reply = await execute(await agentToken(agent, agentId, { iss: host.thumbprint }));
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  });

  it("iss = ANOTHER registered host's thumbprint (step 4 finds that host, step 5: agent does not belong to it) → 401", async () => {
    const mine = await approvedPair('mine');
    const theirs = await p.linkedHost('bob');
    // theirs is a known inline host: looking the host up by iss finds it, and the agent is not its.
    const view = await p.admin('GET', `/admin/hosts/${theirs.hostId}`);
    expect(view.body.thumbprint).toBe(theirs.key.thumbprint);
    const reply = await execute(await agentToken(mine.agent, mine.agentId, { iss: theirs.key.thumbprint }));
    expect({ status: reply.status, error: reply.body?.error }).toEqual({ status: 401, error: 'invalid_jwt' });
  });

  it('iss = a value that is no key of the host JWKS (step 4 fallback must verify iss against the JWKS) → 401', async () => {
    const mine = await approvedPair('garb');
    const reply = await execute(
      await agentToken(mine.agent, mine.agentId, { iss: 'not-a-thumbprint-of-anything' }),
    );
    expect({ status: reply.status, error: reply.body?.error }).toEqual({ status: 401, error: 'invalid_jwt' });
  });

  it('iss of a non-string type is still refused (control)', async () => {
    const mine = await approvedPair('nonstr');
    const reply = await execute(await agentToken(mine.agent, mine.agentId, { iss: 42 }));
    expect(reply.status).toBe(401);
  });
});

describe('§4.2 "Host and agent JWKS URLs MUST point to different endpoints"', () => {
  it('control: the identical URL string is refused → 400', async () => {
    const { reg } = await registeredPair('same', (u) => u);
    expect({ status: reg.status, error: reg.body?.error }).toEqual({ status: 400, error: 'invalid_request' });
  });

  it('the same endpoint spelled with a fragment (#agent: never sent to the server) → must be 400', async () => {
    const { reg } = await registeredPair('frag', (u) => `${u}#agent`);
    expect({ status: reg.status, error: reg.body?.error }).toEqual({ status: 400, error: 'invalid_request' });
  });

  it('the same endpoint spelled with an upper-case scheme and explicit default path dot-segment → must be 400', async () => {
    const { reg } = await registeredPair('dots', (u) =>
      u.replace('https://', 'HTTPS://').replace('/dots/', '/x/../dots/'),
    );
    expect({ status: reg.status, error: reg.body?.error }).toEqual({ status: 400, error: 'invalid_request' });
  });
});
