/**
 * The PostgreSQL store's connections (issue 13): the pool and its options, the migrations run at
 * open, and transactions on one pooled connection, re-run after a serialization failure or a
 * deadlock (PostgreSQL rolled the transaction back, so the re-run starts from nothing), a few
 * times with a jittered backoff. Failures of the database itself become StoreUnavailableError
 * (errors.ts) and are never re-run: a COMMIT whose answer was lost may have committed.
 */
import pg from 'pg';
import { UserError } from '../errors.js';
import { isUnavailable, StoreConflictError, storeError } from './errors.js';
import type { Query, QueryResult } from './pg-reader.js';
import { migratePg } from './pg-schema.js';

export interface PgStoreOptions {
  /** Connections in the pool (default 10). */
  readonly poolSize?: number;
  /** How long to wait for a connection, new or from a busy pool (default 5000 ms). */
  readonly connectionTimeoutMs?: number;
  /**
   * The server cancels a statement running longer (default 5000 ms); the client gives up on an
   * answer a second after that (a server gone without closing the connection).
   */
  readonly statementTimeoutMs?: number;
  /** How many times a write is re-run after a serialization failure or deadlock (default 5). */
  readonly serializationRetries?: number;
  /** Each write transaction's duration: `state` for `write`, `activity` for appendActivities. */
  readonly onWrite?: (kind: 'state' | 'activity', seconds: number) => void;
  /** Called with every statement the store sends and its parameters (the query-plan test). */
  readonly onQuery?: (sql: string, params: readonly unknown[]) => void;
  /** An idle pooled connection failed (the server went away); the pool replaces it. */
  readonly onPoolError?: (err: Error) => void;
}

/**
 * The most connections one replica opens: two pools of `poolSize` (the requests' state; the
 * replay ledger and rate budgets, pg-shared.ts), the change listener (pg-notify.ts) and the
 * readiness probe. Replicas × this must stay under the server's max_connections.
 */
export function connectionsPerReplica(poolSize: number): number {
  return 2 * poolSize + 2;
}

export interface Connections {
  readonly pool: pg.Pool;
  /** One connection for Store.ping (`/readyz`), apart from the requests' pool. */
  readonly probe: pg.Pool;
  /**
   * The replicas' shared state on the request path (pg-shared.ts: jtis, rate budgets), on a pool
   * of its own: a transaction holding a `pool` connection may check a budget without waiting for
   * another of the same pool (which, with every connection so held, would never come), and those
   * statements never queue behind transactions. Its sessions commit with synchronous_commit off:
   * a commit does not wait for its WAL flush, so a crash of the database may forget the last
   * ~0.6 s (3 × wal_writer_delay) of accepted jtis, as the SQLite journal may forget its last
   * second; rate budgets are UNLOGGED anyway.
   */
  readonly sharedPool: pg.Pool;
  readonly retries: number;
  readonly onQuery?: (sql: string, params: readonly unknown[]) => void;
}

/** SQLSTATEs after which PostgreSQL has rolled the transaction back and a re-run may succeed. */
const RETRYABLE = new Set(['40001', '40P01']);

/**
 * A unique violation (23505) in a SERIALIZABLE transaction: a concurrent one committed the same
 * key after this one looked for it (registrations of one agent key at once; one capability asked
 * for at once). PostgreSQL reports it as a serialization failure only when the look went through
 * that unique index, which the planner does not promise; re-run, the look finds the committed row
 * and the request gets its clean answer (409) rather than a 500. A violation that stays after the
 * re-runs is the error it was, not a busy database.
 */
const UNIQUE_VIOLATION = '23505';

/**
 * A write that still conflicted after its re-runs: rolled back, nothing applied, and the same
 * request may well succeed a moment later. The database is too busy for it now, as in an outage:
 * 503 with Retry-After (errors.ts), not a 500 that says the proxy is broken. Concurrent
 * registrations of different users conflict on a young database: SERIALIZABLE locks what a
 * statement read by B-tree page, and while an index is one page every new row lands on the page
 * another transaction read (a lookup of a key not there yet: the new agent's approvals, grants).
 */
function stillConflicting(err: Error, attempt: number): StoreConflictError {
  return new StoreConflictError(
    `database busy: the write conflicted with concurrent ones ${attempt + 1} times (${err.message})`,
    { cause: err },
  );
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function integer(name: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new UserError(`PostgreSQL store option ${name} must be an integer ≥ ${min}, got ${value}`);
  }
  return value;
}

/** int8 (counts, bigint columns) as a JS number: every value stored is below 2^53. */
function types(): pg.CustomTypesConfig {
  const overrides = new pg.TypeOverrides();
  overrides.setTypeParser(pg.types.builtins.INT8, Number);
  return overrides;
}

/** The pool, once the database's schema is current; throws StoreUnavailableError if unreachable. */
export async function openPool(url: string, options: PgStoreOptions): Promise<Connections> {
  const statementTimeout = integer('statementTimeoutMs', options.statementTimeoutMs, 5000);
  const connectionTimeoutMillis = integer('connectionTimeoutMs', options.connectionTimeoutMs, 5000);
  const max = integer('poolSize', options.poolSize, 10);
  const retries = integer('serializationRetries', options.serializationRetries, 5, 0);
  // Migrations get a connection of their own, without the statement timeouts: a migration may
  // take long, and a replica may wait for another's under the advisory lock.
  const migrator = new pg.Client({ connectionString: url, connectionTimeoutMillis, types: types() });
  migrator.on('error', () => undefined); // a dropped connection fails the pending query instead
  try {
    await migrator.connect();
    await migratePg(migrator);
  } catch (err) {
    throw storeError(err);
  } finally {
    await migrator.end().catch(() => undefined);
  }
  const config: pg.PoolConfig = {
    connectionString: url,
    max,
    connectionTimeoutMillis,
    statement_timeout: statementTimeout,
    query_timeout: statementTimeout + 1000,
    idle_in_transaction_session_timeout: statementTimeout * 2,
    keepAlive: true,
    application_name: 'agent-auth-proxy',
    types: types(),
    // A commit is answered once its WAL is flushed whatever the server's or the database's
    // default says: an acknowledged write (a revocation, an approval) survives a crash of the
    // database. Only the shared pool below opts out, for what may be forgotten.
    options: '-c synchronous_commit=on',
  };
  const pool = new pg.Pool(config);
  const sharedPool = new pg.Pool({
    ...config,
    application_name: 'agent-auth-proxy shared',
    options: '-c synchronous_commit=off',
  });
  // Without a listener, an idle connection's error (a database restart) would crash the process.
  for (const p of [pool, sharedPool]) p.on('error', (err) => options.onPoolError?.(err));
  // The readiness ping's own connection: requests holding every pooled connection is load, not an
  // outage, and must not make the replica unready (and then every replica at once). Same bounds.
  const probe = new pg.Pool({
    connectionString: url,
    max: 1,
    connectionTimeoutMillis,
    statement_timeout: statementTimeout,
    query_timeout: statementTimeout + 1000,
    idleTimeoutMillis: 60_000,
    keepAlive: true,
    application_name: 'agent-auth-proxy readiness',
  });
  // An idle probe connection lost (the database went away) is the next ping's to report.
  probe.on('error', () => undefined);
  return { pool, sharedPool, probe, retries, ...(options.onQuery ? { onQuery: options.onQuery } : {}) };
}

/** One statement on the pool (autocommit). */
export function poolQuery({ pool, onQuery }: Connections): Query {
  return async (sql, params = [], name) => {
    onQuery?.(sql, params);
    try {
      const values = params as unknown[];
      return await pool.query(name === undefined ? { text: sql, values } : { name, text: sql, values });
    } catch (err) {
      throw storeError(err);
    }
  };
}

/**
 * Runs `fn` in one transaction on one connection, re-running it (on a fresh connection) after a
 * serialization failure or deadlock, at most `retries` times.
 */
export async function transaction<T>(
  { pool, retries, onQuery }: Connections,
  isolation: 'SERIALIZABLE' | 'READ COMMITTED',
  fn: (query: Query) => Promise<T>,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw storeError(err);
    }
    // A checked-out connection that fails (the server stopped mid-transaction) emits 'error':
    // without a listener, an uncaught exception that ends the process. The failure reaches `fn`
    // through its pending or next statement; here it only marks the connection as not reusable.
    let lost: Error | undefined;
    const onLost = (err: Error): void => {
      lost = err;
    };
    client.on('error', onLost);
    // One statement at a time on the connection, even when `fn` starts several at once
    // (node-postgres's own queueing is deprecated), BEGIN, COMMIT and ROLLBACK included.
    let last: Promise<unknown> = Promise.resolve();
    const send = (sql: string, params: readonly unknown[] = []): Promise<QueryResult> => {
      const next = last.then(() => client.query(sql, params as unknown[]));
      last = next.catch(() => undefined); // never rejects: the next statement runs regardless
      return next;
    };
    let broken: Error | undefined;
    try {
      await send(`BEGIN ISOLATION LEVEL ${isolation}`);
      const result = await fn((sql, params = []) => {
        onQuery?.(sql, params);
        return send(sql, params);
      });
      const commit = await send('COMMIT');
      // COMMIT of a transaction aborted by an error `fn` swallowed answers ROLLBACK, not an error.
      if (commit.command !== 'COMMIT') throw new Error('the transaction failed and was rolled back');
      return result;
    } catch (err) {
      // A connection that failed or timed out is not asked to ROLLBACK: the ROLLBACK would queue
      // behind the statement it is stuck on and wait out another timeout, past the bound a request
      // waits. It is dropped instead; PostgreSQL rolls back the transaction of a closed connection.
      broken = isUnavailable(err)
        ? (err as Error)
        : await send('ROLLBACK').then(
            () => undefined,
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          );
      const code = (err as { code?: unknown }).code;
      const unique = code === UNIQUE_VIOLATION && isolation === 'SERIALIZABLE';
      if (typeof code === 'string' && (RETRYABLE.has(code) || unique)) {
        if (!broken && attempt < retries) {
          // Jittered and growing, so that the transactions that collided do not collide again:
          // 5–15 ms, then twice as long each time (at most 465 ms in all with the default 5).
          // Half that (0–5 ms first) left three times as many registrations refused (test).
          await sleep((0.5 + Math.random()) * 10 * 2 ** attempt);
          continue;
        }
        if (!unique) throw stillConflicting(err as Error, attempt);
      }
      throw storeError(err);
    } finally {
      // A connection whose ROLLBACK failed, or that failed, is in an unknown state: the pool drops it.
      client.removeListener('error', onLost);
      client.release(broken ?? lost);
    }
  }
}
