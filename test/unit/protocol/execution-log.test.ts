import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/log.js';
import { ExecutionLog } from '../../../src/protocol/execution-log.js';
import { openSqliteStore } from '../../../src/storage/sqlite-store.js';
import type { ActivityRecord, Store } from '../../../src/storage/types.js';

// §11: execution records are batched off the hot path and written to the real SQLite store in
// one transaction per flush.

const stores: Store[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
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
function written(store: Store): string[] {
  return store
    .activity({ limit: 1_000_000 })
    .reverse()
    .map((r) => r.capability ?? '');
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
          if (failing()) throw new Error('database is locked');
          target.appendActivities(records);
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
  it('writes nothing until flushed, then every record in order', () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    for (let n = 0; n < 5; n++) log.record(record(n));
    expect(written(store)).toEqual([]);
    log.flush();
    expect(written(store)).toEqual(['cap_0', 'cap_1', 'cap_2', 'cap_3', 'cap_4']);
  });

  it('stores every field of a record', () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.record(record(7));
    log.flush();
    const [stored] = store.activity({ limit: 10 });
    expect(stored).toMatchObject(record(7));
    expect(typeof stored?.id).toBe('number');
  });

  it('does not write a record twice across flushes', () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.record(record(1));
    log.flush();
    log.flush();
    log.record(record(2));
    log.flush();
    expect(written(store)).toEqual(['cap_1', 'cap_2']);
  });

  it('flushes on stop', () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.start(60_000);
    log.record(record(1));
    log.record(record(2));
    expect(written(store)).toEqual([]);
    log.stop();
    expect(written(store)).toEqual(['cap_1', 'cap_2']);
  });

  it('flushes on its interval once started', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    log.start(10);
    try {
      log.record(record(1));
      expect(written(store)).toEqual([]);
      const deadline = Date.now() + 2_000;
      while (written(store).length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(written(store)).toEqual(['cap_1']);
    } finally {
      log.stop();
    }
  });

  it('flushes on its own once 256 records are queued, without waiting for the interval', async () => {
    const store = openStore();
    const log = new ExecutionLog(store, capturingLogger().logger);
    for (let n = 0; n < 255; n++) log.record(record(n));
    await nextTick();
    expect(written(store)).toHaveLength(0);
    log.record(record(255));
    expect(written(store)).toHaveLength(0);
    await nextTick();
    expect(written(store)).toHaveLength(256);
  });

  it('keeps a batch the store refused and writes it, in order, with the next flush', () => {
    const base = openStore();
    let fail = true;
    const { store, attempts } = flakyStore(base, () => fail);
    const { logger, lines } = capturingLogger();
    const log = new ExecutionLog(store, logger);
    log.record(record(1));
    log.record(record(2));
    log.flush();
    expect(attempts()).toBe(1);
    expect(written(base)).toEqual([]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'writing execution records failed',
        error: 'database is locked',
      }),
    ]);
    fail = false;
    log.record(record(3));
    log.flush();
    expect(written(base)).toEqual(['cap_1', 'cap_2', 'cap_3']);
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
    log.flush();
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        msg: 'execution records dropped (database too slow)',
        dropped: 3,
      }),
    );
    const newest = base.activity({ limit: 1 });
    expect(newest[0]?.capability).toBe('cap_99999');
    expect(newest[0]?.id).toBe(100_000);
  });
});
