/**
 * The README Bounds row for per-call approvals: 20 open per agent, also when the executes arrive
 * at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPerCallProxy, type PerCallProxy, perCallPolicy } from '../../helpers/per-call.js';

const ALICE = 'alice@example.com';
const POLICY = perCallPolicy('send_transfer');

let s: PerCallProxy;
beforeAll(async () => {
  s = await startPerCallProxy({ policy: POLICY, users: [ALICE] });
});
afterAll(() => s?.close());

describe('bounds', () => {
  it('30 concurrent executes of one agent open at most 20 calls', async () => {
    const { p } = s;
    const a = await p.activeAgent(['send_transfer'], { userId: ALICE });
    const replies = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        p.execute(a.agent, a.agentId, 'send_transfer', { to: `acct-${i}`, amount: i + 1 }),
      ),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((x) => x === 202).length).toBeLessThanOrEqual(20);
    const rows = (await p.proxy.protocol.store.perCalls({ limit: 200 })).filter(
      (r) => r.agentId === a.agentId,
    );
    expect(rows.length).toBeLessThanOrEqual(20);
  });
});
