/**
 * `last_used_at` without a database write per request: authenticated requests record the time
 * here, and a timer flushes the latest value per agent and host in one transaction. Session TTL
 * checks read the in-memory value, so the sliding window is exact in this process; a crash loses
 * at most one flush interval of "last used" times, never a grant or a status.
 *
 * Grants' use counters (the account page's "uses" and "last used", issue 16 §5) ride the same
 * flush: an execution adds one in memory; the flush adds the sums to the rows in one batch.
 *
 * A database outage (issue 13): a refused flush is kept, merged under what is recorded since, and
 * retried by the next flush. It needs no other bound: the maps hold one entry per agent, host and
 * grant used (latest time, summed count), however many requests there were. Dropping it instead
 * would lose counts the account page shows; a crash during the outage loses them anyway, as it
 * loses one interval's worth at any time. The first failure and the recovery are logged.
 */
import type { Logger } from '../log.js';
import type { GrantUse, Store } from '../storage/types.js';

/** How often recorded uses are written; another replica hears of a use this much later at most. */
export const USAGE_FLUSH_MS = 5_000;

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
    const storedAt = stored?.lastUsedAt ?? null;
    return {
      uses: (stored?.uses ?? 0) + (mem?.uses ?? 0),
      lastUsedAt:
        mem?.lastUsedAt === undefined || mem.lastUsedAt === null
          ? storedAt
          : Math.max(mem.lastUsedAt, storedAt ?? 0),
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
  }

  /**
   * Writes what was recorded since the last flush, in one batch. Never rejects: when the store
   * refuses the batch (a busy database), its times and counts wait for the next flush.
   */
  async flush(): Promise<void> {
    if (this.agents.size === 0 && this.hosts.size === 0 && this.grants.size === 0) return;
    const agents = this.agents;
    const hosts = this.hosts;
    const grants = this.grants;
    this.agents = new Map();
    this.hosts = new Map();
    this.grants = new Map();
    try {
      await this.store.touch(agents, hosts, grants);
    } catch (err) {
      this.restore(agents, hosts, grants);
      if (this.failures++ === 0) {
        this.logger?.warn('usage flush failed; kept for the next flush', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
      return;
    }
    if (this.failures > 0) this.logger?.info('usage flushed again', { failed_flushes: this.failures });
    this.failures = 0;
  }

  /** Puts a failed batch back under what was recorded since (newer times, summed counts). */
  private restore(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants: ReadonlyMap<string, GrantUse>,
  ): void {
    for (const [id, at] of agents) this.agents.set(id, Math.max(at, this.agents.get(id) ?? 0));
    for (const [id, at] of hosts) this.hosts.set(id, Math.max(at, this.hosts.get(id) ?? 0));
    for (const [id, use] of grants) {
      const since = this.grants.get(id);
      this.grants.set(id, {
        uses: use.uses + (since?.uses ?? 0),
        lastUsedAt: Math.max(use.lastUsedAt ?? 0, since?.lastUsedAt ?? 0),
      });
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
