/**
 * The operator's activity query over a time window without an owner (issue 17): served newest
 * first by (at, id) from the activity_at index, paged with an id cursor. Rows are written with
 * times out of id order, as batched execution records are (an event logged directly may get a
 * lower id than an older execution still waiting in its batch), and every page walk must return
 * each row of the window exactly once, in order.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../../src/storage/sqlite-store.js';
import type { ActivityQuery, ActivityRecord, Store } from '../../../src/storage/types.js';
import { tempDbFile } from '../../helpers/proxy.js';

let store: Store;
beforeAll(() => {
  store = openSqliteStore({ file: tempDbFile() });
});
afterAll(() => store.close());

const record = (at: number): ActivityRecord => ({
  at,
  type: 'execute',
  agentId: 'agt_1',
  hostId: 'hst_1',
  userId: null,
  capability: 'get_pet',
  outcome: 'success',
  detail: null,
  jti: null,
  latencyMs: 1,
  upstreamStatus: 200,
});

/** Every page of the query, following next cursors as the admin API hands them out. */
async function walk(query: Omit<ActivityQuery, 'beforeId'>): Promise<ActivityRecord[]> {
  const out: ActivityRecord[] = [];
  let beforeId: number | undefined;
  for (let pages = 0; pages < 1_000; pages++) {
    const rows = await store.activity({ ...query, ...(beforeId !== undefined ? { beforeId } : {}) });
    out.push(...rows);
    if (rows.length < query.limit) return out;
    beforeId = rows[rows.length - 1]?.id;
  }
  throw new Error('more than 1,000 pages');
}

describe('activity in a time window, paged', () => {
  it('returns every row of the window once, newest first by (at, id), on any page size', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 0, maxLength: 60 }),
        fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 41 }), { nil: undefined }),
        fc.integer({ min: 1, max: 7 }),
        async (times, since, until, limit) => {
          await store.write(async (tx) => {
            await tx.deleteAgentActivity('agt_1', 10_000);
            for (const at of times) await tx.appendActivity(record(at));
          });
          const window = {
            ...(since !== undefined ? { since } : {}),
            ...(until !== undefined ? { until } : {}),
          };
          if (since === undefined && until === undefined) return; // not a window: the id walk
          const everything = await store.activity({ limit: 1_000 });
          const expected = everything
            .filter((r) => (since === undefined || r.at >= since) && (until === undefined || r.at < until))
            .sort((a, b) => b.at - a.at || (b.id as number) - (a.id as number))
            .map((r) => r.id);
          expect((await walk({ ...window, limit })).map((r) => r.id)).toEqual(expected);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('goes on below the window end when the cursor row was deleted meanwhile', async () => {
    await store.write(async (tx) => {
      await tx.deleteAgentActivity('agt_1', 10_000);
      // The first row written is the newest by time: the first page's cursor is the lowest id.
      for (const at of [40, 10, 20, 30]) await tx.appendActivity(record(at));
    });
    const [first] = await store.activity({ until: 100, limit: 1 });
    expect(first?.at).toBe(40);
    // An erase of the agent's records (§9.2) removes it before the next page is asked for.
    await store.write((tx) => tx.deleteAgentActivity('agt_1', 1));
    const rest = await store.activity({ until: 100, beforeId: first?.id ?? 0, limit: 10 });
    expect(rest).toEqual([]);
    // Every remaining row has a higher id than the cursor: nothing below it is left to show.
    expect((await store.activity({ until: 100, limit: 10 })).map((r) => r.at)).toEqual([30, 20, 10]);
  });
});
