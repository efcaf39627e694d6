/**
 * The jti replay cache (§4.6, §8.4, §10.3): remembers each accepted JWT's jti, per identity (an
 * agent, a host key), until its effective validity window ends (lifetime plus clock skew, §8.2).
 *
 * Memory is bounded twice, and a full cache refuses rather than forgets, because forgetting a
 * live jti would let that token be replayed:
 * - per identity, `maxPerIdentity` entries: a flooding identity hits its own cap first
 *   ('identity_full') and cannot crowd out anyone else;
 * - in total, `maxEntries`. New identities (none of whose jtis is live) are admitted only while
 *   the cache is below `NEW_IDENTITY_SHARE` of it; the rest is headroom for identities already
 *   remembered, which keep working up to their own cap while the total allows ('full' past it).
 *   Nothing is ever evicted early.
 * An entry costs about 200 bytes with a UUID jti and at most about 600 bytes with the longest jti
 * jwt.ts accepts (256 characters), measured on Node 20.
 *
 * Expiry is lazy and amortized: a min-heap orders entries by expiry, and each call pops only what
 * has expired, so every entry is pushed and popped once (O(log n) each) and no call scans the
 * whole cache.
 *
 * Beyond memory, a ledger (storage/replay-ledger.ts) records each jti before it is kept: the
 * proxy calls `check`, records, then `keep` (authenticate.ts). `remember` is `check` and `keep` in
 * one call, for callers with no ledger. `restore` loads what a ledger kept across a restart.
 */
import type { Clock } from '../clock.js';

export const DEFAULT_MAX_ENTRIES = 200_000;
export const DEFAULT_MAX_PER_IDENTITY = 2_000;
/** New identities are admitted below this share of maxEntries; the rest is headroom for known ones. */
export const NEW_IDENTITY_SHARE = 0.9;

export type RememberOutcome = 'fresh' | 'replay' | 'identity_full' | 'full';
/** `check`'s answer: as RememberOutcome, and 'extend' for a replay whose token expires later. */
export type ReplayVerdict = RememberOutcome | 'extend';

export interface ReplayCacheOptions {
  readonly maxEntries?: number;
  readonly maxPerIdentity?: number;
}

export interface RememberedJti {
  readonly identity: string;
  readonly jti: string;
  readonly untilMs: number;
}

interface Bucket {
  /** The identity string the heap refers to: one copy per identity, not one per entry. */
  readonly identity: string;
  /** jti → remember-until (ms). The authority on what is remembered. */
  readonly until: Map<string, number>;
}

export class ReplayCache {
  readonly #clock: Clock;
  readonly #maxEntries: number;
  readonly #maxPerIdentity: number;
  readonly #newIdentityLimit: number;
  readonly #buckets = new Map<string, Bucket>();
  /** One heap node per live entry; a node whose time is behind its entry's was extended. */
  readonly #heap = new ExpiryHeap();
  #size = 0;

  constructor(clock: Clock, options: ReplayCacheOptions = {}) {
    const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    const maxPerIdentity = options.maxPerIdentity ?? DEFAULT_MAX_PER_IDENTITY;
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`Invalid maxEntries: ${maxEntries}`);
    }
    if (!Number.isSafeInteger(maxPerIdentity) || maxPerIdentity < 1 || maxPerIdentity > maxEntries) {
      throw new RangeError(`Invalid maxPerIdentity: ${maxPerIdentity} (1 to maxEntries)`);
    }
    this.#clock = clock;
    this.#maxEntries = maxEntries;
    this.#maxPerIdentity = maxPerIdentity;
    this.#newIdentityLimit = Math.max(1, Math.floor(maxEntries * NEW_IDENTITY_SHARE));
  }

  get maxEntries(): number {
    return this.#maxEntries;
  }

  get maxPerIdentity(): number {
    return this.#maxPerIdentity;
  }

  /** Live entries. */
  get size(): number {
    this.#purge(this.#clock.now());
    return this.#size;
  }

  /** Identities with at least one live entry. */
  get identities(): number {
    this.#purge(this.#clock.now());
    return this.#buckets.size;
  }

  /** Live entries of one identity. */
  entriesOf(identity: string): number {
    this.#purge(this.#clock.now());
    return this.#buckets.get(identity)?.until.size ?? 0;
  }

  /**
   * Records `jti` for `identity` until `untilMs`. 'fresh': first sighting, now remembered.
   * 'replay': seen and still remembered. 'identity_full': this identity holds its cap of live
   * entries. 'full': no room in total (or, for an identity with no live entry, no room for new
   * identities). On the last two nothing is kept and the caller must refuse the request.
   */
  remember(identity: string, jti: string, untilMs: number): RememberOutcome {
    const verdict = this.check(identity, jti, untilMs);
    if (verdict !== 'fresh' && verdict !== 'extend') return verdict;
    if (untilMs > this.#clock.now()) this.keep(identity, jti, untilMs);
    return verdict === 'extend' ? 'replay' : 'fresh';
  }

  /**
   * `remember` without keeping anything: what it would answer, and 'extend' for a replay by a
   * token that expires later than the one remembered. The caller then records the jti where it
   * must (a ledger, replay-ledger.ts) and keeps it with `keep`, in the same turn of the event loop.
   */
  check(identity: string, jti: string, untilMs: number): ReplayVerdict {
    if (Number.isNaN(untilMs)) throw new RangeError('untilMs must be a number');
    const now = this.#clock.now();
    this.#purge(now);
    const bucket = this.#buckets.get(identity);
    const until = bucket?.until.get(jti);
    // A second token reusing the jti may expire later; it is to be remembered to its end too, or
    // it could be replayed once the first one's window closes.
    if (bucket !== undefined && until !== undefined) return untilMs > until ? 'extend' : 'replay';
    // A window that has already closed needs no memory: the token fails its exp check anyway.
    if (untilMs <= now) return 'fresh';
    if (bucket === undefined && this.#size >= this.#newIdentityLimit) return 'full';
    if (bucket !== undefined && bucket.until.size >= this.#maxPerIdentity) return 'identity_full';
    if (this.#size >= this.#maxEntries) return 'full';
    return 'fresh';
  }

  /** Remembers `jti` until `untilMs` (after `check` said 'fresh' or 'extend'); a closed window is not kept. */
  keep(identity: string, jti: string, untilMs: number): void {
    if (untilMs <= this.#clock.now()) return;
    const bucket = this.#buckets.get(identity);
    const until = bucket?.until.get(jti);
    if (bucket !== undefined && until !== undefined) {
      if (untilMs > until) bucket.until.set(jti, untilMs);
      return;
    }
    this.#add(bucket, identity, jti, untilMs);
  }

  /**
   * Loads entries remembered before a restart. They were accepted then, so they are kept whatever
   * the caps say now (a lower cap only delays new entries until they expire).
   */
  restore(entries: Iterable<RememberedJti>): void {
    const now = this.#clock.now();
    for (const { identity, jti, untilMs } of entries) {
      if (!(untilMs > now)) continue;
      const bucket = this.#buckets.get(identity);
      const until = bucket?.until.get(jti);
      if (bucket !== undefined && until !== undefined) {
        if (untilMs > until) bucket.until.set(jti, untilMs);
        continue;
      }
      this.#add(bucket, identity, jti, untilMs);
    }
  }

  /**
   * Seconds until a refused caller may find room: for 'identity_full' until that identity's oldest
   * entry expires, for 'full' until the next entry anywhere does. At least 1.
   */
  retryAfterSec(identity?: string): number {
    const now = this.#clock.now();
    let next = this.#heap.peek()?.at ?? now;
    const bucket = identity === undefined ? undefined : this.#buckets.get(identity);
    if (bucket !== undefined) {
      // Map order is insertion order, nearly expiry order; at most maxPerIdentity entries.
      next = Infinity;
      for (const at of bucket.until.values()) if (at < next) next = at;
    }
    return Math.max(1, Math.ceil((next - now) / 1000));
  }

  #add(bucket: Bucket | undefined, identity: string, jti: string, untilMs: number): void {
    const target = bucket ?? { identity, until: new Map<string, number>() };
    if (bucket === undefined) this.#buckets.set(identity, target);
    target.until.set(jti, untilMs);
    this.#heap.push(untilMs, target.identity, jti);
    this.#size++;
  }

  #purge(now: number): void {
    for (let top = this.#heap.peek(); top !== undefined && top.at <= now; top = this.#heap.peek()) {
      this.#heap.pop();
      const bucket = this.#buckets.get(top.identity);
      const until = bucket?.until.get(top.jti);
      if (bucket === undefined || until === undefined) continue;
      // Extended since it was pushed: re-queue at the new time instead of keeping a second node.
      if (until > top.at) {
        this.#heap.push(until, bucket.identity, top.jti);
        continue;
      }
      bucket.until.delete(top.jti);
      this.#size--;
      if (bucket.until.size === 0) this.#buckets.delete(top.identity);
    }
  }
}

/** A binary min-heap of (time, identity, jti), stored as parallel arrays to keep nodes cheap. */
class ExpiryHeap {
  readonly #at: number[] = [];
  readonly #identity: string[] = [];
  readonly #jti: string[] = [];

  peek(): { at: number; identity: string; jti: string } | undefined {
    const at = this.#at[0];
    const identity = this.#identity[0];
    const jti = this.#jti[0];
    return at === undefined || identity === undefined || jti === undefined
      ? undefined
      : { at, identity, jti };
  }

  push(at: number, identity: string, jti: string): void {
    this.#at.push(at);
    this.#identity.push(identity);
    this.#jti.push(jti);
    this.#up(this.#at.length - 1);
  }

  pop(): void {
    const lastAt = this.#at.pop();
    const lastIdentity = this.#identity.pop();
    const lastJti = this.#jti.pop();
    if (lastAt === undefined || lastIdentity === undefined || lastJti === undefined) return;
    if (this.#at.length === 0) return;
    this.#at[0] = lastAt;
    this.#identity[0] = lastIdentity;
    this.#jti[0] = lastJti;
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
    const identity = this.#identity;
    const jti = this.#jti;
    [at[i], at[j]] = [at[j] ?? 0, at[i] ?? 0];
    [identity[i], identity[j]] = [identity[j] ?? '', identity[i] ?? ''];
    [jti[i], jti[j]] = [jti[j] ?? '', jti[i] ?? ''];
  }
}
