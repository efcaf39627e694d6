import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger, type Logger } from '../../../src/log.js';
import { ExecutionLog } from '../../../src/protocol/execution-log.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { ActivityRecord, Store } from '../../../src/storage/types.js';

// §11: execution records are group-committed off the hot path (issue 10 class 14) and written to
// the real SQLite store in one transaction per batch.

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function openStore(): Store {
  const store = openSqliteStore({ file: ':memory:' });
  stores.push(store);
  return store;
}

function record(n: number): ActivityRecord {
  return {
    at: 1_700_000_000_000 + n,
    type: 'capability.executed',
    agentId: 'agent-1',
    hostId: 'host-1',
    userId: null,
    capability: `cap_${n}`,
    outcome: 'success',
    detail: { n },
    jti: `jti-${n}`,
    latencyMs: 12.5,
    upstreamStatus: 200,
  };
}

/** Stored capabilities, oldest first. */
async function written(store: Store): Promise<string[]> {
  return (await store.activity({ limit: 1_000_000 })).reverse().map((r) => r.capability ?? '');
}

function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger(
    'debug',
    (line) => void lines.push(JSON.parse(line) as Record<string, unknown>),
  );
  return { logger, lines };
}

/** The store, with appendActivities failing while `failing()` says so; counts the attempts. */
function flakyStore(store: Store, failing: () => boolean): { store: Store; attempts: () => number } {
  let attempts = 0;
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'appendActivities') {
        return (records: readonly ActivityRecord[]) => {
          attempts++;
          if (failing()) return Promise.reject(new Error('database is locked'));
          return target.appendActivities(records);
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: wrapped, attempts: () => attempts };
}

const nextTick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('ExecutionLog', () => {
  it('writes nothing until flushed, then every record in order', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    for (let n = 0; n < 5; n++) log.record(record(n));
    expect(await written(store)).toEqual([]);
    await log.flush();
    expect(await written(store)).toEqual(['cap_0', 'cap_1', 'cap_2', 'cap_3', 'cap_4']);
  });

  it('stores every field of a record', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.record(record(7));
    await log.flush();
    const [stored] = await store.activity({ limit: 10 });
    expect(stored).toMatchObject(record(7));
    expect(typeof stored?.id).toBe('number');
  });

  it('does not write a record twice across flushes', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.record(record(1));
    await log.flush();
    await log.flush();
    log.record(record(2));
    await log.flush();
    expect(await written(store)).toEqual(['cap_1', 'cap_2']);
  });

  it('a flush settles only once batches already being written are stored (the activity listing flushes first)', async () => {
    const store = openStore();
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The store takes its time with the first batch, as a database just back from an outage may.
    const slow = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'appendActivities') {
          return async (records: readonly ActivityRecord[]) => {
            await gate;
            return target.appendActivities(records);
          };
        }
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const log = new ExecutionLog(slow, capturingLogger().logger);
    log.record(record(1));
    void log.flush(); // the timer's commit, say: the batch is now with the store
    let settled = false;
    const reader = log.flush().then(() => (settled = true));
    await nextTick();
    expect(settled).toBe(false);
    open();
    await reader;
    expect(await written(store)).toEqual(['cap_1']);
  });

  it('commits everything queued on stop (SIGTERM), long before the window would have', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 1_000, maxBatch: 256 });
    log.start();
    log.record(record(1));
    log.record(record(2));
    expect(await written(store)).toEqual([]);
    await log.stop();
    expect(await written(store)).toEqual(['cap_1', 'cap_2']);
  });

  describe('group commit (audit.commit_window)', () => {
    beforeEach(() => {
      vi.useFakeTimers();
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it('commits a record no later than one commit window after it was queued', async () => {
      const store = openStore();
      const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
      log.start();
      log.record(record(1));
      await vi.advanceTimersByTimeAsync(19);
      expect(await written(store)).toEqual([]);
      await vi.advanceTimersByTimeAsync(1);
      expect(await written(store)).toEqual(['cap_1']);
      await log.stop();
    });

    it('the window runs from the first record of a batch: a steady trickle cannot postpone the commit', async () => {
      const store = openStore();
      const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
      log.start();
      for (let n = 0; n < 10; n++) {
        log.record(record(n));
        await vi.advanceTimersByTimeAsync(2);
      }
      // 20 ms after the first record, all ten are committed, in one batch.
      expect(await written(store)).toHaveLength(10);
      log.record(record(10));
      await vi.advanceTimersByTimeAsync(19);
      expect(await written(store)).toHaveLength(10);
      await vi.advanceTimersByTimeAsync(1);
      expect(await written(store)).toHaveLength(11);
      await log.stop();
    });

    it('a busy event loop cannot hold a batch past its window: the next record commits it even before the late timer runs', async () => {
      let now = 1_000;
      const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
      try {
        const store = openStore();
        const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
        log.start();
        log.record(record(1));
        now += 19;
        log.record(record(2));
        expect(await written(store)).toEqual([]);
        // 25 ms later by the clock, but the timer has not run (no fake time passed).
        now += 6;
        log.record(record(3));
        expect(await written(store)).toEqual(['cap_1', 'cap_2', 'cap_3']);
        await log.stop();
      } finally {
        clock.mockRestore();
      }
    });

    it('writes each batch in one transaction: a batch is all there or not at all', async () => {
      const base = openStore();
      const batches: number[] = [];
      const store = new Proxy(base, {
        get(target, prop, receiver) {
          if (prop === 'appendActivities') {
            return (records: readonly ActivityRecord[]) => {
              batches.push(records.length);
              return target.appendActivities(records);
            };
          }
          const value: unknown = Reflect.get(target, prop, receiver);
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
      log.start();
      for (let n = 0; n < 50; n++) log.record(record(n));
      await vi.advanceTimersByTimeAsync(20);
      for (let n = 50; n < 60; n++) log.record(record(n));
      await vi.advanceTimersByTimeAsync(20);
      expect(batches).toEqual([50, 10]);
      await log.stop();
    });

    it('costs nothing when idle: no timer is pending without a queued record', async () => {
      const store = openStore();
      const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
      log.start();
      expect(vi.getTimerCount()).toBe(0);
      log.record(record(1));
      expect(vi.getTimerCount()).toBe(1);
      await vi.advanceTimersByTimeAsync(20);
      expect(vi.getTimerCount()).toBe(0);
      await log.stop();
    });

    it('retries a refused batch after a pause, then commits it with what came since, in order', async () => {
      const base = openStore();
      let fail = true;
      const { store, attempts } = flakyStore(base, () => fail);
      const log = new ExecutionLog(store, capturingLogger().logger, { commitWindowMs: 20, maxBatch: 256 });
      log.start();
      log.record(record(1));
      await vi.advanceTimersByTimeAsync(20);
      expect(attempts()).toBe(1);
      // While the store refuses, new records do not bring the retry forward.
      for (let n = 2; n < 100; n++) log.record(record(n));
      await vi.advanceTimersByTimeAsync(500);
      expect(attempts()).toBe(1);
      fail = false;
      await vi.advanceTimersByTimeAsync(500);
      expect(attempts()).toBe(2);
      expect(await written(base)).toHaveLength(99);
      expect((await written(base))[0]).toBe('cap_1');
      await log.stop();
    });
  });

  it('refuses a commit window or batch size that is not a positive whole number', () => {
    const store = openStore();
    const logger = capturingLogger().logger;
    expect(() => new ExecutionLog(store, logger, { commitWindowMs: 0, maxBatch: 256 })).toThrow(RangeError);
    expect(() => new ExecutionLog(store, logger, { commitWindowMs: 20, maxBatch: 0 })).toThrow(RangeError);
  });

  it('flushes on its own once 256 records are queued, without waiting for the window', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    for (let n = 0; n < 255; n++) log.record(record(n));
    await nextTick();
    expect(await written(store)).toHaveLength(0);
    log.record(record(255));
    expect(await written(store)).toHaveLength(0);
    await nextTick();
    expect(await written(store)).toHaveLength(256);
  });

  it('keeps a batch the store refused and writes it, in order, with the next flush', async () => {
    const base = openStore();
    let fail = true;
    const { store, attempts } = flakyStore(base, () => fail);
    const { logger, lines } = capturingLogger();
    const log = new ExecutionLog(store, logger);
    log.record(record(1));
    log.record(record(2));
    await log.flush();
    expect(attempts()).toBe(1);
    expect(await written(base)).toEqual([]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'writing execution records failed',
        error: 'database is locked',
      }),
    ]);
    fail = false;
    log.record(record(3));
    await log.flush();
    expect(await written(base)).toEqual(['cap_1', 'cap_2', 'cap_3']);
  });

  it('logs the first refused commit and the recovery, not every retry (a database outage)', async () => {
    const base = openStore();
    let fail = true;
    const { store, attempts } = flakyStore(base, () => fail);
    const { logger, lines } = capturingLogger();
    const log = new ExecutionLog(store, logger);
    log.record(record(1));
    await log.flush();
    log.record(record(2));
    await log.flush();
    await log.flush();
    expect(attempts()).toBe(3);
    fail = false;
    await log.flush();
    expect(await written(base)).toEqual(['cap_1', 'cap_2']);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['error', 'writing execution records failed'],
      ['info', 'execution records written again'],
    ]);
    expect(lines[1]).toMatchObject({ failed_commits: 3 });
  });

  it('retries a refused batch once per scheduled flush, not once per new record', async () => {
    // A locked database blocks each attempt for up to busy_timeout: a retry per record would
    // stall the proxy for as long as records keep arriving.
    const { store, attempts } = flakyStore(openStore(), () => true);
    const log = new ExecutionLog(store, capturingLogger().logger);
    for (let n = 0; n < 300; n++) log.record(record(n));
    await nextTick();
    await nextTick();
    expect(attempts()).toBe(1);
  });

  it('drops records beyond the backlog limit while the store is failing, and says how many', async () => {
    const base = openStore();
    let fail = true;
    const { store } = flakyStore(base, () => fail);
    const { logger, lines } = capturingLogger();
    const log = new ExecutionLog(store, logger);
    for (let n = 0; n < 100_003; n++) log.record(record(n));
    await nextTick();
    fail = false;
    await log.flush();
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        msg: 'execution records dropped (database too slow)',
        dropped: 3,
      }),
    );
    const newest = await base.activity({ limit: 1 });
    expect(newest[0]?.capability).toBe('cap_99999');
    expect(newest[0]?.id).toBe(100_000);
  });
});
