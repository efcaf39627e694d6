/**
 * Issue 16 §3 over real HTTP: new approval requests are rate-limited per addressed user (policy
 * `rate_limits.approval_requests_per_user`, 5 a minute here as by default: `429` with
 * `Retry-After`, nothing stored), and a repeat of a still-pending capability request (§5.4)
 * returns the same approval, uncounted; a changed one is a new approval (§2.13, §7.2).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

const POLICY = `
capabilities:
  defaults: [{methods: [GET]}]
  high_risk: [{methods: [POST, PUT, PATCH, DELETE]}]
  public: ['*']
rate_limits:
  unknown_host_registration: null
  approval_requests_per_user: 5/1m
`;

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterAll(() => p.close());

/** A registration under `host` that needs approval (create_pet is high-risk). */
function ask(host: TestKey): Promise<Reply> {
  return p.register(host, { capabilities: ['create_pet'] });
}

function requestCaps(a: { agent: TestKey; agentId: string }, capabilities: unknown): Promise<Reply> {
  return p
    .agentToken(a.agent, a.agentId)
    .then((token) => p.request('POST', '/agent/request-capability', { token, body: { capabilities } }));
}

describe('per-user approval rate limit (issue 16 §3)', () => {
  it('the 6th request for one user in a minute is 429 with Retry-After and stores nothing; others and later ones pass', async () => {
    const { key: host, hostId } = await p.linkedHost('dana@example.com');
    for (let i = 0; i < 5; i++) {
      const reply = await ask(host);
      expect(reply.status).toBe(200);
      expect(reply.body.approval.method).toBe('device_authorization');
    }
    const store = p.proxy.protocol.store;
    const agentsBefore = (await store.agents({ hostId })).length;
    const approvalsBefore = (await store.approvals({ status: 'pending', limit: 1000 })).length;
    const refused = await ask(host);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({
      error: 'rate_limited',
      limit: 'rate_limits.approval_requests_per_user',
    });
    expect(typeof refused.body.message).toBe('string');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Nothing of the refused request was stored.
    expect((await store.agents({ hostId })).length).toBe(agentsBefore);
    expect((await store.approvals({ status: 'pending', limit: 1000 })).length).toBe(approvalsBefore);

    // Another user is not affected.
    const other = await p.linkedHost('erin@example.com');
    expect((await ask(other.key)).status).toBe(200);

    // After the window the user can be asked again (TestClock, no sleeping).
    p.clock.advance(60_000);
    expect((await ask(host)).status).toBe(200);
  });

  it('a repeated pending capability request returns the same approval and is not counted; a different constraint is a new one', async () => {
    const { key: host } = await p.linkedHost('finn@example.com');
    const reg = await p.register(host, {});
    expect(reg.body.status).toBe('active');
    const a = { agent: reg.agent, agentId: reg.body.agent_id as string };
    const asked = [{ name: 'create_pet', constraints: { species: 'cat' } }];
    const first = await requestCaps(a, asked);
    expect(first.status).toBe(200);
    const firstId = (await p.pendingApproval(a.agentId)).id;
    // Ten repeats: over the limit of 5 if they counted, yet each returns the same approval.
    for (let i = 0; i < 10; i++) {
      p.clock.advance(1_000);
      const again = await requestCaps(a, asked);
      expect(again.status).toBe(200);
      expect(again.body.approval.user_code).toBe(first.body.approval.user_code);
      expect(again.body.approval.expires_in).toBe(first.body.approval.expires_in - (i + 1));
      expect(again.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
    }
    expect(await p.proxy.protocol.store.approvals({ agentId: a.agentId })).toHaveLength(1);

    // Other constraints: a new approval (it replaces the pending one), asking for the new terms.
    const changed = await requestCaps(a, [{ name: 'create_pet', constraints: { species: 'dog' } }]);
    expect(changed.status).toBe(200);
    const now = await p.pendingApproval(a.agentId);
    expect(now.id).not.toBe(firstId);
    expect(now.capabilities).toEqual([{ name: 'create_pet', constraints: { species: 'dog' } }]);
    expect((await p.proxy.protocol.store.approval(firstId))?.status).toBe('expired');
    // The person who has the code in front of them is shown the new request (§7.2).
    expect(changed.body.approval.user_code).toBe(first.body.approval.user_code);
  });

  it("strangers' CIBA requests are counted per login_hint, apart from the user's own agents, the same for any hint", async () => {
    const ciba = await startProtocol({
      policy: `${POLICY}approval:\n  methods: [device_authorization, ciba]\n  approvers: [gail@example.com]\n`,
    });
    try {
      const strangers = async (hint: string): Promise<number[]> => {
        const statuses: number[] = [];
        for (let i = 0; i < 6; i++) {
          const reply = await ciba.register(await generateTestKey(), {
            capabilities: ['create_pet'],
            login_hint: hint,
          });
          if (reply.status === 200) expect(reply.body.approval.method).toBe('ciba');
          statuses.push(reply.status);
        }
        return statuses;
      };
      // An approver's hint and a made-up one meet the limit alike (§7.2: no enumeration).
      expect(await strangers('gail@example.com')).toEqual([200, 200, 200, 200, 200, 429]);
      expect(await strangers('nobody@example.com')).toEqual([200, 200, 200, 200, 200, 429]);
      // Gail's own agents still ask her: strangers did not use up her budget.
      const { key } = await ciba.linkedHost('gail@example.com');
      const own = await ciba.register(key, { capabilities: ['create_pet'], login_hint: 'gail@example.com' });
      expect(own.status).toBe(200);
      expect(own.body.approval.method).toBe('ciba');
      // Without a login_hint the request is addressed to nobody yet (pending_hosts bounds it).
      const open = await ciba.register(await generateTestKey(), { capabilities: ['create_pet'] });
      expect(open.status).toBe(200);
    } finally {
      await ciba.close();
    }
  });
});
