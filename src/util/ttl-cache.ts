/**
 * The short-TTL cache of §10.2 (agent and host records, grants, keys), bounded by second-chance
 * eviction (CLOCK, an approximation of least-recently-used). An entry lives `ttlMs` from when it
 * was set; reading it does not extend that, because the TTL is the bound on how long a revocation
 * can go unnoticed (§10.2).
 *
 * Why not exact LRU: moving a key to the end on every hit (delete, then set) made V8 rehash the
 * Map again and again, and every execute reads this cache several times; a hit now only marks its
 * entry. Map order is the order keys were set in, which is also the order they expire in.
 */
import type { Clock } from '../clock.js';

interface Entry<V> {
  readonly value: V;
  readonly expiresAt: number;
  /** Read since it was set or last passed over by eviction: spared once. */
  used: boolean;
}

export class TtlCache<V> {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  // Map order is the order of setting (and of expiry): set moves a key to the end.
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
    if (entry.expiresAt <= this.#clock.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    entry.used = true;
    return entry.value;
  }

  set(key: string, value: V): void {
    const now = this.#clock.now();
    this.#entries.delete(key);
    // Room is made before the key goes in, so eviction never reaches the entry being set.
    this.#dropOldest(now, this.#maxEntries - 1);
    this.#entries.set(key, { value, expiresAt: now + this.#ttlMs, used: false });
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }

  /**
   * Drops expired entries at the front, so idle memory drains, and evicts down to `keep`: the
   * oldest entry not read since it was set, or last spared. A read entry is spared once, moved to
   * the end unmarked; the iterator reaches it again there, so this ends within two passes.
   */
  #dropOldest(now: number, keep: number): void {
    for (const [key, entry] of this.#entries) {
      if (this.#entries.size <= keep && entry.expiresAt > now) return;
      this.#entries.delete(key);
      if (entry.used && entry.expiresAt > now) {
        entry.used = false;
        this.#entries.set(key, entry);
      }
    }
  }
}
