/**
 * Rate limiting (§8.13): one token bucket per key (the caller builds keys per dimension, e.g.
 * `agent:${sub}`, `ip:${addr}`). A bucket holds `count` tokens and refills at `count` per
 * `windowMs`, so a client may burst `count` requests and then sustain `count` per window; within
 * any span of `windowMs` it gets at most 2 × count − 1. Chosen over fixed windows because it has no
 * boundary doubling at a fixed instant, needs two numbers per key, and yields an exact Retry-After.
 *
 * Arithmetic is in integers ("credit" = tokens × windowMs; one request costs windowMs, each elapsed
 * millisecond adds `count`), so no rounding drift can deny a request that should pass.
 */
import type { Clock } from '../clock.js';

export interface RateLimit {
  readonly count: number;
  readonly windowMs: number;
}

/** One request to take from `key`'s budget under `limit`. */
export interface RateTake {
  readonly key: string;
  readonly limit: RateLimit;
}

/** Allowed, or refused by the take at index `refused`, with the wait until it would pass. */
export type RateVerdict =
  { readonly ok: true } | { readonly ok: false; readonly refused: number; readonly retryAfterSec: number };

/**
 * The budgets as callers see them: this process's RateLimiter (`localLimiter`), or buckets shared
 * by every replica on PostgreSQL (storage/pg-shared.ts). Synchronous answers stay synchronous, so
 * that the in-process limiter adds no promise to the hot path.
 */
export interface Limiter {
  /**
   * Takes one request from each budget in order and stops at the first that has none left: the
   * takes before it are spent, the ones after it untouched (list the narrowest first).
   */
  take(takes: readonly RateTake[]): RateVerdict | Promise<RateVerdict>;
  /** Whether `take` has a request left, without taking it. */
  check(take: RateTake): RateVerdict | Promise<RateVerdict>;
  /**
   * Gives back one request taken from the budget (never past full): for a budget reserved before
   * slow work and charged only when the work fails (sign-in.ts), so concurrent attempts cannot
   * all pass one check.
   */
  give(take: RateTake): void | Promise<void>;
}

/** The Limiter of this process alone (SQLite: one process; failed authentications everywhere). */
export function localLimiter(limiter: RateLimiter): Limiter {
  return {
    take(takes) {
      for (let i = 0; i < takes.length; i++) {
        const { key, limit } = takes[i] as RateTake;
        const result = limiter.take(key, limit);
        if (!result.ok) return { ok: false, refused: i, retryAfterSec: result.retryAfterSec };
      }
      return { ok: true };
    },
    check({ key, limit }) {
      const result = limiter.check(key, limit);
      return result.ok ? result : { ok: false, refused: 0, retryAfterSec: result.retryAfterSec };
    },
    give({ key, limit }) {
      limiter.give(key, limit);
    },
  };
}

interface Bucket {
  credit: number;
  at: number;
  limit: RateLimit;
}

const DEFAULT_MAX_KEYS = 100_000;

// How far from the least recently used end eviction looks for a full bucket, which it can drop
// without losing anything; bounded so eviction stays O(1) under a flood of new keys.
const EVICTION_SCAN = 16;

export class RateLimiter {
  readonly #clock: Clock;
  readonly #maxKeys: number;
  // Map order is recency order: a take moves its key to the end, so the first key is the least
  // recently used, and the one most likely to have refilled completely.
  readonly #buckets = new Map<string, Bucket>();

  constructor(clock: Clock, options: { maxKeys?: number } = {}) {
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) throw new RangeError(`Invalid maxKeys: ${maxKeys}`);
    this.#clock = clock;
    this.#maxKeys = maxKeys;
  }

  /** Takes one request from `key`'s budget; when none is left, says how long until one is. */
  take(key: string, limit: RateLimit): { ok: true } | { ok: false; retryAfterSec: number } {
    checkLimit(limit);
    const now = this.#clock.now();
    const previous = this.#buckets.get(key);
    if (previous === undefined) {
      if (this.#buckets.size >= this.#maxKeys) this.#evictOne(now);
    } else {
      this.#buckets.delete(key);
    }
    const cost = limit.windowMs;
    let credit = previous === undefined ? capacity(limit) : creditAt(previous, now, limit);
    const ok = credit >= cost;
    if (ok) credit -= cost;
    this.#buckets.set(key, { credit, at: now, limit });
    this.#sweepOldest(now);
    if (ok) return { ok: true };
    return { ok: false, retryAfterSec: retryAfterSec(credit, limit) };
  }

  /**
   * Whether `key` has a request left, without taking it: for budgets charged only on failure
   * (failed authentications), which are checked before the work and charged after it.
   */
  check(key: string, limit: RateLimit): { ok: true } | { ok: false; retryAfterSec: number } {
    checkLimit(limit);
    const bucket = this.#buckets.get(key);
    if (bucket === undefined) return { ok: true };
    const credit = creditAt(bucket, this.#clock.now(), limit);
    if (credit >= limit.windowMs) return { ok: true };
    return { ok: false, retryAfterSec: retryAfterSec(credit, limit) };
  }

  /** Gives one request back to `key`'s budget, up to full (see Limiter.give). */
  give(key: string, limit: RateLimit): void {
    checkLimit(limit);
    const bucket = this.#buckets.get(key);
    if (bucket === undefined) return; // full already
    const now = this.#clock.now();
    const credit = Math.min(capacity(limit), creditAt(bucket, now, limit) + limit.windowMs);
    this.#buckets.set(key, { credit, at: Math.max(bucket.at, now), limit });
  }

  /** Makes room for one key: a full bucket near the old end if there is one, else the oldest. */
  #evictOne(now: number): void {
    let scanned = 0;
    for (const [key, bucket] of this.#buckets) {
      if (isFull(bucket, now)) {
        this.#buckets.delete(key);
        return;
      }
      if (++scanned >= EVICTION_SCAN) break;
    }
    // Forgetting a partly used bucket grants that key a fresh burst; bounded memory costs that much.
    const oldest = this.#buckets.keys().next();
    if (oldest.done !== true) this.#buckets.delete(oldest.value);
  }

  /** A full bucket is the same as no bucket, so idle keys are dropped as time passes, one per call. */
  #sweepOldest(now: number): void {
    const oldest = this.#buckets.entries().next();
    if (oldest.done !== true && isFull(oldest.value[1], now)) this.#buckets.delete(oldest.value[0]);
  }
}

/** Seconds until a bucket holding `credit` has a request's worth (at least 1). */
export function retryAfterSec(credit: number, limit: RateLimit): number {
  const waitMs = Math.ceil((limit.windowMs - credit) / limit.count);
  return Math.max(1, Math.ceil(waitMs / 1000));
}

export function checkLimit(limit: RateLimit): void {
  const { count, windowMs } = limit;
  if (
    !Number.isSafeInteger(count) ||
    count < 1 ||
    !Number.isSafeInteger(windowMs) ||
    windowMs < 1 ||
    !Number.isSafeInteger(count * windowMs)
  ) {
    throw new RangeError(`Invalid rate limit: ${count} per ${windowMs} ms`);
  }
}

function capacity(limit: RateLimit): number {
  return limit.count * limit.windowMs;
}

/**
 * The bucket's credit at `now` under `limit` (rescaled if the key's limit changed since). A
 * stored bucket's `limit` needs only its window (the shared buckets keep no count).
 */
export function creditAt(
  bucket: { readonly credit: number; readonly at: number; readonly limit: Pick<RateLimit, 'windowMs'> },
  now: number,
  limit: RateLimit,
): number {
  const stored =
    bucket.limit.windowMs === limit.windowMs
      ? bucket.credit
      : Math.floor((bucket.credit / bucket.limit.windowMs) * limit.windowMs);
  // A clock that stepped backwards adds nothing rather than taking credit away.
  const elapsed = Math.max(0, now - bucket.at);
  return Math.min(capacity(limit), stored + elapsed * limit.count);
}

function isFull(bucket: Bucket, now: number): boolean {
  return creditAt(bucket, now, bucket.limit) >= capacity(bucket.limit);
}
