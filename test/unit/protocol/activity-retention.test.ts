/** §9.2 retention on a real SQLite file: old activity goes in bounded batches, newer stays. */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ActivityRetention,
  RETENTION_BATCH,
  RETENTION_BATCHES_PER_RUN,
} from '../../../src/protocol/activity-retention.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { activityRecord } from '../../helpers/activity.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

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
    const retention = new ActivityRetention(store, clock, 90 * DAY);
    expect(await retention.prune()).toBe(old.length);
    expect(await count(store, 'old')).toBe(0);
    expect(await count(store, 'kept')).toBe(2);
    expect(await retention.prune()).toBe(0);
  });

  it('one run stops after its bounded number of batches; the next run takes the rest', async () => {
    const clock = new TestClock();
    store = openSqliteStore({ file: tempDbFile() });
    const backlog = RETENTION_BATCH * RETENTION_BATCHES_PER_RUN + 10;
    await store.appendActivities(Array.from({ length: backlog }, () => record(clock.now() - 2 * DAY, 'old')));
    const retention = new ActivityRetention(store, clock, DAY);
    expect(await retention.prune()).toBe(RETENTION_BATCH * RETENTION_BATCHES_PER_RUN);
    expect(await retention.prune()).toBe(10);
  });

  it('runs never overlap: a second call while one runs deletes nothing itself', async () => {
    const clock = new TestClock();
    store = openSqliteStore({ file: tempDbFile() });
    await store.appendActivities(
      Array.from({ length: 3 * RETENTION_BATCH }, () => record(clock.now() - 2 * DAY, 'old')),
    );
    const retention = new ActivityRetention(store, clock, DAY);
    const [first, second] = await Promise.all([retention.prune(), retention.prune()]);
    expect([first, second]).toEqual([3 * RETENTION_BATCH, 0]);
  });
});
