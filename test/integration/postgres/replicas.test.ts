/**
 * Many replicas, one truth (issue 13): real proxy processes on one PostgreSQL database, a client
 * going to either as through a load balancer. A registration on one is approved on the other and
 * executes on both; a JWT accepted by one is refused by the other and by a replica started later
 * (§4.6); a revocation or a status change on one reaches the other within 2 s (§4.5, §10.2); a
 * rate limit split across both admits its count in total (§8.13); a notification stream on one
 * hears a decision made on the other (§10.10.2).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../../helpers/cli-process.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';
import {
  EXECUTE_AUD,
  ISSUER,
  startReplicaCluster,
  until,
  type Replica,
  type ReplicaCluster,
} from '../../helpers/replicas.js';

/** The bound the README states for a change on one replica to be enforced by every other. */
const PROPAGATION_BOUND_MS = 2000;
/** get_inventory's budget over all agents: 10 an hour (none refills while the test runs). */
const INVENTORY_PER_HOUR = 10;

// get_pet and get_inventory are granted without asking once a person approved the host; the
// per-agent, per-host and per-user defaults stay on (every request takes from them).
const POLICY = `
capabilities:
  defaults: [list_pets, get_pet, get_inventory]
  high_risk: [create_pet, delete_pet, place_order]
rate_limits:
  per_ip: null
  unknown_host_registration: null
  approval_requests_per_user: null
  per_capability:
    get_inventory: "${INVENTORY_PER_HOUR}/1h"
`;

let set: ReplicaCluster;
let a: Replica;
let b: Replica;

beforeAll(async () => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  set = await startReplicaCluster({ policy: POLICY });
  [a, b] = set.replicas as [Replica, Replica];
});
afterAll(() => set?.close());
afterEach(() => set.upstream.reset());

interface Registered {
  readonly host: TestKey;
  readonly agent: TestKey;
  readonly agentId: string;
  readonly hostId: string;
}

/** An unknown host registers an agent on `on`: pending, with an approval (§7.1). */
async function register(on: Replica, capabilities: string[]): Promise<Registered & { approvalPath: string }> {
  const host = await generateTestKey();
  const agent = await generateTestKey();
  const reg = await on.register(host, agent, { capabilities });
  expect(reg.status).toBe(200);
  expect(reg.body.status).toBe('pending');
  const approvalPath = new URL(reg.body.approval.notification_url as string).pathname;
  return { host, agent, agentId: reg.body.agent_id, hostId: reg.body.host_id, approvalPath };
}

/** The operator approves the agent's open approval on `on`, linking its host to alice. */
async function approve(on: Replica, agentId: string): Promise<void> {
  const open = await on.admin('GET', `/admin/approvals?agent_id=${agentId}`);
  expect(open.body.approvals).toHaveLength(1);
  const ok = await on.admin('POST', `/admin/approvals/${open.body.approvals[0].id}/approve`, {
    user_id: 'alice',
  });
  expect(ok.status).toBe(200);
}

/** Registered on `on`, approved on `approveOn`. */
async function activeAgent(on: Replica, approveOn: Replica, capabilities: string[]): Promise<Registered> {
  const registered = await register(on, capabilities);
  await approve(approveOn, registered.agentId);
  return registered;
}

describe('replicas on one PostgreSQL', () => {
  it('registered on one, approved on the other, executes on both; the status change is seen at once', async () => {
    const { agent, agentId } = await register(a, ['get_pet']);
    // A now holds the pending host and agent in its hot cache (§10.2).
    const early = await a.execute(agent, agentId, 'get_pet', { petId: 1 });
    expect(early.status).toBe(403);
    expect(early.body.error).toBe('host_pending');

    await approve(b, agentId);
    const onA = await until(
      () => a.execute(agent, agentId, 'get_pet', { petId: 1 }),
      (r) => r.status !== 403,
    );
    expect(onA.result.status).toBe(200);
    expect(onA.elapsedMs).toBeLessThan(PROPAGATION_BOUND_MS);
    expect((await b.execute(agent, agentId, 'get_pet', { petId: 2 })).status).toBe(200);
    expect(set.upstream.received('/v1/pets/1')).toHaveLength(1);
    expect(set.upstream.received('/v1/pets/2')).toHaveLength(1);
  });

  it('refuses a JWT one replica accepted on every other, and on a replica started later (§4.6)', async () => {
    const { agent, agentId } = await activeAgent(a, b, ['get_pet']);
    const token = await agentJwt(agent, agentId, EXECUTE_AUD);
    expect((await a.execute(agent, agentId, 'get_pet', { petId: 3 }, token)).status).toBe(200);
    for (const replica of [b, a]) {
      const replay = await replica.execute(agent, agentId, 'get_pet', { petId: 3 }, token);
      expect(replay.status).toBe(401);
      expect(replay.body.error).toBe('invalid_jwt');
      expect(replay.body.message).toMatch(/already used/);
    }
    // The same fresh token to both at the same moment: exactly one is accepted.
    const twice = await agentJwt(agent, agentId, EXECUTE_AUD);
    const both = await Promise.all(
      [a, b].map((r) => r.execute(agent, agentId, 'get_pet', { petId: 4 }, twice)),
    );
    expect(both.map((r) => r.status).sort()).toEqual([200, 401]);
    expect(set.upstream.received('/v1/pets/3')).toHaveLength(1);
    expect(set.upstream.received('/v1/pets/4')).toHaveLength(1);

    // A process that never saw it (a restart, a new replica) knows it from the database.
    const later = await set.start();
    try {
      expect((await later.execute(agent, agentId, 'get_pet', { petId: 3 }, token)).status).toBe(401);
      expect((await later.execute(agent, agentId, 'get_pet', { petId: 5 })).status).toBe(200);
    } finally {
      await later.stop();
    }
  });

  it('enforces a revocation on one replica on the other within 2 s: agent, then host (§4.5, §8.5)', async () => {
    const first = await activeAgent(a, b, ['get_pet']);
    // B holds the active agent, its host and its grants in its hot cache.
    expect((await b.execute(first.agent, first.agentId, 'get_pet', { petId: 6 })).status).toBe(200);
    expect((await a.admin('POST', `/admin/agents/${first.agentId}/revoke`, {})).status).toBe(200);
    // A request read across the notice may be refused for its grants first (they were revoked
    // with the agent); the bound is on the agent's own refusal.
    const agentRevoked = await until(
      () => b.execute(first.agent, first.agentId, 'get_pet', { petId: 6 }),
      (r) => r.body?.error === 'agent_revoked',
    );
    expect(agentRevoked.result.status).toBe(403);
    expect(agentRevoked.elapsedMs).toBeLessThan(PROPAGATION_BOUND_MS);

    const second = await activeAgent(b, b, ['get_pet']);
    expect((await a.execute(second.agent, second.agentId, 'get_pet', { petId: 7 })).status).toBe(200);
    expect((await b.admin('POST', `/admin/hosts/${second.hostId}/revoke`, {})).status).toBe(200);
    const hostRevoked = await until(
      () => a.execute(second.agent, second.agentId, 'get_pet', { petId: 7 }),
      (r) => r.body?.error === 'host_revoked',
    );
    expect(hostRevoked.result.status).toBe(403);
    expect(hostRevoked.elapsedMs).toBeLessThan(PROPAGATION_BOUND_MS);
    expect(set.upstream.received('/v1/pets/6')).toHaveLength(1);
    expect(set.upstream.received('/v1/pets/7')).toHaveLength(1);
  });

  it("a NUL in a name the agent sends is refused or kept printable: nothing reaches PostgreSQL's text", async () => {
    const { agent, agentId } = await activeAgent(a, b, ['get_pet']);
    // The capability name is kept in the execution record: with its NUL, PostgreSQL refused the
    // record and, retried for ever, every record written after it on that replica.
    const odd = await a.execute(agent, agentId, 'get\u0000pet', {});
    expect(odd.status).toBe(404);
    // An agent id with a NUL is malformed (401, charged as a failed authentication), not a 500.
    const forged = await agentJwt(await generateTestKey(), 'agt_\u0000x', EXECUTE_AUD);
    const refused = await a.request('POST', '/capability/execute', forged, {
      capability: 'get_pet',
      arguments: {},
    });
    expect(refused.status).toBe(401);
    expect(refused.body.error).toBe('invalid_jwt');
    expect((await a.admin('GET', '/admin/agents/agt_%00x')).status).toBe(404);
    expect((await a.execute(agent, agentId, 'get_pet', { petId: 8 })).status).toBe(200);

    const listed = await a.admin('GET', `/admin/activity?agent_id=${agentId}`);
    const executions = (listed.body.activity as { type: string; capability: string; outcome: string }[])
      .filter((r) => r.type === 'execute')
      .map((r) => [r.capability, r.outcome]);
    expect(executions).toEqual([
      ['get_pet', 'success'],
      ['get\ufffdpet', 'capability_not_found'],
    ]);
  });

  it('admits a rate limit split across both replicas once in total (§8.13)', async () => {
    const { agent, agentId } = await activeAgent(a, b, ['get_inventory']);
    const replies = await Promise.all(
      Array.from({ length: 3 * INVENTORY_PER_HOUR }, (_, i) =>
        [a, b][i % 2]!.execute(agent, agentId, 'get_inventory', {}),
      ),
    );
    const admitted = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status === 429);
    // Tolerance 0: the budget is one row both replicas take from, and nothing refills in an hour's
    // window while the test runs (README: the tolerance is the replicas' clock skew × the rate).
    expect(admitted).toHaveLength(INVENTORY_PER_HOUR);
    expect(refused).toHaveLength(2 * INVENTORY_PER_HOUR);
    expect(refused.every((r) => r.body.error === 'rate_limited')).toBe(true);
    expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThan(60);
    expect(set.upstream.received('/v1/store/inventory')).toHaveLength(INVENTORY_PER_HOUR);
  });

  it('a notification stream on one replica hears a decision made on the other (§10.10.2)', async () => {
    const { host, agentId, approvalPath } = await register(a, ['get_pet']);
    const res = await fetch(`${a.url}${approvalPath}`, {
      headers: { authorization: `Bearer ${await hostJwt(host, ISSUER)}` },
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    try {
      await approve(b, agentId);
      const decided = Date.now();
      while (!/event: approval\n[\s\S]*\n\n/.test(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expect(Date.now() - decided).toBeLessThan(PROPAGATION_BOUND_MS);
    } finally {
      await reader.cancel();
    }
    const data = JSON.parse(/^data: (.*)$/m.exec(text)![1]!) as Record<string, unknown>;
    expect(data).toMatchObject({ status: 'approved', agent_id: agentId, agent_status: 'active' });
  });
});
