/**
 * The short-TTL cache of §10.2 (agent and host records, grants, keys), bounded by LRU eviction.
 * An entry lives `ttlMs` from when it was set; reading it does not extend that, because the TTL is
 * the bound on how long a revocation can go unnoticed (§10.2).
 */
import type { Clock } from '../clock.js';

interface Entry<V> {
  readonly value: V;
  readonly expiresAt: number;
}

export class TtlCache<V> {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  // Map order is recency order: get and set move a key to the end, so the first is least recent.
  readonly #entries = new Map<string, Entry<V>>();

  constructor(clock: Clock, ttlMs: number, maxEntries = 10_000) {
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`Invalid ttlMs: ${ttlMs}`);
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`Invalid maxEntries: ${maxEntries}`);
    }
    this.#clock = clock;
    this.#ttlMs = ttlMs;
    this.#maxEntries = maxEntries;
  }

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (entry.expiresAt <= this.#clock.now()) return undefined;
    this.#entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: V): void {
    const now = this.#clock.now();
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: now + this.#ttlMs });
    this.#dropOldest(now);
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }

  /** Evicts past the bound, and drops an expired least-recent entry so idle memory drains. */
  #dropOldest(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && entry.expiresAt > now) return;
      this.#entries.delete(key);
    }
  }
}
