/**
 * Opens the store a deployment names (issue 13): the embedded SQLite file, or PostgreSQL for
 * several replicas. Everything above storage sees only the Store contract (types.ts).
 */
import { PgStore } from './pg-store.js';
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

export async function openStore(at: StoreLocation, options: OpenStoreOptions = {}): Promise<Store> {
  if (at.kind === 'sqlite') {
    return openSqliteStore({ file: at.file, ...(options.onWrite ? { onWrite: options.onWrite } : {}) });
  }
  return PgStore.open(at.url, {
    poolSize: at.poolSize,
    connectionTimeoutMs: at.connectionTimeoutMs,
    statementTimeoutMs: at.statementTimeoutMs,
    ...(options.onWrite ? { onWrite: options.onWrite } : {}),
    ...(options.onConnectionError ? { onPoolError: options.onConnectionError } : {}),
  });
}
