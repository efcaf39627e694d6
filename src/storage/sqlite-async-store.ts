/**
 * The asynchronous Store over the synchronous SQLite engine (sqlite-store.ts). SQLite has one
 * connection and one writer, and a `write`'s `fn` awaits between its statements, so:
 *
 * - one write transaction at a time: BEGIN IMMEDIATE, `fn`, COMMIT (ROLLBACK when it throws); a
 *   `write` that arrives while one is open waits its turn;
 * - while a transaction is open, every other store-level call (reads, `touch`, the activity
 *   batches, sweeps …) waits until it ends: on the one connection it would otherwise see the
 *   uncommitted rows, or become part of the transaction. With none open (the usual case) a call
 *   runs at once and returns a settled promise;
 * - waiting calls are served in the order they were made, so a call made after a `write` sees
 *   that write's outcome (reload relies on it: drift's write, then every request's read);
 * - calls through `tx` run directly, inside the transaction;
 * - an engine error rejects the promise; nothing throws synchronously.
 *
 * `fn` must not call the store itself (only `tx`): such a call would wait for `fn` to end.
 *
 * The queue is hand-written (a flag and an array): a general mutex would put a promise hop in
 * front of every read, and this one costs nothing when no transaction is open.
 */
import { sqliteStoreError } from './errors.js';
import type { SqliteEngine, SyncStoreWriter, WriteKind } from './sqlite-store.js';
import type {
  ActivityQuery,
  ActivityRecord,
  AgentRecord,
  AgentStatus,
  ApprovalRecord,
  ApprovalStatus,
  AsyncJobRecord,
  ChallengeLimits,
  ChallengeRecord,
  GrantRecord,
  GrantUse,
  HostRecord,
  HostStatus,
  InboxQuery,
  ListingPage,
  OidcPendingRecord,
  PasskeyRecord,
  PerCallQuery,
  PerCallRecord,
  RetiredHostKey,
  SessionRecord,
  Store,
  StoreWriter,
  StalePendingSwept,
} from './types.js';

/**
 * The value of `op()` as a settled promise: fulfilled, or rejected with what it threw (a database
 * that cannot write now as StoreUnavailableError, errors.ts: 503, not 500).
 */
function settle<T>(op: () => T): Promise<T> {
  try {
    return Promise.resolve(op());
  } catch (err) {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what better-sqlite3 threw, as is
    return Promise.reject(sqliteStoreError(err));
  }
}

export class SqliteAsyncStore implements Store {
  /**
   * A write transaction is open (between BEGIN and its COMMIT or ROLLBACK). Whenever it is not,
   * `waiting` is empty: `next` runs waiting calls until one opens a transaction or none is left.
   */
  private open = false;
  /** Calls made while a transaction was open, in order; each runs once those before it did. */
  private readonly waiting: (() => void)[] = [];
  private readonly tx: StoreWriter;

  constructor(
    private readonly engine: SqliteEngine,
    private readonly onWrite?: (kind: WriteKind, seconds: number) => void,
  ) {
    this.tx = this.transactionView(engine.writer);
  }

  /** Runs `op` now when no transaction is open, else once it ends. */
  private run<T>(op: () => T): Promise<T> {
    if (!this.open) return settle(op);
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => {
        settle(op).then(resolve, reject);
      });
    });
  }

  write<T>(fn: (tx: StoreWriter) => Promise<T>): Promise<T> {
    if (!this.open) return this.transact(fn);
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => {
        this.transact(fn).then(resolve, reject);
      });
    });
  }

  private async transact<T>(fn: (tx: StoreWriter) => Promise<T>): Promise<T> {
    // Up to the first await this runs synchronously, so `open` is set before anyone else runs.
    try {
      this.engine.begin();
    } catch (err) {
      throw sqliteStoreError(err);
    }
    this.open = true;
    const started = performance.now();
    try {
      const result = await fn(this.tx);
      this.engine.commit();
      return result;
    } catch (err) {
      this.engine.rollback();
      throw sqliteStoreError(err);
    } finally {
      this.open = false;
      this.onWrite?.('state', (performance.now() - started) / 1000);
      this.next();
    }
  }

  /**
   * After a transaction: the calls that waited, in order, up to the next `write`, which opens its
   * transaction (the rest wait for that one). A BEGIN that fails rejects and leaves `open` unset.
   */
  private next(): void {
    while (!this.open && this.waiting.length > 0) (this.waiting.shift() as () => void)();
  }

  /** `tx`: the engine's writer, each call settled as a promise; only valid inside its `write`. */
  private transactionView(writer: SyncStoreWriter): StoreWriter {
    const view: Record<string, unknown> = {};
    for (const [name, method] of Object.entries(writer) as [string, (...args: unknown[]) => unknown][]) {
      view[name] = (...args: unknown[]) =>
        this.open
          ? settle(() => method(...args))
          : Promise.reject(new Error(`tx.${name}: called outside its transaction`));
    }
    return view as unknown as StoreWriter;
  }

  host(id: string): Promise<HostRecord | undefined> {
    return this.run(() => this.engine.host(id));
  }

  hostByThumbprint(thumbprint: string): Promise<HostRecord | undefined> {
    return this.run(() => this.engine.hostByThumbprint(thumbprint));
  }

  hostByJwksUrl(url: string): Promise<HostRecord | undefined> {
    return this.run(() => this.engine.hostByJwksUrl(url));
  }

  hosts(filter?: { status?: HostStatus; userId?: string } & ListingPage): Promise<HostRecord[]> {
    return this.run(() => this.engine.hosts(filter));
  }

  appliedPolicyGrants(): Promise<string | undefined> {
    return this.run(() => this.engine.appliedPolicyGrants());
  }

  retiredHostKey(thumbprint: string): Promise<RetiredHostKey | undefined> {
    return this.run(() => this.engine.retiredHostKey(thumbprint));
  }

  agent(id: string): Promise<AgentRecord | undefined> {
    return this.run(() => this.engine.agent(id));
  }

  agentByKey(hostId: string, keyThumbprint: string): Promise<AgentRecord | undefined> {
    return this.run(() => this.engine.agentByKey(hostId, keyThumbprint));
  }

  agents(
    filter?: { hostId?: string; status?: AgentStatus; userId?: string } & ListingPage,
  ): Promise<AgentRecord[]> {
    return this.run(() => this.engine.agents(filter));
  }

  grants(agentId: string): Promise<GrantRecord[]> {
    return this.run(() => this.engine.grants(agentId));
  }

  grantsOffVersion(capability: string, version: string): Promise<GrantRecord[]> {
    return this.run(() => this.engine.grantsOffVersion(capability, version));
  }

  grantedCapabilities(capabilities: readonly string[]): Promise<Set<string>> {
    return this.run(() => this.engine.grantedCapabilities(capabilities));
  }

  approval(id: string): Promise<ApprovalRecord | undefined> {
    return this.run(() => this.engine.approval(id));
  }

  approvalByUserCode(userCode: string): Promise<ApprovalRecord | undefined> {
    return this.run(() => this.engine.approvalByUserCode(userCode));
  }

  approvals(filter?: { status?: ApprovalStatus; agentId?: string } & ListingPage): Promise<ApprovalRecord[]> {
    return this.run(() => this.engine.approvals(filter));
  }

  overdueApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    return this.run(() => this.engine.overdueApprovals(now, limit));
  }

  countHosts(status: HostStatus): Promise<number> {
    return this.run(() => this.engine.countHosts(status));
  }

  countPolicyAdmittedHosts(): Promise<number> {
    return this.run(() => this.engine.countPolicyAdmittedHosts());
  }

  countOpenApprovals(hostId: string, now: number): Promise<number> {
    return this.run(() => this.engine.countOpenApprovals(hostId, now));
  }

  countPendingApprovals(now: number): Promise<number> {
    return this.run(() => this.engine.countPendingApprovals(now));
  }

  activity(query: ActivityQuery): Promise<ActivityRecord[]> {
    return this.run(() => this.engine.activity(query));
  }

  asyncJob(id: string): Promise<AsyncJobRecord | undefined> {
    return this.run(() => this.engine.asyncJob(id));
  }

  agentsOfUser(
    userId: string,
    page: { readonly limit: number; readonly offset: number },
  ): Promise<AgentRecord[]> {
    return this.run(() => this.engine.agentsOfUser(userId, page));
  }

  countAgentsOfUser(userId: string): Promise<number> {
    return this.run(() => this.engine.countAgentsOfUser(userId));
  }

  perCall(id: string): Promise<PerCallRecord | undefined> {
    return this.run(() => this.engine.perCall(id));
  }

  perCallsAddressedTo(userId: string | null, now: number, limit: number): Promise<PerCallRecord[]> {
    return this.run(() => this.engine.perCallsAddressedTo(userId, now, limit));
  }

  perCalls(query: PerCallQuery): Promise<PerCallRecord[]> {
    return this.run(() => this.engine.perCalls(query));
  }

  countOpenPerCalls(agentId: string, now: number): Promise<number> {
    return this.run(() => this.engine.countOpenPerCalls(agentId, now));
  }

  pendingPerCallsOf(agentId: string, limit: number): Promise<PerCallRecord[]> {
    return this.run(() => this.engine.pendingPerCallsOf(agentId, limit));
  }

  overduePerCalls(now: number, limit: number): Promise<PerCallRecord[]> {
    return this.run(() => this.engine.overduePerCalls(now, limit));
  }

  abandonedPerCalls(claimedBefore: number, limit: number): Promise<PerCallRecord[]> {
    return this.run(() => this.engine.abandonedPerCalls(claimedBefore, limit));
  }

  touch(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants?: ReadonlyMap<string, GrantUse>,
  ): Promise<void> {
    return this.run(() => this.engine.touch(agents, hosts, grants));
  }

  grantUses(agentId: string): Promise<Map<string, GrantUse>> {
    return this.run(() => this.engine.grantUses(agentId));
  }

  appendActivities(records: readonly ActivityRecord[]): Promise<void> {
    return this.run(() => this.engine.appendActivities(records));
  }

  insertAsyncJob(job: AsyncJobRecord): Promise<void> {
    return this.run(() => this.engine.insertAsyncJob(job));
  }

  forgetOlderAsyncJobs(agentId: string, keep: number): Promise<number> {
    return this.run(() => this.engine.forgetOlderAsyncJobs(agentId, keep));
  }

  deleteExpiredAsyncJobs(now: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteExpiredAsyncJobs(now, limit));
  }

  deleteActivityBefore(before: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteActivityBefore(before, limit));
  }

  deleteClosedApprovalsBefore(before: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteClosedApprovalsBefore(before, limit));
  }

  insertSession(session: SessionRecord): Promise<void> {
    return this.run(() => this.engine.insertSession(session));
  }

  session(idHash: string): Promise<SessionRecord | undefined> {
    return this.run(() => this.engine.session(idHash));
  }

  deleteSession(idHash: string): Promise<void> {
    return this.run(() => this.engine.deleteSession(idHash));
  }

  deleteExpiredSessions(now: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteExpiredSessions(now, limit));
  }

  insertOidcPending(pending: OidcPendingRecord, max: number, now: number): Promise<void> {
    return this.run(() => this.engine.insertOidcPending(pending, max, now));
  }

  takeOidcPending(
    stateHash: string,
    browserHash: string,
    now: number,
  ): Promise<OidcPendingRecord | undefined> {
    return this.run(() => this.engine.takeOidcPending(stateHash, browserHash, now));
  }

  issueChallenge(challenge: ChallengeRecord, limits: ChallengeLimits, now: number): Promise<boolean> {
    return this.run(() => this.engine.issueChallenge(challenge, limits, now));
  }

  takeChallenge(challengeHash: string, now: number): Promise<ChallengeRecord | undefined> {
    return this.run(() => this.engine.takeChallenge(challengeHash, now));
  }

  useTotpStep(userId: string, step: number, keepUntil: number): Promise<boolean> {
    return this.run(() => this.engine.useTotpStep(userId, step, keepUntil));
  }

  deleteExpiredSignInState(now: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteExpiredSignInState(now, limit));
  }

  markOpened(approvalId: string, userId: string, at: number): Promise<void> {
    return this.run(() => this.engine.markOpened(approvalId, userId, at));
  }

  inbox(query: InboxQuery): Promise<ApprovalRecord[]> {
    return this.run(() => this.engine.inbox(query));
  }

  passkey(id: string): Promise<PasskeyRecord | undefined> {
    return this.run(() => this.engine.passkey(id));
  }

  passkeys(userId: string): Promise<PasskeyRecord[]> {
    return this.run(() => this.engine.passkeys(userId));
  }

  hasEnrolmentCode(userId: string, codeHash: string, now: number): Promise<boolean> {
    return this.run(() => this.engine.hasEnrolmentCode(userId, codeHash, now));
  }

  recordPasskeyUse(id: string, counter: number, at: number): Promise<void> {
    return this.run(() => this.engine.recordPasskeyUse(id, counter, at));
  }

  deleteStalePerCalls(now: number, limit: number): Promise<number> {
    return this.run(() => this.engine.deleteStalePerCalls(now, limit));
  }

  deleteStalePending(before: number, limit: number, now: number): Promise<StalePendingSwept> {
    return this.run(() => this.engine.deleteStalePending(before, limit, now));
  }

  /**
   * The database is a file in this process: there is nothing to reach, so it always answers (and
   * at once, without waiting behind an open transaction).
   */
  ping(): Promise<void> {
    return Promise.resolve();
  }

  /** Closes once the open transaction (and whatever waits for it) is done. */
  close(): Promise<void> {
    if (!this.open) return settle(() => this.engine.close());
    return new Promise<void>((resolve, reject) => {
      // Behind every waiting call, so none of them finds the database closed.
      this.waiting.push(() => {
        settle(() => this.engine.close()).then(resolve, reject);
      });
    });
  }
}
