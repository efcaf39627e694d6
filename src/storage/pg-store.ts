/**
 * The PostgreSQL store (issue 13): several replicas share one database. A `pg.Pool` serves the
 * store's reads (one statement each, autocommit); each `write` is one SERIALIZABLE transaction on
 * one pooled connection, re-run from the start when PostgreSQL reports a serialization failure or
 * a deadlock (it rolled the transaction back, so `fn` sees none of its earlier attempt), a few
 * times with a jittered backoff. Migrations run at open (pg-schema.ts).
 *
 * A database that cannot be reached, drops the connection or does not answer within the timeouts
 * surfaces as StoreUnavailableError (errors.ts), never retried here: a COMMIT whose answer was
 * lost may have committed.
 */
import pg from 'pg';
import { UserError } from '../errors.js';
import { storeError } from './errors.js';
import { inboxQuery } from './pg-queries.js';
import { PgReader, type Query, type QueryResult } from './pg-reader.js';
import { insertOf, type Statement } from './pg-rows.js';
import { migratePg } from './pg-schema.js';
import { PgWriter } from './pg-writer.js';
import { APPROVAL, ASYNC_JOB, PASSKEY, SESSION } from './sqlite-columns.js';
import type {
  ActivityRecord,
  ApprovalRecord,
  AsyncJobRecord,
  GrantUse,
  InboxQuery,
  PasskeyRecord,
  SessionRecord,
  Store,
  StoreWriter,
} from './types.js';

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

/** SQLSTATEs after which PostgreSQL has rolled the transaction back and a re-run may succeed. */
const RETRYABLE = new Set(['40001', '40P01']);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function positive(name: string, value: number | undefined, fallback: number, min = 1): number {
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

export class PgStore extends PgReader implements Store {
  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    const statementTimeout = positive('statementTimeoutMs', options.statementTimeoutMs, 5000);
    const pool = new pg.Pool({
      connectionString: url,
      max: positive('poolSize', options.poolSize, 10),
      connectionTimeoutMillis: positive('connectionTimeoutMs', options.connectionTimeoutMs, 5000),
      statement_timeout: statementTimeout,
      query_timeout: statementTimeout + 1000,
      idle_in_transaction_session_timeout: statementTimeout * 2,
      keepAlive: true,
      application_name: 'agent-auth-proxy',
      types: types(),
    });
    // Without a listener, an idle connection's error (a database restart) would crash the process.
    pool.on('error', (err) => options.onPoolError?.(err));
    const retries = positive('serializationRetries', options.serializationRetries, 5, 0);
    try {
      const client = await pool.connect();
      try {
        await migratePg(client);
      } finally {
        client.release();
      }
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw storeError(err);
    }
    return new PgStore(pool, retries, options);
  }

  private constructor(
    private readonly pool: pg.Pool,
    private readonly retries: number,
    private readonly options: PgStoreOptions,
  ) {
    super(async (sql, params = []) => {
      options.onQuery?.(sql, params);
      try {
        return await pool.query(sql, params as unknown[]);
      } catch (err) {
        throw storeError(err);
      }
    });
  }

  /**
   * Runs `fn` in one transaction on one connection, re-running it (with a fresh connection) after
   * a serialization failure or deadlock, at most `retries` times.
   */
  private async transaction<T>(isolation: string, fn: (query: Query) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw storeError(err);
      }
      // One statement at a time on the connection, even when `fn` starts several at once
      // (node-postgres's own queueing is deprecated), BEGIN, COMMIT and ROLLBACK included.
      let last: Promise<unknown> = Promise.resolve();
      const send = (sql: string, params: readonly unknown[] = []): Promise<QueryResult> => {
        const next = last.then(() => client.query(sql, params as unknown[]));
        last = next.catch(() => undefined); // never rejects: the next statement runs regardless
        return next;
      };
      const query: Query = (sql, params = []) => {
        this.options.onQuery?.(sql, params);
        return send(sql, params);
      };
      let broken: Error | undefined;
      try {
        await send(`BEGIN ISOLATION LEVEL ${isolation}`);
        const result = await fn(query);
        const commit = await send('COMMIT');
        // COMMIT of a transaction aborted by an error `fn` swallowed answers ROLLBACK, not an error.
        if (commit.command !== 'COMMIT') throw new Error('the transaction failed and was rolled back');
        return result;
      } catch (err) {
        broken = await send('ROLLBACK').then(
          () => undefined,
          (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
        );
        const code = (err as { code?: unknown }).code;
        if (!broken && typeof code === 'string' && RETRYABLE.has(code) && attempt < this.retries) {
          // Jittered and growing, so that the transactions that collided do not collide again.
          await sleep(Math.random() * 5 * 2 ** attempt);
          continue;
        }
        throw storeError(err);
      } finally {
        // A connection whose ROLLBACK failed is in an unknown state: the pool drops it.
        client.release(broken);
      }
    }
  }

  async write<T>(fn: (tx: StoreWriter) => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await this.transaction('SERIALIZABLE', (query) => fn(new PgWriter(query)));
    } finally {
      this.options.onWrite?.('state', (performance.now() - started) / 1000);
    }
  }

  async touch(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants: ReadonlyMap<string, GrantUse> = new Map(),
  ): Promise<void> {
    if (agents.size === 0 && hosts.size === 0 && grants.size === 0) return;
    // One statement per table over arrays; rows in id order, so that two replicas flushing at
    // once lock them in the same order (a deadlock is still retried).
    const sorted = <V>(m: ReadonlyMap<string, V>): [string, V][] =>
      [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const lastUsed = (table: string, m: ReadonlyMap<string, number>): Statement => {
      const rows = sorted(m);
      return {
        sql: `UPDATE ${table} AS t SET last_used_at = GREATEST(COALESCE(t.last_used_at, 0), v.at)
          FROM unnest($1::text[], $2::bigint[]) AS v (id, at) WHERE t.id = v.id`,
        params: [rows.map(([id]) => id), rows.map(([, at]) => at)],
      };
    };
    const uses = sorted(grants);
    const statements = [
      ...(agents.size ? [lastUsed('agents', agents)] : []),
      ...(hosts.size ? [lastUsed('hosts', hosts)] : []),
      ...(grants.size
        ? [
            {
              sql: `UPDATE grants AS t SET uses = t.uses + v.uses,
                  last_used_at = GREATEST(COALESCE(t.last_used_at, 0), v.at)
                FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v (id, uses, at) WHERE t.id = v.id`,
              params: [
                uses.map(([id]) => id),
                uses.map(([, u]) => u.uses),
                uses.map(([, u]) => u.lastUsedAt ?? 0),
              ],
            },
          ]
        : []),
    ];
    await this.transaction('READ COMMITTED', async (query) => {
      for (const s of statements) await query(s.sql, s.params);
    });
  }

  async grantUses(agentId: string): Promise<Map<string, GrantUse>> {
    const { rows } = await this.query(
      'SELECT id, uses, last_used_at FROM grants WHERE agent_id = $1 AND (uses > 0 OR last_used_at IS NOT NULL)',
      [agentId],
    );
    return new Map(
      rows.map((r) => [
        r.id as string,
        { uses: r.uses as number, lastUsedAt: r.last_used_at as number | null },
      ]),
    );
  }

  async appendActivities(records: readonly ActivityRecord[]): Promise<void> {
    if (records.length === 0) return;
    // One statement whatever the batch size: a column array per field, inserted in batch order
    // (WITH ORDINALITY), so ids follow the order of the records.
    const column = <V>(f: (r: ActivityRecord) => V): V[] => records.map(f);
    const started = performance.now();
    try {
      await this.query(
        `INSERT INTO activity (at, type, agent_id, host_id, user_id, capability, outcome, detail, jti,
            latency_ms, upstream_status)
          SELECT at, type, agent_id, host_id, user_id, capability, outcome, detail, jti, latency_ms, upstream_status
          FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::json[], $9::text[], $10::float8[], $11::integer[]) WITH ORDINALITY
            AS r (at, type, agent_id, host_id, user_id, capability, outcome, detail, jti, latency_ms,
              upstream_status, n)
          ORDER BY n`,
        [
          column((r) => r.at),
          column((r) => r.type),
          column((r) => r.agentId),
          column((r) => r.hostId),
          column((r) => r.userId),
          column((r) => r.capability),
          column((r) => r.outcome),
          column((r) => (r.detail === null ? null : JSON.stringify(r.detail))),
          column((r) => r.jti),
          column((r) => r.latencyMs),
          column((r) => r.upstreamStatus),
        ],
      );
    } finally {
      this.options.onWrite?.('activity', (performance.now() - started) / 1000);
    }
  }

  private async exec(statement: Statement): Promise<number> {
    return (await this.query(statement.sql, statement.params)).rowCount ?? 0;
  }

  async insertAsyncJob(job: AsyncJobRecord): Promise<void> {
    await this.exec(insertOf('async_jobs', ASYNC_JOB, job));
  }

  // The sweeps take at most `limit` rows, oldest first along their index; SKIP LOCKED lets the
  // replicas sweep at once without waiting on each other's rows. The ids are collected first
  // (ARRAY(…), an InitPlan), then deleted by primary key: never a join the planner could turn
  // into a scan of the whole table.

  deleteExpiredAsyncJobs(now: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM async_jobs WHERE id = ANY (ARRAY(SELECT id FROM async_jobs WHERE expires_at < $1
        ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      params: [now, limit],
    });
  }

  deleteActivityBefore(before: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM activity WHERE id = ANY (ARRAY(SELECT id FROM activity WHERE at < $1
        ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      params: [before, limit],
    });
  }

  async insertSession(session: SessionRecord): Promise<void> {
    await this.exec(insertOf('sessions', SESSION, session));
  }

  async session(idHash: string): Promise<SessionRecord | undefined> {
    return this.one(SESSION, 'SELECT * FROM sessions WHERE id_hash = $1', [idHash]);
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.exec({ sql: 'DELETE FROM sessions WHERE id_hash = $1', params: [idHash] });
  }

  deleteExpiredSessions(now: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM sessions WHERE id_hash = ANY (ARRAY(SELECT id_hash FROM sessions WHERE expires_at <= $1
        ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      params: [now, limit],
    });
  }

  async markOpened(approvalId: string, userId: string, at: number): Promise<void> {
    await this.exec({
      sql: `INSERT INTO approval_openers (approval_id, user_id, opened_at) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, approval_id) DO NOTHING`,
      params: [approvalId, userId, at],
    });
  }

  inbox(query: InboxQuery): Promise<ApprovalRecord[]> {
    return this.many(APPROVAL, inboxQuery(query));
  }

  async insertPasskey(passkey: PasskeyRecord): Promise<void> {
    await this.exec(insertOf('passkeys', PASSKEY, passkey));
  }

  passkey(id: string): Promise<PasskeyRecord | undefined> {
    return this.one(PASSKEY, 'SELECT * FROM passkeys WHERE id = $1', [id]);
  }

  passkeys(userId: string): Promise<PasskeyRecord[]> {
    return this.many(PASSKEY, {
      sql: 'SELECT * FROM passkeys WHERE user_id = $1 ORDER BY created_at, id',
      params: [userId],
    });
  }

  async recordPasskeyUse(id: string, counter: number, at: number): Promise<void> {
    await this.exec({
      sql: 'UPDATE passkeys SET counter = $1, last_used_at = $2 WHERE id = $3',
      params: [counter, at, id],
    });
  }

  async deletePasskey(id: string, userId: string): Promise<boolean> {
    return (
      (await this.exec({
        sql: 'DELETE FROM passkeys WHERE id = $1 AND user_id = $2',
        params: [id, userId],
      })) > 0
    );
  }

  deleteStalePerCalls(now: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM per_call_approvals WHERE id = ANY (ARRAY(SELECT id FROM per_call_approvals
        WHERE keep_until <= $1 ORDER BY keep_until LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      params: [now, limit],
    });
  }

  deleteStalePending(before: number, limit: number): Promise<{ agents: number; hosts: number }> {
    return this.transaction('READ COMMITTED', async (query) => {
      const changes = async (sql: string): Promise<number> =>
        (await query(sql, [before, limit])).rowCount ?? 0;
      // Never-activated agents only: one pending a reactivation approval was active before (§10.9).
      // A range of agents_status_listing; each deletion cascades along indexed foreign keys.
      const agents = await changes(
        `DELETE FROM agents WHERE id = ANY (ARRAY(SELECT id FROM agents WHERE status = 'pending'
          AND created_at < $1 AND activated_at IS NULL ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      );
      // A pending host is deleted only once no agent refers to it any more.
      const hosts = await changes(
        `DELETE FROM hosts WHERE id = ANY (ARRAY(SELECT id FROM hosts WHERE status = 'pending' AND created_at < $1
          AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id)
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      );
      return { agents, hosts };
    });
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }
}
