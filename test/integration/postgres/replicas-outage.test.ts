/**
 * Two replicas through a database outage (issue 13): both stay up and say they are unready, both
 * answer 503 JSON rather than crash or hang, both come back by themselves when the database is
 * back, with everything acknowledged before still there; and the change notices that keep their
 * caches honest (§10.2) work again afterwards: a revocation on one is refused on the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../../helpers/cli-process.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startReplicaCluster, until, type Replica, type ReplicaCluster } from '../../helpers/replicas.js';

const POLICY = `
capabilities:
  defaults: [list_pets, get_pet]
rate_limits:
  per_ip: null
  unknown_host_registration: null
  approval_requests_per_user: null
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

const status = async (r: Replica, path: string): Promise<number> => (await r.request('GET', path)).status;

describe('two replicas through a database outage', () => {
  it('both stay up, unready, 503; both come back by themselves with every acknowledged write', async () => {
    const host = await generateTestKey();
    const agent = await generateTestKey();
    const reg = await a.register(host, agent, { capabilities: ['get_pet'] });
    expect(reg.status).toBe(200);
    const agentId = reg.body.agent_id as string;
    const open = await b.admin('GET', `/admin/approvals?agent_id=${agentId}`);
    expect(
      (await b.admin('POST', `/admin/approvals/${open.body.approvals[0].id}/approve`, { user_id: 'alice' }))
        .status,
    ).toBe(200);
    expect((await b.execute(agent, agentId, 'get_pet', { petId: 1 })).status).toBe(200);

    await set.postgres.stopServer();
    for (const r of [a, b]) {
      await until(
        () => status(r, '/readyz'),
        (s) => s === 503,
      );
      expect(await status(r, '/healthz')).toBe(200);
      const refused = await r.execute(agent, agentId, 'get_pet', { petId: 2 });
      expect(refused.status).toBe(503);
      expect(refused.body.error).toBe('temporarily_unavailable');
      expect(r.child.exitCode).toBeNull();
    }

    await set.postgres.startServer();
    for (const r of [a, b]) {
      await until(
        () => status(r, '/readyz'),
        (s) => s === 200,
      );
      expect((await r.execute(agent, agentId, 'get_pet', { petId: 3 })).status).toBe(200);
    }
    expect((await a.admin('GET', `/admin/agents/${agentId}`)).body.status).toBe('active');
    // The refused calls never went upstream; the ones before and after did.
    expect(set.upstream.received('/v1/pets/2')).toHaveLength(0);
    expect(set.upstream.received('/v1/pets/3')).toHaveLength(2);

    // The change listener is back too: a revocation on A is refused on B within the bound.
    expect((await a.admin('POST', `/admin/agents/${agentId}/revoke`)).status).toBe(200);
    const onB = await until(
      () => b.execute(agent, agentId, 'get_pet', { petId: 4 }),
      (r) => r.status !== 200,
    );
    expect(onB.result.status).toBe(403);
    expect(onB.elapsedMs).toBeLessThan(2000);
  });
});
