/**
 * `last_used_at` without a database write per request: authenticated requests record the time
 * here, and a timer flushes the latest value per agent and host in one transaction. Session TTL
 * checks read the in-memory value, so the sliding window is exact in this process; a crash loses
 * at most one flush interval of "last used" times, never a grant or a status.
 */
import type { Store } from '../storage/types.js';

export class UsageTracker {
  private agents = new Map<string, number>();
  private hosts = new Map<string, number>();
  /** Latest known use per agent, kept after flushing so reads need no database round-trip. */
  private readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly store: Store) {}

  start(intervalMs = 5_000): void {
    this.timer ??= setInterval(() => this.flush(), intervalMs).unref();
  }

  recordAgent(agentId: string, hostId: string, at: number): void {
    this.agents.set(agentId, at);
    this.hosts.set(hostId, at);
    this.seen.set(agentId, at);
    if (this.seen.size > 100_000) this.seen.clear();
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

  flush(): void {
    if (this.agents.size === 0 && this.hosts.size === 0) return;
    const agents = this.agents;
    const hosts = this.hosts;
    this.agents = new Map();
    this.hosts = new Map();
    this.store.touch(agents, hosts);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.flush();
  }
}
