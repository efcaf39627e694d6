/**
 * The jti replay cache (§4.6, §8.4, §10.3): remembers each JWT's key until its effective validity
 * window ends (lifetime plus clock skew, §8.2), in memory only, as §10.3 allows.
 *
 * Expiry is lazy and amortized: a min-heap orders entries by expiry, and each call pops only what
 * has expired, so every entry is pushed and popped once (O(log n) each) and no call scans the
 * whole cache. When the cache is full of live entries it refuses new ones ('full') rather than
 * evicting, because forgetting a live jti would let that token be replayed.
 */
import type { Clock } from '../clock.js';

const DEFAULT_MAX_ENTRIES = 1_000_000;

export class ReplayCache {
  readonly #clock: Clock;
  readonly #maxEntries: number;
  /** key → remember-until (ms). The authority on what is remembered. */
  readonly #until = new Map<string, number>();
  /** One heap node per key in #until; a node whose time is behind the map's was extended. */
  readonly #heap = new ExpiryHeap();

  constructor(clock: Clock, options: { maxEntries?: number } = {}) {
    const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`Invalid maxEntries: ${maxEntries}`);
    }
    this.#clock = clock;
    this.#maxEntries = maxEntries;
  }

  /** Live entries. */
  get size(): number {
    this.#purge(this.#clock.now());
    return this.#until.size;
  }

  /**
   * Records `key` (caller partitions, e.g. `agent:${sub}:${jti}`) until `rememberUntilMs`.
   * 'fresh': first sighting, now remembered. 'replay': seen and still remembered. 'full': not
   * seen, but there is no room to remember it; the caller must reject the request (fail closed).
   */
  remember(key: string, rememberUntilMs: number): 'fresh' | 'replay' | 'full' {
    if (Number.isNaN(rememberUntilMs)) throw new RangeError('rememberUntilMs must be a number');
    const now = this.#clock.now();
    this.#purge(now);
    const until = this.#until.get(key);
    if (until !== undefined) {
      // A second token reusing the jti may expire later; remember to its end too, or it could be
      // replayed once the first one's window closes.
      if (rememberUntilMs > until) this.#until.set(key, rememberUntilMs);
      return 'replay';
    }
    // A window that has already closed needs no memory: the token fails its exp check anyway.
    if (rememberUntilMs <= now) return 'fresh';
    if (this.#until.size >= this.#maxEntries) return 'full';
    this.#until.set(key, rememberUntilMs);
    this.#heap.push(rememberUntilMs, key);
    return 'fresh';
  }

  #purge(now: number): void {
    for (let top = this.#heap.peek(); top !== undefined && top.at <= now; top = this.#heap.peek()) {
      this.#heap.pop();
      const until = this.#until.get(top.key);
      if (until === undefined) continue;
      // Extended since it was pushed: re-queue at the new time instead of keeping a second node.
      if (until > top.at) this.#heap.push(until, top.key);
      else this.#until.delete(top.key);
    }
  }
}

/** A binary min-heap of (time, key), stored as two parallel arrays to keep nodes cheap. */
class ExpiryHeap {
  readonly #at: number[] = [];
  readonly #key: string[] = [];

  peek(): { at: number; key: string } | undefined {
    const at = this.#at[0];
    const key = this.#key[0];
    return at === undefined || key === undefined ? undefined : { at, key };
  }

  push(at: number, key: string): void {
    this.#at.push(at);
    this.#key.push(key);
    this.#up(this.#at.length - 1);
  }

  pop(): void {
    const lastAt = this.#at.pop();
    const lastKey = this.#key.pop();
    if (lastAt === undefined || lastKey === undefined || this.#at.length === 0) return;
    this.#at[0] = lastAt;
    this.#key[0] = lastKey;
    this.#down(0);
  }

  #up(index: number): void {
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.#time(parent) <= this.#time(i)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(index: number): void {
    const length = this.#at.length;
    let i = index;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < length && this.#time(left) < this.#time(smallest)) smallest = left;
      if (right < length && this.#time(right) < this.#time(smallest)) smallest = right;
      if (smallest === i) return;
      this.#swap(i, smallest);
      i = smallest;
    }
  }

  #time(i: number): number {
    return this.#at[i] ?? Infinity;
  }

  #swap(i: number, j: number): void {
    const at = this.#at;
    const key = this.#key;
    [at[i], at[j]] = [at[j] ?? 0, at[i] ?? 0];
    [key[i], key[j]] = [key[j] ?? '', key[i] ?? ''];
  }
}
