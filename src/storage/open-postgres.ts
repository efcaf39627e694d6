/**
 * The PostgreSQL side of openStorage (open.ts), in a module of its own so that a SQLite
 * deployment never loads the driver: the store, the shared replay ledger and rate budgets, and
 * LISTEN/NOTIFY for other replicas' commits.
 */
import type { Clock } from '../clock.js';
import { localLimiter, RateLimiter, type Limiter } from '../util/rate-limit.js';
import { StoreUnavailableError } from './errors.js';
import type { OpenStoreOptions, Storage, StoreLocation } from './storage-kinds.js';
import { PgChangeListener } from './pg-notify.js';
import { sharedLimiter, sharedReplayLedger } from './pg-shared.js';
import { PgStore } from './pg-store.js';

function openPgStore(
  at: StoreLocation & { readonly kind: 'postgres' },
  options: OpenStoreOptions,
): Promise<PgStore> {
  return PgStore.open(at.url, {
    poolSize: at.poolSize,
    connectionTimeoutMs: at.connectionTimeoutMs,
    statementTimeoutMs: at.statementTimeoutMs,
    ...(options.onWrite ? { onWrite: options.onWrite } : {}),
    ...(options.onConnectionError ? { onPoolError: options.onConnectionError } : {}),
  });
}

/**
 * Rows per sweep of the shared tables: one a request, so each replica must be able to delete what
 * it inserts: 5000 a batch, 100 batches a run every 30 s (start/maintenance.ts) is 16k a second, a few ms each.
 */
const SHARED_SWEEP_BATCH = 5000;

export async function openPostgresStorage(
  at: StoreLocation & { readonly kind: 'postgres' },
  clock: Clock,
  options: OpenStoreOptions,
): Promise<Storage> {
  const store = await openPgStore(at, options);
  const replayLedger = sharedReplayLedger(store.shared);
  let listener: PgChangeListener | undefined;
  return {
    store,
    replayLedger,
    limiter: orLocalWhileDown(sharedLimiter(store.shared, clock), localLimiter(new RateLimiter(clock))),
    sweeps: [
      { batch: SHARED_SWEEP_BATCH, run: (now, limit) => replayLedger.sweep(now, limit) },
      { batch: SHARED_SWEEP_BATCH, run: (now, limit) => store.shared.deleteFullRateBuckets(now, limit) },
    ],
    follow: (handlers) => {
      listener ??= new PgChangeListener(
        { url: at.url, origin: store.origin, connectionTimeoutMs: at.connectionTimeoutMs },
        handlers,
      );
      return listener.start();
    },
    close: async () => {
      await listener?.close();
      await store.close();
    },
  };
}

/**
 * The shared budgets, or while the database cannot be reached this replica's own: a request that
 * needs nothing else from the database (discovery, a public capability list) is still answered
 * and still limited, per replica, during an outage; everything that needs the database gets its
 * 503 from the store anyway.
 */
function orLocalWhileDown(shared: Limiter, local: Limiter): Limiter {
  const fallBack = <T>(sharedCall: () => T | Promise<T>, localCall: () => T | Promise<T>): Promise<T> =>
    Promise.resolve()
      .then(sharedCall)
      .catch((err: unknown) => {
        if (err instanceof StoreUnavailableError) return localCall();
        throw err;
      });
  return {
    take: (takes) =>
      fallBack(
        () => shared.take(takes),
        () => local.take(takes),
      ),
    check: (take) =>
      fallBack(
        () => shared.check(take),
        () => local.check(take),
      ),
    give: (take) =>
      fallBack(
        () => shared.give(take),
        () => local.give(take),
      ),
  };
}
