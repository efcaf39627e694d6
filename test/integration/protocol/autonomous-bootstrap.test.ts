/**
 * The §2.2.2 bootstrap switch (issue 11): `autonomous.bootstrap: operator` (default, §8.10) keeps
 * an unknown host's autonomous agent pending for the operator; `policy` admits it with only the
 * policy's autonomous grants, never high-risk or blocked ones, and the stranger stays bounded by
 * the unknown-host registration limit and the pending-host bounds. Real HTTP, real signed JWTs,
 * a real recording upstream that shows what reached the API.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { TestUpstream } from '../../helpers/upstream.js';

let upstream: TestUpstream;
let p: TestProtocol | undefined;

beforeAll(async () => {
  upstream = await TestUpstream.start();
});
afterAll(async () => {
  await upstream.close();
});
afterEach(async () => {
  await p?.close();
  p = undefined;
});

const BASE = `
modes: [delegated, autonomous]
capabilities:
  high_risk: [create_pet]
autonomous:
  grants: [list_pets, create_pet]
`;

async function start(extra = ''): Promise<TestProtocol> {
  p = await startProtocol({ policy: `${BASE}${extra}`, overrides: { upstreams: [upstream.url] } });
  return p;
}

const autonomous = { mode: 'autonomous', capabilities: ['list_pets', 'create_pet'] };

describe('autonomous.bootstrap: operator (the default)', () => {
  it('an unknown host registering an autonomous agent stays pending with nothing granted (§8.10)', async () => {
    const proxy = await start();
    const host = await generateTestKey();
    const reg = await proxy.register(host, autonomous);
    expect(reg.status).toBe(200);
    expect(reg.body.status).toBe('pending');
    expect(reg.body.agent_capability_grants.map((g: { status: string }) => g.status)).toEqual([
      'pending',
      'pending',
    ]);
    const hosts = await proxy.admin('GET', '/admin/hosts');
    expect(hosts.body.hosts).toMatchObject([{ status: 'pending', admitted_by_policy: false }]);
    const before = upstream.requests.length;
    const run = await proxy.execute(reg.agent, reg.body.agent_id, 'list_pets');
    expect(run.status).toBe(403);
    expect(run.body.error).toBe('host_pending');
    expect(upstream.requests.length).toBe(before);
  });
});

describe('autonomous.bootstrap: policy', () => {
  it('admits the unknown host: the agent is active with only the policy grants, the high-risk one is left to the operator', async () => {
    const proxy = await start('  bootstrap: policy\n');
    const host = await generateTestKey();
    const reg = await proxy.register(host, autonomous);
    expect(reg.status).toBe(200);
    expect(reg.body.status).toBe('active');
    const grants = Object.fromEntries(
      reg.body.agent_capability_grants.map((g: { capability: string; status: string }) => [
        g.capability,
        g.status,
      ]),
    );
    // create_pet is in autonomous.grants but high-risk: policy never grants it (§8.10).
    expect(grants).toEqual({ list_pets: 'active', create_pet: 'pending' });
    expect(reg.body.approval.method).toBe('device_authorization');
    const status = await proxy.status(host, reg.body.agent_id);
    expect(status.body.agent_capability_grants).toContainEqual(
      expect.objectContaining({ capability: 'list_pets', status: 'active', granted_by: 'policy' }),
    );

    const before = upstream.requests.length;
    expect((await proxy.execute(reg.agent, reg.body.agent_id, 'list_pets')).status).toBe(200);
    expect(upstream.requests.length).toBe(before + 1);
    const refused = await proxy.execute(reg.agent, reg.body.agent_id, 'create_pet', { name: 'x' });
    expect(refused.status).toBe(403);
    expect(upstream.requests.length).toBe(before + 1);

    const hosts = await proxy.admin('GET', '/admin/hosts');
    expect(hosts.body.hosts).toMatchObject([{ status: 'active', user_id: null, admitted_by_policy: true }]);
    const activity = await proxy.admin('GET', '/admin/activity?limit=10');
    expect(activity.body.activity.map((a: { type: string }) => a.type)).toContain('host.admitted_by_policy');
  });

  it('a delegated agent of an unknown host still waits for a person (the switch is for autonomous agents only)', async () => {
    const proxy = await start('  bootstrap: policy\n');
    const reg = await proxy.register(await generateTestKey(), { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    expect((await proxy.admin('GET', '/admin/hosts')).body.hosts).toMatchObject([{ status: 'pending' }]);
  });

  it('a blocked capability is never granted by policy: a request naming it is refused and nothing is stored', async () => {
    p = await startProtocol({
      policy: `modes: [autonomous]\ncapabilities:\n  blocked: [delete_pet]\nautonomous:\n  grants: [list_pets, delete_pet]\n  bootstrap: policy\n`,
      overrides: { upstreams: [upstream.url] },
    });
    const reg = await p.register(await generateTestKey(), {
      mode: 'autonomous',
      capabilities: ['list_pets', 'delete_pet'],
    });
    expect(reg.status).toBe(400);
    expect(reg.body.error).toBe('invalid_capabilities');
    expect((await p.admin('GET', '/admin/hosts')).body.hosts).toEqual([]);
  });

  it('unknown_host_registration still limits new hosts per client IP: the N+1th stranger is refused with 429', async () => {
    const proxy = await start(
      '  bootstrap: policy\nrate_limits:\n  unknown_host_registration: "3/10m"\n  per_ip: null\n',
    );
    for (let i = 0; i < 3; i++) {
      const reg = await proxy.register(await generateTestKey(), autonomous);
      expect(reg.body.status).toBe('active');
    }
    const fourth = await proxy.register(await generateTestKey(), autonomous);
    expect(fourth.status).toBe(429);
    expect(fourth.body.error).toBe('rate_limited');
    expect(fourth.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await proxy.admin('GET', '/admin/hosts')).body.hosts).toHaveLength(3);
  });

  it('pending_hosts.max_hosts counts hosts admitted by policy: past it 429, and revoking one frees the room', async () => {
    const proxy = await start(
      '  bootstrap: policy\nrate_limits:\n  unknown_host_registration: null\npending_hosts:\n  max_hosts: 2\n',
    );
    const first = await proxy.register(await generateTestKey(), autonomous);
    // A pending (delegated) host and a policy-admitted one share the bound.
    expect((await proxy.register(await generateTestKey(), { capabilities: ['list_pets'] })).status).toBe(200);
    const third = await proxy.register(await generateTestKey(), autonomous);
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ error: 'rate_limited', limit: 'pending_hosts.max_hosts', maximum: 2 });
    const hostId = (await proxy.admin('GET', `/admin/agents/${first.body.agent_id}`)).body.host_id;
    expect((await proxy.admin('POST', `/admin/hosts/${hostId}/revoke`)).status).toBe(200);
    expect((await proxy.register(await generateTestKey(), autonomous)).body.status).toBe('active');
  });

  it('pending_hosts.max_agents bounds a policy-admitted host until the operator vouches for it', async () => {
    const proxy = await start(
      '  bootstrap: policy\nrate_limits:\n  unknown_host_registration: null\npending_hosts:\n  max_agents: 2\n',
    );
    const host = await generateTestKey();
    expect((await proxy.register(host, autonomous)).body.status).toBe('active');
    // Later agents of the admitted host are active at once too (it is active), up to the bound.
    expect((await proxy.register(host, autonomous)).body.status).toBe('active');
    const third = await proxy.register(host, autonomous);
    expect(third.status).toBe(403);
    expect(third.body).toMatchObject({ error: 'host_pending', limit: 'pending_hosts.max_agents' });
    expect(third.body.message).toContain('admitted by policy');
    // The operator pre-registers the same key: now a host someone vouched for, unbounded.
    const vouched = await proxy.admin('POST', '/admin/hosts', {
      name: 'deployer',
      public_key: host.publicJwk,
    });
    expect(vouched.status).toBe(200);
    expect(vouched.body.admitted_by_policy).toBe(false);
    expect((await proxy.register(host, autonomous)).body.status).toBe('active');
  });
});
