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
 */
import type { Clock } from '../clock.js';
import type { Limiter } from '../util/rate-limit.js';
import type { ChangeHandlers } from './pg-notify.js';
import { openReplayJournal, type ReplayJournal } from './replay-journal.js';
import type { ReplayLedger } from './replay-ledger.js';
import { openSqliteStore } from './sqlite-store.js';
import type { Store } from './types.js';

export type StoreLocation =
  | { readonly kind: 'sqlite'; /** Absolute path, or `:memory:`. */ readonly file: string }
  | {
      readonly kind: 'postgres';
      /** The connection URL, password included: never logged. */
      readonly url: string;
      readonly poolSize: number;
      readonly connectionTimeoutMs: number;
      readonly statementTimeoutMs: number;
    };

export interface OpenStoreOptions {
  /** Each write transaction's duration (the database latency metric). */
  readonly onWrite?: (kind: 'state' | 'activity', seconds: number) => void;
  /** A pooled PostgreSQL connection failed while idle (the pool replaces it). */
  readonly onConnectionError?: (err: Error) => void;
}

export interface Sweep {
  readonly batch: number;
  readonly run: (now: number, limit: number) => number | Promise<number>;
}

/** The store and what comes with it (see the table above). */
export interface Storage {
  readonly store: Store;
  /** Where accepted jtis are recorded beyond memory; absent for `:memory:` (nothing outlives it). */
  readonly replayLedger?: ReplayLedger;
  /** The rate budgets every replica shares; absent: each process keeps its own. */
  readonly limiter?: Limiter;
  /**
   * Bounded sweeps of what the ledger and the budgets leave behind: each deletes at most `limit`
   * (its `batch`) expired entries a call and returns how many.
   */
  readonly sweeps: readonly Sweep[];
  /** Starts following other replicas' commits (PostgreSQL only); closed with the storage. */
  readonly follow?: (handlers: ChangeHandlers) => Promise<void>;
  /** The listener first, then the journal (its last lines fsynced), then the store. */
  close(): Promise<void>;
}

export async function openStorage(
  at: StoreLocation,
  clock: Clock,
  options: OpenStoreOptions = {},
): Promise<Storage> {
  if (at.kind === 'sqlite') {
    const store = openSqliteStore({
      file: at.file,
      ...(options.onWrite ? { onWrite: options.onWrite } : {}),
    });
    let opened: ReplayJournal | undefined;
    try {
      opened = openReplayJournal(at.file, clock.now());
    } catch (err) {
      await store.close();
      throw err;
    }
    const journal = opened;
    return {
      store,
      ...(journal ? { replayLedger: journal } : {}),
      // Whole files of the journal: a handful a run.
      sweeps: journal ? [{ batch: 1, run: (now) => journal.sweep(now) }] : [],
      close: async () => {
        journal?.close();
        await store.close();
      },
    };
  }
  // Loaded only for PostgreSQL: the driver and the replica machinery cost a SQLite start-up time
  // and memory it has no use for.
  const { openPostgresStorage } = await import('./open-postgres.js');
  return openPostgresStorage(at, clock, options);
}
