/**
 * Opens the store a deployment names (issue 13): the embedded SQLite file, or PostgreSQL for
 * several replicas. Everything above storage sees only the Store contract (types.ts), and what
 * the chosen store brings for state that outlives a process or is shared by replicas:
 *
 * |                    | SQLite (one process)              | PostgreSQL (replicas)                 |
 * |--------------------|-----------------------------------|---------------------------------------|
 * | replay ledger      | journal beside the file           | `seen_jtis` table (pg-shared.ts)      |
 * | rate budgets       | (none: the process's own limiter) | `rate_buckets` table (pg-shared.ts)   |
 * | others' commits    | (none: the only writer)           | LISTEN/NOTIFY (pg-notify.ts)          |
 * | the only writer    | `<db>-lock` held (sqlite-lock.ts) | (none: replicas share everything)     |
 */
import type { Clock } from '../clock.js';
import { openReplayJournal, type ReplayJournal } from './replay-journal.js';
import { openSqliteStore } from './open-sqlite.js';
import { lockDatabase } from './sqlite-lock.js';
import type { OpenStoreOptions, Storage, StoreLocation } from './storage-kinds.js';
import type { Store } from './types.js';

export type { OpenStoreOptions, Storage, StoreLocation, Sweep } from './storage-kinds.js';

export async function openStorage(
  at: StoreLocation,
  clock: Clock,
  options: OpenStoreOptions = {},
): Promise<Storage> {
  if (at.kind === 'sqlite') return openSqliteStorage(at.file, clock, options);
  // Loaded only for PostgreSQL: the driver and the replica machinery cost a SQLite start-up time
  // and memory it has no use for.
  const { openPostgresStorage } = await import('./open-postgres.js');
  return openPostgresStorage(at, clock, options);
}

/**
 * The SQLite file, for this process alone (sqlite-lock.ts: a second one is refused before it
 * reads or writes anything), and the replay journal beside it.
 */
async function openSqliteStorage(file: string, clock: Clock, options: OpenStoreOptions): Promise<Storage> {
  const lock = lockDatabase(file);
  let store: Store;
  try {
    store = openSqliteStore({ file, ...(options.onWrite ? { onWrite: options.onWrite } : {}) });
  } catch (err) {
    lock?.release();
    throw err;
  }
  let opened: ReplayJournal | undefined;
  try {
    opened = openReplayJournal(file, clock.now());
  } catch (err) {
    await store.close();
    lock?.release();
    throw err;
  }
  const journal = opened;
  return {
    store,
    ...(journal ? { replayLedger: journal } : {}),
    // Whole files of the journal: a handful a run.
    sweeps: journal ? [{ batch: 1, run: (now) => journal.sweep(now) }] : [],
    close: async () => {
      try {
        journal?.close();
        await store.close();
      } finally {
        // Last: another process may take the file only once nothing more is written to it.
        lock?.release();
      }
    },
  };
}
