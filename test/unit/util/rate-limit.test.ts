import { describe, expect, it } from 'vitest';

import { localLimiter, RateLimiter } from '../../../src/util/rate-limit.js';
import type { RateLimit } from '../../../src/util/rate-limit.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    set(ms: number) {
      now = ms;
    },
  };
}

const PER_MINUTE_60: RateLimit = { count: 60, windowMs: 60_000 };
const PER_HOUR_10: RateLimit = { count: 10, windowMs: 3_600_000 };

function takeN(limiter: RateLimiter, key: string, limit: RateLimit, n: number): number {
  let allowed = 0;
  for (let i = 0; i < n; i++) if (limiter.take(key, limit).ok) allowed++;
  return allowed;
}

describe('RateLimiter: token bucket', () => {
  it('allows a burst of `count`, then refuses', () => {
    const limiter = new RateLimiter(manualClock());
    expect(takeN(limiter, 'agent:a', PER_MINUTE_60, 60)).toBe(60);
    expect(limiter.take('agent:a', PER_MINUTE_60)).toEqual({ ok: false, retryAfterSec: 1 });
  });

  it('refills one request every windowMs / count', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    takeN(limiter, 'k', PER_MINUTE_60, 60);
    clock.advance(999);
    expect(limiter.take('k', PER_MINUTE_60).ok).toBe(false);
    clock.advance(1);
    expect(limiter.take('k', PER_MINUTE_60).ok).toBe(true);
    expect(limiter.take('k', PER_MINUTE_60).ok).toBe(false);
    clock.advance(5000);
    expect(takeN(limiter, 'k', PER_MINUTE_60, 10)).toBe(5);
  });

  it('refills no further than `count`', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    takeN(limiter, 'k', PER_MINUTE_60, 1);
    clock.advance(10 * 60_000);
    expect(takeN(limiter, 'k', PER_MINUTE_60, 100)).toBe(60);
  });

  it('sustains exactly `count` per window over a long run', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    let allowed = 0;
    // One attempt every 100 ms for 10 minutes, ten times the permitted rate.
    for (let t = 0; t < 600_000; t += 100) {
      if (limiter.take('k', PER_MINUTE_60).ok) allowed++;
      clock.advance(100);
    }
    expect(allowed).toBe(60 + 599);
  });

  it('never allows 2 × count within any windowMs', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const times: number[] = [];
    for (let t = 0; t < 3 * 3_600_000; t += 1000) {
      if (limiter.take('k', PER_HOUR_10).ok) times.push(clock.now());
      clock.advance(1000);
    }
    for (let i = 0; i + 19 < times.length; i++)
      expect(times[i + 19]! - times[i]!).toBeGreaterThanOrEqual(3_600_000);
    expect(times.filter((t) => t < times[0]! + 3_600_000).length).toBe(19);
  });

  it('has no rounding drift when windowMs / count is not a whole number', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const limit = { count: 3, windowMs: 1000 };
    takeN(limiter, 'k', limit, 3);
    let allowed = 0;
    for (let i = 0; i < 3000; i++) {
      clock.advance(1000);
      allowed += takeN(limiter, 'k', limit, 3);
    }
    expect(allowed).toBe(9000);
  });

  it('does not spend tokens on refused requests', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const limit = { count: 1, windowMs: 10_000 };
    expect(limiter.take('k', limit).ok).toBe(true);
    for (let i = 0; i < 50; i++) expect(limiter.take('k', limit).ok).toBe(false);
    clock.advance(10_000);
    expect(limiter.take('k', limit).ok).toBe(true);
  });

  it('keeps keys independent', () => {
    const limiter = new RateLimiter(manualClock());
    const limit = { count: 2, windowMs: 60_000 };
    expect(takeN(limiter, 'agent:a', limit, 5)).toBe(2);
    expect(takeN(limiter, 'agent:b', limit, 5)).toBe(2);
    expect(takeN(limiter, 'host:a', limit, 5)).toBe(2);
  });

  it('gives no extra credit when the clock steps backwards', () => {
    const clock = manualClock(1_000_000);
    const limiter = new RateLimiter(clock);
    const limit = { count: 1, windowMs: 60_000 };
    expect(limiter.take('k', limit).ok).toBe(true);
    clock.set(0);
    expect(limiter.take('k', limit).ok).toBe(false);
    clock.advance(59_999);
    expect(limiter.take('k', limit).ok).toBe(false);
    clock.advance(1);
    expect(limiter.take('k', limit).ok).toBe(true);
  });

  it('applies a changed limit to the tokens a key already used', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    takeN(limiter, 'k', { count: 10, windowMs: 60_000 }, 10);
    // Same empty bucket under a looser limit: still empty, but refills at the new rate.
    expect(limiter.take('k', { count: 100, windowMs: 60_000 }).ok).toBe(false);
    clock.advance(600);
    expect(limiter.take('k', { count: 100, windowMs: 60_000 }).ok).toBe(true);
    // Under a tighter limit a full bucket holds only the new count.
    clock.advance(3_600_000);
    expect(takeN(limiter, 'k', { count: 3, windowMs: 1000 }, 10)).toBe(3);
  });
});

describe('RateLimiter: giving back', () => {
  it('returns one request taken, never past full, and nothing to a key never taken from', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const three = { count: 3, windowMs: 60_000 };
    expect(takeN(limiter, 'k', three, 3)).toBe(3);
    expect(limiter.take('k', three).ok).toBe(false);
    limiter.give('k', three);
    expect(limiter.take('k', three).ok).toBe(true);
    expect(limiter.take('k', three).ok).toBe(false);
    // Given back more often than taken: still no more than `count`.
    for (let i = 0; i < 10; i++) limiter.give('k', three);
    expect(takeN(limiter, 'k', three, 10)).toBe(3);
    limiter.give('never', three);
    expect(takeN(limiter, 'never', three, 10)).toBe(3);
  });

  it('is the same through localLimiter', async () => {
    const limiter = localLimiter(new RateLimiter(manualClock()));
    const one = { key: 'k', limit: { count: 1, windowMs: 60_000 } };
    expect(await limiter.take([one])).toEqual({ ok: true });
    expect((await limiter.take([one])).ok).toBe(false);
    await limiter.give(one);
    expect(await limiter.take([one])).toEqual({ ok: true });
  });
});

describe('RateLimiter: Retry-After', () => {
  it('is the whole seconds until the next token, at least 1', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    takeN(limiter, 'k', PER_HOUR_10, 10);
    expect(limiter.take('k', PER_HOUR_10)).toEqual({ ok: false, retryAfterSec: 360 });
    clock.advance(359_000);
    expect(limiter.take('k', PER_HOUR_10)).toEqual({ ok: false, retryAfterSec: 1 });
    clock.advance(999);
    expect(limiter.take('k', PER_HOUR_10)).toEqual({ ok: false, retryAfterSec: 1 });
    clock.advance(1);
    expect(limiter.take('k', PER_HOUR_10)).toEqual({ ok: true });
  });

  it('rounds up, so retrying after Retry-After always succeeds', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const limit = { count: 7, windowMs: 10_000 };
    for (let round = 0; round < 200; round++) {
      takeN(limiter, 'k', limit, 7);
      const refused = limiter.take('k', limit);
      if (refused.ok) throw new Error('expected a refusal');
      expect(Number.isInteger(refused.retryAfterSec)).toBe(true);
      expect(refused.retryAfterSec).toBeGreaterThanOrEqual(1);
      clock.advance(refused.retryAfterSec * 1000);
      expect(limiter.take('k', limit).ok).toBe(true);
      clock.advance(round * 37);
    }
  });

  it('rounds a fractional millisecond wait up, not down', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    // The next token is 3001 / 3 = 1000.33 ms away: 1 s would be too early.
    const limit = { count: 3, windowMs: 3001 };
    takeN(limiter, 'k', limit, 3);
    expect(limiter.take('k', limit)).toEqual({ ok: false, retryAfterSec: 2 });
    clock.advance(1000);
    expect(limiter.take('k', limit).ok).toBe(false);
    clock.advance(1);
    expect(limiter.take('k', limit).ok).toBe(true);
  });

  it('is at least 1 even when the next token is milliseconds away', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock);
    const limit = { count: 1000, windowMs: 1000 };
    takeN(limiter, 'k', limit, 1000);
    expect(limiter.take('k', limit)).toEqual({ ok: false, retryAfterSec: 1 });
  });
});

describe('RateLimiter: bounded memory', () => {
  it('forgets the least recently used key when at maxKeys', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock, { maxKeys: 3 });
    const limit = { count: 1, windowMs: 60_000 };
    for (const key of ['a', 'b', 'c']) expect(limiter.take(key, limit).ok).toBe(true);
    // Touch "a" so "b" becomes the least recently used.
    expect(limiter.take('a', limit).ok).toBe(false);
    expect(limiter.take('d', limit).ok).toBe(true);
    expect(limiter.take('a', limit).ok).toBe(false);
    expect(limiter.take('c', limit).ok).toBe(false);
    // "b" was evicted, so it starts over with a full bucket.
    expect(limiter.take('b', limit).ok).toBe(true);
  });

  it('evicts a fully refilled key before a more recently used one still in use', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock, { maxKeys: 3 });
    const long = { count: 1, windowMs: 3_600_000 };
    const short = { count: 1, windowMs: 1000 };
    expect(limiter.take('long-1', long).ok).toBe(true);
    expect(limiter.take('short', short).ok).toBe(true);
    expect(limiter.take('long-2', long).ok).toBe(true);
    clock.advance(5000);
    // "long-1" is oldest but still empty; "short" has refilled, so it goes instead.
    expect(limiter.take('new', long).ok).toBe(true);
    expect(limiter.take('long-1', long).ok).toBe(false);
    expect(limiter.take('long-2', long).ok).toBe(false);
  });

  it('holds at most maxKeys under a flood of distinct keys, and stays fast', () => {
    const clock = manualClock();
    const limiter = new RateLimiter(clock, { maxKeys: 1000 });
    const limit = { count: 5, windowMs: 60_000 };
    expect(limiter.take('victim', limit).ok).toBe(true);
    const started = performance.now();
    for (let i = 0; i < 200_000; i++) limiter.take(`ip:${i}`, limit);
    expect(performance.now() - started).toBeLessThan(3000);
    // The flood pushed "victim" out; the last 1000 keys are still limited.
    expect(takeN(limiter, 'ip:199999', limit, 10)).toBe(4);
  });

  it('uses a default of 100 000 keys', () => {
    const limiter = new RateLimiter(manualClock());
    const limit = { count: 1, windowMs: 60_000 };
    for (let i = 0; i < 100_000; i++) limiter.take(`k${i}`, limit);
    expect(limiter.take('k0', limit).ok).toBe(false);
    limiter.take('k100000', limit);
    // k0 was just touched, so k1 is now the least recently used and is the one evicted.
    expect(limiter.take('k0', limit).ok).toBe(false);
    expect(limiter.take('k1', limit).ok).toBe(true);
  });
});

describe('RateLimiter: argument checks', () => {
  it.each([
    { count: 0, windowMs: 1000 },
    { count: -1, windowMs: 1000 },
    { count: 1.5, windowMs: 1000 },
    { count: NaN, windowMs: 1000 },
    { count: 1, windowMs: 0 },
    { count: 1, windowMs: Infinity },
    { count: 1, windowMs: 0.5 },
    { count: 2 ** 30, windowMs: 2 ** 30 },
  ])('rejects the limit %j', (limit) => {
    expect(() => new RateLimiter(manualClock()).take('k', limit)).toThrow(RangeError);
  });

  it.each([0, -1, 1.5, NaN])('rejects maxKeys %d', (maxKeys) => {
    expect(() => new RateLimiter(manualClock(), { maxKeys })).toThrow(RangeError);
  });
});

describe('localLimiter: the Limiter of one process', () => {
  it('takes in order and stops at the first refusal, leaving the budgets after it untouched', () => {
    const clock = manualClock();
    const limiter = localLimiter(new RateLimiter(clock));
    const one = { count: 1, windowMs: 60_000 };
    const two = { count: 2, windowMs: 60_000 };
    const takes = [
      { key: 'agent', limit: one },
      { key: 'host', limit: two },
    ];
    expect(limiter.take(takes)).toEqual({ ok: true });
    expect(limiter.take(takes)).toEqual({ ok: false, refused: 0, retryAfterSec: 60 });
    // host was taken once: one left.
    expect(limiter.check({ key: 'host', limit: two })).toEqual({ ok: true });
    expect(limiter.take([{ key: 'host', limit: two }])).toEqual({ ok: true });
    expect(limiter.check({ key: 'host', limit: two })).toEqual({ ok: false, refused: 0, retryAfterSec: 30 });
  });
});
