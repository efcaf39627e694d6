/**
 * The SQLite store (better-sqlite3): WAL journal, synchronous=FULL so an acknowledged commit
 * survives a crash or power loss, a busy timeout for concurrent processes, foreign keys on, and
 * migrations applied at open (open-sqlite.ts). The engine here answers synchronously
 * (better-sqlite3 runs on the caller's thread); sqlite-async-store.ts puts the asynchronous Store
 * contract over it, with one write transaction at a time.
 */
import Database from 'better-sqlite3';
import { activityQuery, listing, type Built } from './sqlite-queries.js';
import {
  ACTIVITY,
  AGENT,
  APPROVAL,
  ASYNC_JOB,
  GRANT,
  HOST,
  fromRow,
  insertSql,
  params,
  setClause,
  type Columns,
  type Row,
} from './sqlite-columns.js';
import type {
  ActivityQuery,
  ActivityRecord,
  AsyncJobRecord,
  AgentRecord,
  ApprovalRecord,
  GrantRecord,
  GrantUse,
  ChallengeLimits,
  ChallengeRecord,
  HostRecord,
  InboxQuery,
  ListingPage,
  OidcPendingRecord,
  PasskeyRecord,
  Patch,
  PerCallQuery,
  PerCallRecord,
  PerCallStatus,
  RetiredHostKey,
  SessionRecord,
  Store,
  StoreWriter,
  StalePendingSwept,
} from './types.js';
import { SqliteApprovers } from './sqlite-approvers.js';
import { SqlitePerCalls } from './sqlite-per-calls.js';
import { SqliteSignInState } from './sqlite-sign-in-state.js';

export type WriteKind = 'state' | 'activity';

/** A contract with its promises taken off: the same methods, answering on the spot. */
type Sync<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : never;
};
export type SyncStoreWriter = Sync<StoreWriter>;
/**
 * The synchronous engine: every Store method but `write`, whose transaction the asynchronous
 * store opens and ends with `begin`, `commit` and `rollback` (its `fn` awaits in between), and
 * `ping`, which the asynchronous store answers itself (the file is in the process).
 */
export type SyncStore = Sync<Omit<Store, 'write' | 'ping'>> & {
  begin(): void;
  commit(): void;
  rollback(): void;
};

export class SqliteEngine implements SyncStore {
  private readonly statements = new Map<string, Database.Statement>();
  readonly writer: SyncStoreWriter;
  /** The approval pages' state (sqlite-sign-in-state.ts). */
  private readonly signIns: SqliteSignInState;
  private readonly approvers: SqliteApprovers;
  private readonly perCallRows: SqlitePerCalls;
  // Prepared apart from `stmt`: not queries, so not for the query-plan test.
  private readonly beginStmt: Database.Statement;
  private readonly commitStmt: Database.Statement;
  private readonly rollbackStmt: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly onWrite?: (kind: WriteKind, seconds: number) => void,
    private readonly onPrepare?: (sql: string) => void,
  ) {
    this.signIns = new SqliteSignInState(db, (sql) => this.stmt(sql));
    this.approvers = new SqliteApprovers((sql) => this.stmt(sql));
    this.perCallRows = new SqlitePerCalls((sql) => this.stmt(sql));
    this.writer = this.createWriter();
    this.beginStmt = db.prepare('BEGIN IMMEDIATE');
    this.commitStmt = db.prepare('COMMIT');
    this.rollbackStmt = db.prepare('ROLLBACK');
  }

  private stmt(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
      this.onPrepare?.(sql);
    }
    return s;
  }

  private one<T>(columns: Columns<T>, sql: string, ...args: unknown[]): T | undefined {
    return fromRow(columns, this.stmt(sql).get(...args) as Row | undefined);
  }

  private many<T>(columns: Columns<T>, sql: string, ...args: unknown[]): T[] {
    return (this.stmt(sql).all(...args) as Row[]).map((r) => fromRow(columns, r) as T);
  }

  host(id: string): HostRecord | undefined {
    return this.one(HOST, 'SELECT * FROM hosts WHERE id = ?', id);
  }

  hostByThumbprint(thumbprint: string): HostRecord | undefined {
    return this.one(HOST, 'SELECT * FROM hosts WHERE thumbprint = ?', thumbprint);
  }

  hostByJwksUrl(url: string): HostRecord | undefined {
    return this.one(HOST, 'SELECT * FROM hosts WHERE jwks_url = ?', url);
  }

  appliedPolicyGrants(): string | undefined {
    const row = this.stmt('SELECT grants FROM applied_policy_grants WHERE id = 1').get() as
      { grants: string } | undefined;
    return row?.grants;
  }

  retiredHostKey(thumbprint: string): RetiredHostKey | undefined {
    const row = this.stmt('SELECT host_id, retired_at FROM retired_host_keys WHERE thumbprint = ?').get(
      thumbprint,
    ) as { host_id: string; retired_at: number } | undefined;
    return row && { thumbprint, hostId: row.host_id, retiredAt: row.retired_at };
  }

  private built<T>(columns: Columns<T>, { sql, params: values }: Built): T[] {
    return this.many(columns, sql, values);
  }

  hosts(filter: { status?: string; userId?: string } & ListingPage = {}): HostRecord[] {
    return this.built(HOST, listing('hosts', { status: filter.status, user_id: filter.userId }, filter));
  }

  agent(id: string): AgentRecord | undefined {
    return this.one(AGENT, 'SELECT * FROM agents WHERE id = ?', id);
  }

  agentByKey(hostId: string, keyThumbprint: string): AgentRecord | undefined {
    return this.one(
      AGENT,
      'SELECT * FROM agents WHERE host_id = ? AND key_thumbprint = ?',
      hostId,
      keyThumbprint,
    );
  }

  agents(filter: { hostId?: string; status?: string; userId?: string } & ListingPage = {}): AgentRecord[] {
    const by = { host_id: filter.hostId, status: filter.status, user_id: filter.userId };
    return this.built(AGENT, listing('agents', by, filter));
  }

  grants(agentId: string): GrantRecord[] {
    return this.many(GRANT, 'SELECT * FROM grants WHERE agent_id = ? ORDER BY created_at, rowid', agentId);
  }

  grantsOffVersion(capability: string, version: string): GrantRecord[] {
    // grants_version (capability, status, capability_version): the version test runs in the index.
    return this.many(
      GRANT,
      `SELECT * FROM grants WHERE capability = ? AND status = 'active'
        AND (capability_version IS NULL OR capability_version <> ?)`,
      capability,
      version,
    );
  }

  grantedCapabilities(capabilities: readonly string[]): Set<string> {
    // One statement whatever the catalog's size: the names go in as one JSON array, and each is
    // looked up in grants_version (capability, status, …).
    const rows = this.stmt(
      `SELECT DISTINCT capability FROM grants
        WHERE status = 'active' AND capability IN (SELECT value FROM json_each(?))`,
    ).all(JSON.stringify(capabilities)) as { capability: string }[];
    return new Set(rows.map((r) => r.capability));
  }

  approval(id: string): ApprovalRecord | undefined {
    return this.one(APPROVAL, 'SELECT * FROM approvals WHERE id = ?', id);
  }

  approvalByUserCode(userCode: string): ApprovalRecord | undefined {
    return this.one(APPROVAL, 'SELECT * FROM approvals WHERE user_code = ?', userCode);
  }

  approvals(filter: { status?: string; agentId?: string } & ListingPage = {}): ApprovalRecord[] {
    const by = { status: filter.status, agent_id: filter.agentId };
    return this.built(APPROVAL, listing('approvals', by, filter));
  }

  overdueApprovals(now: number, limit: number): ApprovalRecord[] {
    return this.many(
      APPROVAL,
      "SELECT * FROM approvals WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at LIMIT ?",
      now,
      limit,
    );
  }

  countHosts(status: string): number {
    return (this.stmt('SELECT count(*) AS n FROM hosts WHERE status = ?').get(status) as { n: number }).n;
  }

  countPolicyAdmittedHosts(): number {
    return (
      this.stmt(
        "SELECT count(*) AS n FROM hosts WHERE admitted_by_policy = 1 AND status = 'active' AND user_id IS NULL",
      ).get() as { n: number }
    ).n;
  }

  countOpenApprovals(hostId: string, now: number): number {
    // `+expires_at`: one host's range of approvals_host, not every host's open approvals by deadline.
    // Per-call approvals through the host's agents (agents_host_listing, then per_call_agent).
    return (
      this.stmt(
        `SELECT (SELECT count(*) FROM approvals WHERE host_id = ? AND status = 'pending' AND +expires_at > ?)
          + (SELECT count(*) FROM agents a JOIN per_call_approvals p ON p.agent_id = a.id
              WHERE a.host_id = ? AND p.status = 'pending' AND p.expires_at > ?) AS n`,
      ).get(hostId, now, hostId, now) as { n: number }
    ).n;
  }

  countPendingApprovals(now: number): number {
    // The approvals_status (status, created_at) index narrows this to the pending rows.
    return (
      this.stmt("SELECT count(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > ?").get(
        now,
      ) as { n: number }
    ).n;
  }

  activity(query: ActivityQuery): ActivityRecord[] {
    return this.built(ACTIVITY, activityQuery(query));
  }

  agentsOfUser(userId: string, page: { limit: number; offset: number }): AgentRecord[] {
    return this.many(
      AGENT,
      `SELECT * FROM agents WHERE user_id = @userId
        OR host_id IN (SELECT id FROM hosts WHERE user_id = @userId)
        ORDER BY created_at DESC, rowid DESC LIMIT @limit OFFSET @offset`,
      { userId, limit: page.limit, offset: page.offset },
    );
  }

  countAgentsOfUser(userId: string): number {
    return (
      this.stmt(
        `SELECT count(*) AS n FROM agents WHERE user_id = @userId
          OR host_id IN (SELECT id FROM hosts WHERE user_id = @userId)`,
      ).get({ userId }) as { n: number }
    ).n;
  }

  asyncJob(id: string): AsyncJobRecord | undefined {
    return this.one(ASYNC_JOB, 'SELECT * FROM async_jobs WHERE id = ?', id);
  }

  appendActivities(records: readonly ActivityRecord[]): void {
    if (records.length === 0) return;
    // Every execution ends up here, so one positional statement is bound per row rather than the
    // generic named-column insert (which rebuilds its SQL and parameter object each time).
    const insert = this.stmt(
      `INSERT INTO activity (at, type, agent_id, host_id, user_id, capability, outcome, detail, jti,
        latency_ms, upstream_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    // Activity is group-committed every few milliseconds under load; an fsync each time would
    // stall the (synchronous) event loop. In WAL mode a commit without fsync is already safe from
    // a process crash (SIGKILL): it is in the OS's page cache. It reaches the disk with the next
    // state change's commit (synchronous=FULL syncs the whole WAL) or checkpoint, so only an OS
    // crash or power loss can take the last few seconds of activity, never a grant or a status.
    // Prepared once: `db.pragma()` prepares its statement anew on every call, twice per batch.
    this.stmt('PRAGMA synchronous = NORMAL').run();
    const started = performance.now();
    try {
      this.appendInTransaction(insert, records);
    } finally {
      this.onWrite?.('activity', (performance.now() - started) / 1000);
      this.stmt('PRAGMA synchronous = FULL').run();
    }
  }

  private appendInTransaction(insert: Database.Statement, records: readonly ActivityRecord[]): void {
    this.db
      .transaction(() => {
        for (const r of records) {
          insert.run(
            r.at,
            r.type,
            r.agentId,
            r.hostId,
            r.userId,
            r.capability,
            r.outcome,
            r.detail === null ? null : JSON.stringify(r.detail),
            r.jti,
            r.latencyMs,
            r.upstreamStatus,
          );
        }
      })
      .immediate();
  }

  insertAsyncJob(job: AsyncJobRecord): void {
    this.stmt(
      `INSERT INTO async_jobs (id, agent_id, capability, upstream_url, status_capability, created_at,
        expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      job.id,
      job.agentId,
      job.capability,
      job.upstreamUrl,
      job.statusCapability,
      job.createdAt,
      job.expiresAt,
    );
  }

  forgetOlderAsyncJobs(agentId: string, keep: number): number {
    return this.stmt(
      `DELETE FROM async_jobs WHERE id IN (SELECT id FROM async_jobs WHERE agent_id = ?
        ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?)`,
    ).run(agentId, keep).changes;
  }

  deleteExpiredAsyncJobs(now: number, limit: number): number {
    // Oldest first along async_jobs_expiry, at most `limit`: a sweep never holds the event loop long.
    return this.stmt(
      `DELETE FROM async_jobs WHERE id IN
        (SELECT id FROM async_jobs WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`,
    ).run(now, limit).changes;
  }

  deleteActivityBefore(before: number, limit: number): number {
    // The inner SELECT walks the activity_at index from its oldest end: no scan of newer rows.
    return this.stmt(
      'DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE at < ? ORDER BY at LIMIT ?)',
    ).run(before, limit).changes;
  }

  deleteClosedApprovalsBefore(before: number, limit: number): number {
    // approvals_decided from its oldest end; a pending request's decided_at is NULL, never < before.
    return this.stmt(
      `DELETE FROM approvals WHERE id IN
        (SELECT id FROM approvals WHERE decided_at < ? ORDER BY decided_at LIMIT ?)`,
    ).run(before, limit).changes;
  }

  insertSession(session: SessionRecord): void {
    this.approvers.insertSession(session);
  }

  session(idHash: string): SessionRecord | undefined {
    return this.approvers.session(idHash);
  }

  deleteSession(idHash: string): void {
    this.approvers.deleteSession(idHash);
  }

  deleteExpiredSessions(now: number, limit: number): number {
    return this.approvers.deleteExpiredSessions(now, limit);
  }

  markOpened(approvalId: string, userId: string, at: number): void {
    this.stmt(
      'INSERT OR IGNORE INTO approval_openers (approval_id, user_id, opened_at) VALUES (?, ?, ?)',
    ).run(approvalId, userId, at);
  }

  inbox(query: InboxQuery): ApprovalRecord[] {
    // The user's own two sets, each from its index: CIBA requests by login_hint
    // (approvals_login_hint) and the device requests they opened (approval_openers' key). Both
    // are bounded by what one person was asked, so sorting them is cheap; walking every user's
    // pending approvals newest first, as a single OR would, grows with the deployment.
    const before = query.before ? 'AND (created_at, id) < (@beforeAt, @beforeId)' : '';
    return this.many(
      APPROVAL,
      `SELECT * FROM (
          SELECT * FROM approvals WHERE login_hint = @userId AND status = 'pending' AND method = 'ciba'
          UNION ALL
          SELECT a.* FROM approval_openers o JOIN approvals a ON a.id = o.approval_id
            WHERE o.user_id = @userId AND a.status = 'pending' AND a.method = 'device_authorization'
        )
        WHERE expires_at > @now ${before}
        ORDER BY created_at DESC, id DESC LIMIT @limit`,
      {
        userId: query.userId,
        now: query.now,
        ...(query.before ? { beforeAt: query.before.createdAt, beforeId: query.before.id } : {}),
        limit: query.limit,
      },
    );
  }

  passkey(id: string): PasskeyRecord | undefined {
    return this.approvers.passkey(id);
  }

  passkeys(userId: string): PasskeyRecord[] {
    return this.approvers.passkeys(userId);
  }

  hasEnrolmentCode(userId: string, codeHash: string, now: number): boolean {
    return this.approvers.hasEnrolmentCode(userId, codeHash, now);
  }

  recordPasskeyUse(id: string, counter: number, at: number): void {
    this.approvers.recordPasskeyUse(id, counter, at);
  }

  insertPerCall(record: PerCallRecord): void {
    this.perCallRows.insertPerCall(record);
  }

  perCall(id: string): PerCallRecord | undefined {
    return this.perCallRows.perCall(id);
  }

  perCallsAddressedTo(userId: string | null, now: number, limit: number): PerCallRecord[] {
    return this.perCallRows.perCallsAddressedTo(userId, now, limit);
  }

  perCalls(query: PerCallQuery): PerCallRecord[] {
    return this.perCallRows.perCalls(query);
  }

  updatePerCall(id: string, from: PerCallStatus, patch: Patch<PerCallRecord>): boolean {
    return this.perCallRows.updatePerCall(id, from, patch);
  }

  deletePerCall(id: string): void {
    this.perCallRows.deletePerCall(id);
  }

  countOpenPerCalls(agentId: string, now: number): number {
    return this.perCallRows.countOpenPerCalls(agentId, now);
  }

  pendingPerCallsOf(agentId: string, limit: number): PerCallRecord[] {
    return this.perCallRows.pendingPerCallsOf(agentId, limit);
  }

  overduePerCalls(now: number, limit: number): PerCallRecord[] {
    return this.perCallRows.overduePerCalls(now, limit);
  }

  abandonedPerCalls(claimedBefore: number, limit: number): PerCallRecord[] {
    return this.perCallRows.abandonedPerCalls(claimedBefore, limit);
  }

  deleteStalePerCalls(now: number, limit: number): number {
    return this.perCallRows.deleteStalePerCalls(now, limit);
  }

  /** IMMEDIATE: the write lock is taken up front, so a read-then-write cannot be invalidated midway. */
  begin(): void {
    this.beginStmt.run();
  }

  commit(): void {
    this.commitStmt.run();
  }

  /** Ends the open transaction; nothing to do when SQLite already rolled it back (some errors do). */
  rollback(): void {
    if (this.db.inTransaction) this.rollbackStmt.run();
  }

  touch(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants: ReadonlyMap<string, GrantUse> = new Map(),
  ): void {
    if (agents.size === 0 && hosts.size === 0 && grants.size === 0) return;
    const agent = this.stmt(
      'UPDATE agents SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?',
    );
    const host = this.stmt('UPDATE hosts SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?');
    const grant = this.stmt(
      'UPDATE grants SET uses = uses + ?, last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?',
    );
    this.db
      .transaction(() => {
        for (const [id, at] of agents) agent.run(at, id);
        for (const [id, at] of hosts) host.run(at, id);
        for (const [id, use] of grants) grant.run(use.uses, use.lastUsedAt ?? 0, id);
      })
      .immediate();
  }

  grantUses(agentId: string): Map<string, GrantUse> {
    const rows = this.stmt(
      'SELECT id, uses, last_used_at FROM grants WHERE agent_id = ? AND (uses > 0 OR last_used_at IS NOT NULL)',
    ).all(agentId) as { id: string; uses: number; last_used_at: number | null }[];
    return new Map(rows.map((r) => [r.id, { uses: r.uses, lastUsedAt: r.last_used_at }]));
  }

  deleteStalePending(before: number, limit: number, now: number): StalePendingSwept {
    return this.db
      .transaction(() => {
        // Never-activated agents only: one pending a reactivation approval was active before (§10.9);
        // and not while a retried or extended registration still waits for a person.
        // A range of agents_status_listing; each deletion cascades along indexed foreign keys.
        const agents = this.stmt(
          `DELETE FROM agents WHERE id IN (SELECT id FROM agents WHERE status = 'pending'
            AND created_at < ? AND activated_at IS NULL
            AND NOT EXISTS (SELECT 1 FROM approvals WHERE approvals.agent_id = agents.id
              AND approvals.status = 'pending' AND approvals.expires_at > ?)
            ORDER BY created_at LIMIT ?)`,
        ).run(before, now, limit).changes;
        // A pending host is deleted only once no agent refers to it any more.
        const hosts = this.stmt(
          `DELETE FROM hosts WHERE id IN (SELECT id FROM hosts WHERE status = 'pending' AND created_at < ?
            AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id) ORDER BY created_at LIMIT ?)`,
        ).run(before, limit).changes;
        // One whose agents were all denied is rejected, as a denial of its last agent does.
        const rejected = this.stmt(
          `UPDATE hosts SET status = 'rejected', updated_at = ? WHERE id IN (SELECT id FROM hosts
            WHERE status = 'pending' AND created_at < ?
          AND EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id)
          AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.host_id = hosts.id AND agents.status <> 'rejected')
            ORDER BY created_at LIMIT ?)`,
        ).run(now, before, limit).changes;
        return { agents, hosts, rejected };
      })
      .immediate();
  }

  insertOidcPending(pending: OidcPendingRecord, max: number, now: number): void {
    this.signIns.insertOidcPending(pending, max, now);
  }

  takeOidcPending(stateHash: string, browserHash: string, now: number): OidcPendingRecord | undefined {
    return this.signIns.takeOidcPending(stateHash, browserHash, now);
  }

  issueChallenge(challenge: ChallengeRecord, limits: ChallengeLimits, now: number): boolean {
    return this.signIns.issueChallenge(challenge, limits, now);
  }

  takeChallenge(challengeHash: string, now: number): ChallengeRecord | undefined {
    return this.signIns.takeChallenge(challengeHash, now);
  }

  useTotpStep(userId: string, step: number, keepUntil: number): boolean {
    return this.signIns.useTotpStep(userId, step, keepUntil);
  }

  deleteExpiredSignInState(now: number, limit: number): number {
    return this.signIns.deleteExpiredSignInState(now, limit);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  private createWriter(): SyncStoreWriter {
    const insert = <T>(table: string, columns: Columns<T>, record: T): void => {
      const p = params(columns, record);
      const names = Object.keys(p).filter((c) => !(table === 'activity' && c === 'id'));
      this.stmt(insertSql(table, names)).run(Object.fromEntries(names.map((n) => [n, p[n]])));
    };
    const update = <T>(table: string, columns: Columns<T>, id: string, patch: Patch<T>): void => {
      const set = setClause(table, columns, patch);
      if (set === undefined) return;
      this.stmt(`UPDATE ${table} SET ${set.sql} WHERE id = @id`).run({ ...set.values, id });
    };
    const reader = this as SyncStore;
    return {
      host: (id) => reader.host(id),
      hostByThumbprint: (t) => reader.hostByThumbprint(t),
      hostByJwksUrl: (u) => reader.hostByJwksUrl(u),
      hosts: (f) => reader.hosts(f),
      retiredHostKey: (t) => reader.retiredHostKey(t),
      appliedPolicyGrants: () => reader.appliedPolicyGrants(),
      agent: (id) => reader.agent(id),
      agentByKey: (h, k) => reader.agentByKey(h, k),
      agents: (f) => reader.agents(f),
      grants: (a) => reader.grants(a),
      grantsOffVersion: (c, v) => reader.grantsOffVersion(c, v),
      grantedCapabilities: (names) => reader.grantedCapabilities(names),
      approval: (id) => reader.approval(id),
      approvalByUserCode: (c) => reader.approvalByUserCode(c),
      approvals: (f) => reader.approvals(f),
      overdueApprovals: (now, limit) => reader.overdueApprovals(now, limit),
      countHosts: (status) => reader.countHosts(status),
      countPolicyAdmittedHosts: () => reader.countPolicyAdmittedHosts(),
      countOpenApprovals: (h, now) => reader.countOpenApprovals(h, now),
      countPendingApprovals: (now) => reader.countPendingApprovals(now),
      activity: (q) => reader.activity(q),
      asyncJob: (id) => reader.asyncJob(id),
      agentsOfUser: (u, page) => reader.agentsOfUser(u, page),
      countAgentsOfUser: (u) => reader.countAgentsOfUser(u),
      perCall: (id) => reader.perCall(id),
      perCallsAddressedTo: (u, now, limit) => reader.perCallsAddressedTo(u, now, limit),
      perCalls: (q) => reader.perCalls(q),
      overduePerCalls: (now, limit) => reader.overduePerCalls(now, limit),
      abandonedPerCalls: (before, limit) => reader.abandonedPerCalls(before, limit),
      passkey: (id) => reader.passkey(id),
      passkeys: (u) => reader.passkeys(u),
      hasEnrolmentCode: (u, hash, now) => reader.hasEnrolmentCode(u, hash, now),
      insertPasskey: (k) => this.approvers.insertPasskey(k),
      deletePasskey: (id, u) => this.approvers.deletePasskey(id, u),
      deleteSessionsOf: (u) => this.approvers.deleteSessionsOf(u),
      putEnrolmentCode: (u, hash, expiresAt) => this.approvers.putEnrolmentCode(u, hash, expiresAt),
      takeEnrolmentCode: (u, hash, now) => this.approvers.takeEnrolmentCode(u, hash, now),
      countOpenPerCalls: (a, now) => reader.countOpenPerCalls(a, now),
      pendingPerCallsOf: (a, limit) => reader.pendingPerCallsOf(a, limit),
      insertPerCall: (r) => this.insertPerCall(r),
      updatePerCall: (id, from, patch) => this.updatePerCall(id, from, patch),
      deletePerCall: (id) => this.deletePerCall(id),
      insertHost: (h) => insert('hosts', HOST, h),
      updateHost: (id, p) => update('hosts', HOST, id, p),
      deleteHost: (id) => {
        this.stmt('DELETE FROM hosts WHERE id = ?').run(id);
      },
      putAppliedPolicyGrants: (json) => {
        this.stmt(
          'INSERT INTO applied_policy_grants (id, grants) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET grants = excluded.grants',
        ).run(json);
      },
      retireHostKey: (k) => {
        this.stmt(
          `INSERT INTO retired_host_keys (thumbprint, host_id, retired_at) VALUES (?, ?, ?)
            ON CONFLICT (thumbprint) DO UPDATE SET host_id = excluded.host_id, retired_at = excluded.retired_at`,
        ).run(k.thumbprint, k.hostId, k.retiredAt);
      },
      insertAgent: (a) => insert('agents', AGENT, a),
      updateAgent: (id, p) => update('agents', AGENT, id, p),
      deleteAgent: (id) => {
        this.stmt('DELETE FROM agents WHERE id = ?').run(id);
      },
      putGrant: (g) => {
        // One current grant per (agent, capability): a new request replaces a denied/revoked row.
        this.stmt('DELETE FROM grants WHERE agent_id = ? AND capability = ?').run(g.agentId, g.capability);
        insert('grants', GRANT, g);
      },
      insertGrant: (g) => insert('grants', GRANT, g),
      updateGrant: (id, p) => update('grants', GRANT, id, p),
      insertApproval: (a) => insert('approvals', APPROVAL, a),
      updateApproval: (id, p) => update('approvals', APPROVAL, id, p),
      deleteApproval: (id) => {
        this.stmt('DELETE FROM approvals WHERE id = ?').run(id);
      },
      appendActivity: (r) => {
        insert('activity', ACTIVITY, { ...r, id: 0 });
      },
      deleteAgentActivity: (agentId, limit) =>
        this.stmt(
          `DELETE FROM activity WHERE id IN
            (SELECT id FROM activity WHERE agent_id = ? ORDER BY id LIMIT ?)`,
        ).run(agentId, limit).changes,
    };
  }
}
