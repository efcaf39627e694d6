/**
 * What opening a store takes and gives (open.ts), apart from the opening itself, so that the
 * PostgreSQL side, which open.ts loads only when it is chosen, can name them without importing it.
 */
import type { Limiter } from '../util/rate-limit.js';
import type { ChangeHandlers } from './pg-notify.js';
import type { ReplayLedger } from './replay-ledger.js';
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
