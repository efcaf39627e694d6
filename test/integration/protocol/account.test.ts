/**
 * The account page's protocol side (issue 11, src/protocol/account.ts) on a real proxy and SQLite
 * file: "Delete activity records" (§9.2) is bounded per press, deletes oldest first and only the
 * named agent's rows, leaves a record that it happened, and refuses another user's agent inside
 * its transaction.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ACTIVITY_DELETE_BATCH,
  accountAgents,
  deleteOwnActivity,
  revokeOwnAgent,
} from '../../../src/protocol/account.js';
import { protocolEvent } from '../../../src/protocol/activity.js';
import type { ActivityRecord } from '../../../src/storage/types.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

function rows(agentId: string, hostId: string, count: number, at: number): ActivityRecord[] {
  return Array.from({ length: count }, (_, i) =>
    protocolEvent({
      at: at + i,
      type: 'execute',
      agentId,
      hostId,
      userId: 'alice',
      capability: 'list_pets',
      outcome: 'success',
      detail: null,
    }),
  );
}

describe('deleting activity records (§9.2)', () => {
  it(`deletes at most ${ACTIVITY_DELETE_BATCH} rows a press, oldest first, says more remain, then finishes`, async () => {
    p = await startProtocol();
    const { agentId, hostId } = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const other = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const ctx = p.proxy.protocol;
    const t = p.clock.now();
    await ctx.store.appendActivities(rows(agentId, hostId, ACTIVITY_DELETE_BATCH + 5, t));
    await ctx.store.appendActivities(rows(other.agentId, other.hostId, 3, t));
    const newest = (await ctx.store.activity({ agentId, limit: 1 }))[0];

    const first = await deleteOwnActivity(ctx, 'alice', agentId);
    expect(first).toMatchObject({ deleted: ACTIVITY_DELETE_BATCH, more: true });
    // Oldest first: what is left are the newest rows.
    expect((await ctx.store.activity({ agentId, limit: 100 })).map((r) => r.id)).toContain(newest?.id);
    const second = await deleteOwnActivity(ctx, 'alice', agentId);
    expect(second.more).toBe(false);
    expect(await ctx.store.activity({ agentId, limit: 10 })).toEqual([]);
    expect((await ctx.store.activity({ agentId: other.agentId, limit: 100 })).length).toBeGreaterThanOrEqual(
      3,
    );
    const marks = (await ctx.store.activity({ hostId, limit: 10 })).filter(
      (r) => r.type === 'user.activity_deleted',
    );
    expect(marks.map((r) => r.detail)).toEqual([
      { agent_id: agentId, records: second.deleted },
      { agent_id: agentId, records: ACTIVITY_DELETE_BATCH },
    ]);
  });

  it('another user cannot delete or revoke: agent_not_found, and nothing changes', async () => {
    p = await startProtocol();
    const { agentId, host } = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const ctx = p.proxy.protocol;
    const before = (await ctx.store.activity({ agentId, limit: 100 })).length;
    await expect(deleteOwnActivity(ctx, 'mallory', agentId)).rejects.toThrow(/No agent/);
    await expect(revokeOwnAgent(ctx, 'mallory', agentId)).rejects.toThrow(/No agent/);
    expect((await ctx.store.activity({ agentId, limit: 100 })).length).toBe(before);
    expect((await p.status(host, agentId)).body.status).toBe('active');
    expect(await accountAgents(ctx, 'mallory', 1)).toMatchObject({ total: 0, agents: [], hosts: [] });
    expect((await accountAgents(ctx, 'alice', 1)).agents.map((a) => a.agent.id)).toEqual([agentId]);
  });
});

describe('per-grant uses on the account page (issue 16 §5)', () => {
  it('counts uses in memory, shows them before any flush, and flushes them at shutdown (migration 12)', async () => {
    const db = tempDbFile();
    p = await startProtocol({ overrides: { db } });
    const { agentId } = await p.activeAgent(['list_pets'], { userId: 'alice' });
    let ctx = p.proxy.protocol;
    const grantId = (await ctx.store.grants(agentId))[0]?.id ?? '';
    const t = p.clock.now();
    ctx.usage.recordGrant(grantId, t);
    ctx.usage.recordGrant(grantId, t + 5);
    // Nothing written yet: the page adds what is in memory.
    expect((await ctx.store.grantUses(agentId)).size).toBe(0);
    expect((await accountAgents(ctx, 'alice', 1)).agents[0]?.grants[0]).toMatchObject({
      uses: 2,
      lastUsedAt: t + 5,
    });
    await p.close();
    p = await startProtocol({ overrides: { db } });
    ctx = p.proxy.protocol;
    expect((await ctx.store.grantUses(agentId)).get(grantId)).toEqual({ uses: 2, lastUsedAt: t + 5 });
    expect((await accountAgents(ctx, 'alice', 1)).agents[0]?.grants[0]).toMatchObject({
      uses: 2,
      ending: null,
    });
  });
});
