/**
 * `last_used_at` without a database write per request: authenticated requests record the time
 * here, and a timer flushes the latest value per agent and host in one transaction. Session TTL
 * checks read the in-memory value, so the sliding window is exact in this process; a crash loses
 * at most one flush interval of "last used" times, never a grant or a status.
 *
 * Grants' use counters (the account page's "uses" and "last used", issue 16 §5) ride the same
 * flush: an execution adds one in memory; the flush adds the sums to the rows in one batch.
 *
 * A database outage (issue 13): a refused flush is kept as it is, with its id, and retried by the
 * next flush before what was recorded since. It needs no other bound: the maps hold one entry per
 * agent, host and grant used (latest time, summed count), however many requests there were.
 * Dropping it instead would lose counts the account page shows; a crash during the outage loses
 * them anyway, as it loses one interval's worth at any time. The first failure and the recovery
 * are logged.
 *
 * Whether a flush whose answer was lost committed is unknown (PostgreSQL: the connection broke
 * after COMMIT was sent). Its retry carries the same id, which the store applies at most once
 * (Store.touch): retried under a new one, or merged into the next batch, its counts would be
 * added twice.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import type { GrantUse, Store } from '../storage/types.js';

/** How often recorded uses are written; another replica hears of a use this much later at most. */
export const USAGE_FLUSH_MS = 5_000;

/** One flush's times and counts, under the id its retries keep. */
interface UsageBatch {
  readonly id: string;
  readonly agents: Map<string, number>;
  readonly hosts: Map<string, number>;
  readonly grants: Map<string, GrantUse>;
}

export class UsageTracker {
  private agents = new Map<string, number>();
  private hosts = new Map<string, number>();
  /** Uses since the last flush, per grant id: bounded by the grants used in one interval. */
  private grants = new Map<string, GrantUse>();
  /** Latest known use per agent, kept after flushing so reads need no database round-trip. */
  private readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  /** Flushes refused in a row (0: the last one was written). */
  private failures = 0;
  /** A flush that failed, to be retried as it is (same id) before anything newer. */
  private unsettled: UsageBatch | undefined;
  /** The flush under way, and the one called meanwhile (see flush). */
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly logger?: Logger,
  ) {}

  start(intervalMs = USAGE_FLUSH_MS): void {
    this.timer ??= setInterval(() => void this.flush(), intervalMs).unref();
  }

  recordAgent(agentId: string, hostId: string, at: number): void {
    this.agents.set(agentId, at);
    this.hosts.set(hostId, at);
    this.seen.set(agentId, at);
    if (this.seen.size > 100_000) this.seen.clear();
  }

  /**
   * Records a use and writes it at once, not at the next flush: for a use near the end of the
   * agent's session TTL, which another replica must hear of before it could find the session over
   * (lifecycle.ts nearSessionEnd). A refused write is kept for the flush, like every other use.
   */
  async recordAgentNow(agentId: string, hostId: string, at: number): Promise<void> {
    this.recordAgent(agentId, hostId, at);
    try {
      await this.store.touch(new Map([[agentId, at]]), new Map([[hostId, at]]), new Map());
    } catch {
      // Still in this.agents: the next flush writes it.
    }
  }

  /** One call made with grant `grantId` (counted when it goes upstream, not when refused). */
  recordGrant(grantId: string, at: number): void {
    const before = this.grants.get(grantId);
    this.grants.set(grantId, {
      uses: (before?.uses ?? 0) + 1,
      lastUsedAt: Math.max(before?.lastUsedAt ?? 0, at),
    });
  }

  /** A grant's uses: the stored counters plus those not flushed yet, so a page is never behind. */
  grantUse(grantId: string, stored: GrantUse | undefined): GrantUse {
    const mem = this.grants.get(grantId);
    const failed = this.unsettled?.grants.get(grantId);
    const memAt = Math.max(mem?.lastUsedAt ?? 0, failed?.lastUsedAt ?? 0);
    const storedAt = stored?.lastUsedAt ?? null;
    return {
      uses: (stored?.uses ?? 0) + (mem?.uses ?? 0) + (failed?.uses ?? 0),
      lastUsedAt: memAt === 0 ? storedAt : Math.max(memAt, storedAt ?? 0),
    };
  }

  recordHost(hostId: string, at: number): void {
    this.hosts.set(hostId, at);
  }

  /** The latest use of an agent known to this process (may be newer than the stored one). */
  lastUsed(agentId: string, stored: number | null): number | null {
    const mem = this.seen.get(agentId);
    if (mem === undefined) return stored;
    return stored === null ? mem : Math.max(mem, stored);
  }

  /** Forget in-memory use, e.g. after reactivation resets the clocks. */
  reset(agentId: string): void {
    this.seen.delete(agentId);
    this.agents.delete(agentId);
    this.unsettled?.agents.delete(agentId);
  }

  /**
   * Writes what was recorded since the last flush, in one batch, after a batch that failed before
   * (as it was). Never rejects: when the store refuses a batch (a busy or unreachable database),
   * it waits for the next flush, and what is recorded meanwhile stays in the maps.
   *
   * One flush at a time: a flush called while one runs (the timer's, slow in an outage, and
   * stop's) runs once it ends, shared by every caller meanwhile. Two at once could both send the
   * failed batch (SQLite would add it twice) or both fail and keep only one of their batches.
   */
  flush(): Promise<void> {
    if (this.running === undefined) return this.runFlush();
    this.queued ??= this.running.then(() => {
      this.queued = undefined;
      return this.flush();
    });
    return this.queued;
  }

  private runFlush(): Promise<void> {
    const running = this.flushOnce().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async flushOnce(): Promise<void> {
    if (this.unsettled !== undefined) {
      if (!(await this.write(this.unsettled))) return;
      this.unsettled = undefined;
    }
    if (this.agents.size === 0 && this.hosts.size === 0 && this.grants.size === 0) return;
    const batch: UsageBatch = {
      id: randomUUID(),
      agents: this.agents,
      hosts: this.hosts,
      grants: this.grants,
    };
    this.agents = new Map();
    this.hosts = new Map();
    this.grants = new Map();
    if (!(await this.write(batch))) this.unsettled = batch;
  }

  /** Hands `batch` to the store; false (logged the first time in a row) when it was refused. */
  private async write(batch: UsageBatch): Promise<boolean> {
    try {
      await this.store.touch(batch.agents, batch.hosts, batch.grants, batch.id);
    } catch (err) {
      if (this.failures++ === 0) {
        this.logger?.warn('usage flush failed; kept for the next flush', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
      return false;
    }
    if (this.failures > 0) this.logger?.info('usage flushed again', { failed_flushes: this.failures });
    this.failures = 0;
    return true;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
