/**
 * §9.2 / §9.5 retention on a real SQLite file: old activity and long-closed approval requests go
 * in bounded batches; newer ones, and pending requests however old, stay.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Retention, RETENTION_BATCH, RETENTION_BATCHES_PER_RUN } from '../../../src/protocol/retention.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { activityRecord } from '../../helpers/activity.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';
import { agent, approval, grant, host } from '../storage/store-fixtures.js';

const DAY = 86_400_000;
let store: Store | undefined;
afterEach(() => store?.close());

const record = activityRecord;

const count = async (s: Store, type: string): Promise<number> =>
  (await s.activity({ limit: 100_000 })).filter((r) => r.type === type).length;

describe('activity retention', () => {
  it('deletes records older than the retention in batches, keeps newer ones, and says how many', async () => {
    const clock = new TestClock();
    store = openSqliteStore({ file: tempDbFile() });
    const old = Array.from({ length: 2 * RETENTION_BATCH + 500 }, (_, i) =>
      record(clock.now() - 91 * DAY + i, 'old'),
    );
    await store.appendActivities([
      ...old,
      record(clock.now() - 89 * DAY, 'kept'),
      record(clock.now(), 'kept'),
    ]);
    const retention = new Retention(store, clock, 90 * DAY);
    expect(await retention.prune()).toEqual({ activity: old.length, approvals: 0 });
    expect(await count(store, 'old')).toBe(0);
    expect(await count(store, 'kept')).toBe(2);
    expect((await retention.prune()).activity).toBe(0);
  });

  it('one run stops after its bounded number of batches; the next run takes the rest', async () => {
    const clock = new TestClock();
    store = openSqliteStore({ file: tempDbFile() });
    const backlog = RETENTION_BATCH * RETENTION_BATCHES_PER_RUN + 10;
    await store.appendActivities(Array.from({ length: backlog }, () => record(clock.now() - 2 * DAY, 'old')));
    const retention = new Retention(store, clock, DAY);
    expect((await retention.prune()).activity).toBe(RETENTION_BATCH * RETENTION_BATCHES_PER_RUN);
    expect((await retention.prune()).activity).toBe(10);
  });

  it('runs never overlap: a second call while one runs deletes nothing itself', async () => {
    const clock = new TestClock();
    store = openSqliteStore({ file: tempDbFile() });
    await store.appendActivities(
      Array.from({ length: 3 * RETENTION_BATCH }, () => record(clock.now() - 2 * DAY, 'old')),
    );
    const retention = new Retention(store, clock, DAY);
    const [first, second] = await Promise.all([retention.prune(), retention.prune()]);
    expect([first.activity, second.activity]).toEqual([3 * RETENTION_BATCH, 0]);
  });

  it('deletes approval requests closed before the retention, never a pending one; their grants stay', async () => {
    const clock = new TestClock();
    const s = openSqliteStore({ file: tempDbFile() });
    store = s;
    const now = clock.now();
    const closedAt = now - 91 * DAY;
    await s.write(async (tx) => {
      await tx.insertHost(host('h1'));
      await tx.insertAgent(agent('a1', 'h1'));
      // Old and closed each way; old but still pending (a deadline extended, a clock behind); recent.
      await tx.insertApproval(
        approval('old-approved', 'a1', 'h1', {
          status: 'approved',
          createdAt: closedAt,
          decidedAt: closedAt,
        }),
      );
      await tx.insertApproval(
        approval('old-denied', 'a1', 'h1', {
          status: 'denied',
          createdAt: closedAt,
          decidedAt: closedAt + 1,
        }),
      );
      await tx.insertApproval(
        approval('old-expired', 'a1', 'h1', {
          status: 'expired',
          createdAt: closedAt,
          decidedAt: closedAt + 2,
        }),
      );
      await tx.insertApproval(
        approval('old-pending', 'a1', 'h1', { createdAt: closedAt, expiresAt: now + DAY }),
      );
      await tx.insertApproval(
        approval('recent', 'a1', 'h1', { status: 'denied', createdAt: now - DAY, decidedAt: now - DAY }),
      );
      await tx.putGrant(grant('g1', 'a1', { approvalId: 'old-approved', status: 'active' }));
    });
    const retention = new Retention(s, clock, 90 * DAY);
    expect(await retention.prune()).toEqual({ activity: 0, approvals: 3 });
    const left = await s.approvals({ agentId: 'a1' });
    expect(left.map((a) => a.id).sort()).toEqual(['old-pending', 'recent']);
    // The grant the old request decided stays, no longer pointing at it.
    expect(
      (await s.grants('a1')).map((g) => ({ id: g.id, status: g.status, approvalId: g.approvalId })),
    ).toEqual([{ id: 'g1', status: 'active', approvalId: null }]);
  });
});
