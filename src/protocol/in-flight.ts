/**
 * Fair share of the upstream (§8.13 rate limiting, issue 10 class 7): caps on upstream calls
 * running at once, per agent, per host and in total (policy `rate_limits.in_flight_*`). A token
 * bucket limits how often an agent may call; it does not stop one agent from holding every
 * connection with a few slow calls (or open SSE streams). These counters do: a call takes a slot
 * before it goes upstream and gives it back when it is over, however it ends.
 *
 * A slot is released exactly once: `release()` is idempotent, so a caller may release from a
 * `finally` and from an end-of-stream callback without counting twice. Counters exist only for
 * owners with calls in flight, so memory is bounded by the number of calls running.
 */
import type { InFlightLimits } from './resolved-policy.js';

export interface SlotOwner {
  readonly agentId: string;
  readonly hostId: string;
}

/** Held while an upstream call runs; `release()` may be called any number of times. */
export interface Slot {
  release(): void;
}

/** Which cap was full: the agent's own, its host's, or the proxy's. */
export interface SlotRefusal {
  readonly scope: 'agent' | 'host' | 'total';
  readonly limit: number;
}

export type SlotResult = { readonly ok: true; readonly slot: Slot } | ({ readonly ok: false } & SlotRefusal);

export class InFlightSlots {
  readonly #limits: () => InFlightLimits;
  readonly #perAgent = new Map<string, number>();
  readonly #perHost = new Map<string, number>();
  #total = 0;
  /** Resolved when the last call in flight ends (whenIdle). */
  #idle: (() => void)[] = [];

  /**
   * `limits`, or where to read them on each acquire (the policy in force, which a reload may
   * change: the policy's schema has checked those). Slots held past a lowered cap stay held.
   */
  constructor(limits: InFlightLimits | (() => InFlightLimits)) {
    if (typeof limits === 'function') {
      this.#limits = limits;
      return;
    }
    for (const [key, value] of Object.entries(limits) as [string, number | null][]) {
      if (value !== null && (!Number.isSafeInteger(value) || value < 1)) {
        throw new RangeError(`Invalid in-flight cap ${key}: ${String(value)}`);
      }
    }
    this.#limits = () => limits;
  }

  /** Takes a slot for `owner`, or says which cap is full; a refusal changes no counter. */
  acquire(owner: SlotOwner): SlotResult {
    const { perAgent, perHost, total } = this.#limits();
    if (perAgent !== null && (this.#perAgent.get(owner.agentId) ?? 0) >= perAgent) {
      return { ok: false, scope: 'agent', limit: perAgent };
    }
    if (perHost !== null && (this.#perHost.get(owner.hostId) ?? 0) >= perHost) {
      return { ok: false, scope: 'host', limit: perHost };
    }
    if (total !== null && this.#total >= total) return { ok: false, scope: 'total', limit: total };
    increment(this.#perAgent, owner.agentId);
    increment(this.#perHost, owner.hostId);
    this.#total++;
    let held = true;
    return {
      ok: true,
      slot: {
        release: () => {
          if (!held) return;
          held = false;
          decrement(this.#perAgent, owner.agentId);
          decrement(this.#perHost, owner.hostId);
          this.#total--;
          if (this.#total === 0) for (const resolve of this.#idle.splice(0)) resolve();
        },
      },
    };
  }

  /**
   * Settles once no call is in flight: at shutdown, calls cut off by the grace period still end
   * (and leave their activity record) before the log is closed. Its callers bound the wait.
   */
  whenIdle(): Promise<void> {
    if (this.#total === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Calls in flight: in total, or of one agent or host (for tests and metrics). */
  count(of: { agentId?: string; hostId?: string } = {}): number {
    if (of.agentId !== undefined) return this.#perAgent.get(of.agentId) ?? 0;
    if (of.hostId !== undefined) return this.#perHost.get(of.hostId) ?? 0;
    return this.#total;
  }

  /** Owners with calls in flight (agents + hosts): what the counters cost in memory. */
  get tracked(): number {
    return this.#perAgent.size + this.#perHost.size;
  }
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 0) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
