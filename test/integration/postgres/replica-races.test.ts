/**
 * Concurrent writes sent to two replicas at the same moment (SERIALIZABLE, retried on conflict):
 * one decision per approval, one host and agent per key, one open approval per request. Each
 * scenario is repeated a few times to give the race a chance.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../../helpers/cli-process.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';
import { ISSUER, startReplicaCluster, type Replica, type ReplicaCluster } from '../../helpers/replicas.js';

const POLICY = `
capabilities:
  defaults: [get_pet]
  high_risk: [create_pet, delete_pet, place_order]
rate_limits:
  per_ip: null
  unknown_host_registration: null
  approval_requests_per_user: null
`;
const ROUNDS = 6;

let set: ReplicaCluster;
let a: Replica;
let b: Replica;

beforeAll(async () => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  set = await startReplicaCluster({ policy: POLICY });
  [a, b] = set.replicas as [Replica, Replica];
});
afterAll(() => set?.close());

async function register(
  on: Replica,
): Promise<{ host: TestKey; agent: TestKey; agentId: string; hostId: string; approvalId: string }> {
  const host = await generateTestKey();
  const agent = await generateTestKey();
  const reg = await on.register(host, agent, { capabilities: ['get_pet'] });
  expect(reg.status).toBe(200);
  const agentId = reg.body.agent_id as string;
  const open = await on.admin('GET', `/admin/approvals?agent_id=${agentId}`);
  return { host, agent, agentId, hostId: reg.body.host_id, approvalId: open.body.approvals[0].id };
}

describe('concurrent decisions and creations across two replicas', () => {
  it('an approval approved on A and denied on B at once is decided once', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { approvalId, agentId } = await register(a);
      const [x, y] = await Promise.all([
        a.admin('POST', `/admin/approvals/${approvalId}/approve`, { user_id: 'alice' }),
        b.admin('POST', `/admin/approvals/${approvalId}/deny`, { reason: 'no' }),
      ]);
      const statuses = [x.status, y.status].sort();
      expect({ statuses, x: x.body, y: y.body }).toMatchObject({ statuses: [200, 409] });
      const agent = await a.admin('GET', `/admin/agents/${agentId}`);
      const status = agent.body.status ?? agent.body.agent?.status;
      expect(status).toBe(x.status === 200 ? 'active' : 'rejected');
    }
  }, 60_000);

  it('the same registration sent to A and B at once makes one host and one agent, and both answer', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const host = await generateTestKey();
      const agent = await generateTestKey();
      const tokens = await Promise.all(
        [0, 1].map(() => hostJwt(host, ISSUER, { agent_public_key: agent.publicJwk })),
      );
      const replies = await Promise.all(
        [a, b].map((r, j) =>
          r.request('POST', '/agent/register', tokens[j], { name: 'twice', capabilities: ['get_pet'] }),
        ),
      );
      expect(
        replies.map((r) => ({ status: r.status, error: r.body?.error, message: r.body?.message })),
      ).toEqual([expect.objectContaining({ status: 200 }), expect.objectContaining({ status: 200 })]);
      expect(replies[0]!.body.agent_id).toBe(replies[1]!.body.agent_id);
    }
  }, 60_000);

  it('one capability asked for on A and on B at once opens one approval', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { agent, agentId, approvalId } = await register(a);
      expect(
        (await a.admin('POST', `/admin/approvals/${approvalId}/approve`, { user_id: 'alice' })).status,
      ).toBe(200);
      const tokens = await Promise.all([0, 1].map(() => agentJwt(agent, agentId, ISSUER)));
      const replies = await Promise.all(
        [a, b].map((r, j) =>
          r.request('POST', '/agent/request-capability', tokens[j], { capabilities: ['create_pet'] }),
        ),
      );
      expect(
        replies.map((r) => ({ status: r.status, error: r.body?.error, message: r.body?.message })),
      ).toEqual([expect.objectContaining({ status: 200 }), expect.objectContaining({ status: 200 })]);
      const open = await b.admin('GET', `/admin/approvals?agent_id=${agentId}`);
      // The listing shows open (pending) approvals.
      expect(open.body.approvals).toHaveLength(1);
      expect(replies[0]!.body.approval.user_code).toBe(replies[1]!.body.approval.user_code);
    }
  }, 60_000);

  it("two key rotations signed by the same current key at once: one succeeds, and its key is the host's (§5.9)", async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const { host, hostId, approvalId } = await register(a);
      expect(
        (await a.admin('POST', `/admin/approvals/${approvalId}/approve`, { user_id: 'alice' })).status,
      ).toBe(200);
      const rotate = async (on: Replica, next: TestKey) =>
        on.request('POST', '/host/rotate-key', await hostJwt(host, ISSUER), {
          public_key: next.publicJwk,
          proof: await hostJwt(next, ISSUER),
        });
      const owner = await generateTestKey();
      const thief = await generateTestKey();
      const [x, y] = await Promise.all([rotate(a, owner), rotate(b, thief)]);
      expect({ statuses: [x.status, y.status].sort(), x: x.body, y: y.body }).toMatchObject({
        statuses: [200, 401],
      });
      const loser = x.status === 200 ? y : x;
      expect(loser.body.error).toBe('invalid_jwt');
      // The host is the winner's: the thief's call did not quietly replace the owner's key.
      const winner = x.status === 200 ? owner : thief;
      const stored = await a.admin('GET', `/admin/hosts/${hostId}`);
      expect(stored.body.thumbprint ?? stored.body.host?.thumbprint).toBe(winner.thumbprint);
    }
  }, 60_000);
});
