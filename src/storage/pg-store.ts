/**
 * The PostgreSQL store (issue 13): several replicas share one database. The pool serves the
 * store's reads and single-statement writes (autocommit); each `write` is one SERIALIZABLE
 * transaction on one pooled connection, re-run when PostgreSQL reports a conflict (pg-pool.ts).
 * Migrations run at open (pg-schema.ts); reads are PgReader's, a transaction's writes PgWriter's.
 * What replicas share beyond the contract: `shared` (jtis, rate budgets) and the change notice
 * each write transaction sends its peers as it commits (pg-notify.ts).
 */
import { randomBytes } from 'node:crypto';
import { storeError } from './errors.js';
import { ChangeSet, CHANGES_CHANNEL, noticePayload } from './pg-notify.js';
import { inboxQuery } from './pg-queries.js';
import { openPool, poolQuery, transaction, type Connections, type PgStoreOptions } from './pg-pool.js';
import { PgReader, type Query } from './pg-reader.js';
import { insertOf, type Statement } from './pg-rows.js';
import { PgShared } from './pg-shared.js';
import * as signInState from './pg-sign-in-state.js';
import { PgWriter } from './pg-writer.js';
import { APPROVAL, ASYNC_JOB, SESSION } from './sqlite-columns.js';
import type {
  ActivityRecord,
  ApprovalRecord,
  AsyncJobRecord,
  ChallengeLimits,
  ChallengeRecord,
  GrantUse,
  InboxQuery,
  OidcPendingRecord,
  SessionRecord,
  Store,
  StoreWriter,
  StalePendingSwept,
} from './types.js';

export type { PgStoreOptions } from './pg-pool.js';

export class PgStore extends PgReader implements Store {
  /** Connects, migrates the schema, and returns the store; StoreUnavailableError if unreachable. */
  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    return new PgStore(await openPool(url, options), options);
  }

  /** This process's id in the change notices it sends (its own are skipped when they come back). */
  readonly origin = randomBytes(8).toString('hex');
  /** The replay ledger's and the rate budgets' statements, on the same pool. */
  readonly shared: PgShared;

  private constructor(
    private readonly connections: Connections,
    private readonly options: PgStoreOptions,
  ) {
    super(poolQuery(connections));
    this.shared = new PgShared(poolQuery({ ...connections, pool: connections.sharedPool }));
  }

  async write<T>(fn: (tx: StoreWriter) => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await transaction(this.connections, 'SERIALIZABLE', async (query) => {
        // A writer per attempt: a re-run starts with no changes noted.
        const writer = new PgWriter(query);
        const result = await fn(writer);
        // Inside the transaction: PostgreSQL delivers it only if this attempt commits.
        const notice = noticePayload(this.origin, writer.changes);
        if (notice !== undefined) await query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, notice]);
        return result;
      });
    } finally {
      this.options.onWrite?.('state', (performance.now() - started) / 1000);
    }
  }

  async touch(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants: ReadonlyMap<string, GrantUse> = new Map(),
    flushId?: string,
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
    await transaction(this.connections, 'READ COMMITTED', async (query) => {
      if (flushId !== undefined && !(await firstApplication(query, flushId))) return;
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

  forgetOlderAsyncJobs(agentId: string, keep: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM async_jobs WHERE id = ANY (ARRAY(SELECT id FROM async_jobs WHERE agent_id = $1
        ORDER BY created_at DESC, id DESC OFFSET $2))`,
      params: [agentId, keep],
    });
  }

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

  deleteClosedApprovalsBefore(before: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM approvals WHERE id = ANY (ARRAY(SELECT id FROM approvals WHERE decided_at < $1
        ORDER BY decided_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
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

  async recordPasskeyUse(id: string, counter: number, at: number): Promise<void> {
    await this.exec({
      sql: 'UPDATE passkeys SET counter = $1, last_used_at = $2 WHERE id = $3',
      params: [counter, at, id],
    });
  }

  deleteStalePerCalls(now: number, limit: number): Promise<number> {
    return this.exec({
      sql: `DELETE FROM per_call_approvals WHERE id = ANY (ARRAY(SELECT id FROM per_call_approvals
        WHERE keep_until <= $1 ORDER BY keep_until LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      params: [now, limit],
    });
  }

  deleteStalePending(before: number, limit: number, now: number): Promise<StalePendingSwept> {
    return transaction(this.connections, 'READ COMMITTED', async (query) => {
      const changes = async (sql: string, params: unknown[]): Promise<number> =>
        (await query(sql, params)).rowCount ?? 0;
      // Never-activated agents only: one pending a reactivation approval was active before (§10.9);
      // and not while a retried or extended registration still waits for a person.
      // A range of agents_status_listing; each deletion cascades along indexed foreign keys.
      const agents = await changes(
        `DELETE FROM agents WHERE id = ANY (ARRAY(SELECT id FROM agents WHERE status = 'pending'
          AND created_at < $1 AND activated_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM approvals WHERE approvals.agent_id = agents.id
            AND approvals.status = 'pending' AND approvals.expires_at > $3)
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
        [before, limit, now],
      );
      // A pending host is deleted only once no agent refers to it any more.
      const hosts = await changes(
        `DELETE FROM hosts WHERE id = ANY (ARRAY(SELECT id FROM hosts WHERE status = 'pending' AND created_at < $1
          AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id)
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
        [before, limit],
      );
      // One whose agents were all denied is rejected, as a denial of its last agent does.
      const rejected = await changes(
        `UPDATE hosts SET status = 'rejected', updated_at = $3 WHERE id = ANY (ARRAY(SELECT id FROM hosts
          WHERE status = 'pending' AND created_at < $1
          AND EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id)
          AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id AND agents.status <> 'rejected')
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
        [before, limit, now],
      );
      // Other replicas may hold those rows in their hot caches: a registration there by the same
      // key would otherwise build on a host that is gone.
      if (agents > 0 || hosts > 0 || rejected > 0) {
        const cleared = new ChangeSet();
        cleared.cache = true;
        await query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, noticePayload(this.origin, cleared)]);
      }
      return { agents, hosts, rejected };
    });
  }

  // The approval pages' state (pg-sign-in-state.ts says how each rule holds across replicas).

  insertOidcPending(pending: OidcPendingRecord, max: number, now: number): Promise<void> {
    return signInState.insertOidcPending(this.connections, pending, max, now);
  }

  takeOidcPending(
    stateHash: string,
    browserHash: string,
    now: number,
  ): Promise<OidcPendingRecord | undefined> {
    return signInState.takeOidcPending(this.query, stateHash, browserHash, now);
  }

  issueChallenge(challenge: ChallengeRecord, limits: ChallengeLimits, now: number): Promise<boolean> {
    return signInState.issueChallenge(this.connections, challenge, limits, now);
  }

  takeChallenge(challengeHash: string, now: number): Promise<ChallengeRecord | undefined> {
    return signInState.takeChallenge(this.query, challengeHash, now);
  }

  useTotpStep(userId: string, step: number, keepUntil: number): Promise<boolean> {
    return signInState.useTotpStep(this.connections, userId, step, keepUntil);
  }

  deleteExpiredSignInState(now: number, limit: number): Promise<number> {
    return signInState.deleteExpiredSignInState(this.query, now, limit);
  }

  /** `SELECT 1` on the probe's connection (pg-pool.ts), within the pool's connection and statement timeouts. */
  async ping(): Promise<void> {
    try {
      await this.connections.probe.query('SELECT 1');
    } catch (err) {
      throw storeError(err);
    }
  }

  async close(): Promise<void> {
    const { pool, sharedPool, probe } = this.connections;
    await Promise.all([pool, sharedPool, probe].filter((p) => !p.ended).map((p) => p.end()));
  }
}

/**
 * Notes the usage flush `id` as applied, in its own transaction; false when it was already (a
 * retry of a flush whose commit's answer was lost): `uses = uses + n` is not idempotent. A
 * concurrent transaction noting the same id makes this one wait for its outcome (the primary
 * key). Ids older than a day go in the same statement: a flush is retried within seconds, or not
 * after its process ends.
 */
async function firstApplication(query: Query, id: string): Promise<boolean> {
  const { rows } = await query(
    `WITH swept AS (DELETE FROM applied_usage_flushes WHERE at < now() - interval '1 day')
    INSERT INTO applied_usage_flushes (id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id`,
    [id],
  );
  return rows.length === 1;
}
