import { describe, expect, it } from 'vitest';

import { ReplayCache } from '../../../src/protocol/replay-cache.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

// §10.3: 60 s lifetime + 30 s skew.
const WINDOW_MS = 90_000;

describe('ReplayCache', () => {
  it('reports the first sighting as fresh and a second as a replay', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    expect(cache.remember('agent:a:jti-1', until)).toBe('fresh');
    expect(cache.remember('agent:a:jti-1', until)).toBe('replay');
    expect(cache.remember('agent:a:jti-1', until)).toBe('replay');
    expect(cache.size).toBe(1);
  });

  it('keeps partitions apart: the same jti under another identity is fresh', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    expect(cache.remember('agent:a:jti-1', until)).toBe('fresh');
    expect(cache.remember('agent:b:jti-1', until)).toBe('fresh');
    expect(cache.remember('host:a:jti-1', until)).toBe('fresh');
    expect(cache.size).toBe(3);
  });

  it('remembers a key up to and excluding rememberUntilMs', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    cache.remember('k', until);
    clock.advance(WINDOW_MS - 1);
    expect(cache.remember('k', until)).toBe('replay');
    clock.advance(1);
    expect(cache.size).toBe(0);
    expect(cache.remember('k', clock.now() + WINDOW_MS)).toBe('fresh');
  });

  it('does not store a key whose window has already closed', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    expect(cache.remember('k', clock.now())).toBe('fresh');
    expect(cache.remember('old', clock.now() - 1)).toBe('fresh');
    expect(cache.size).toBe(0);
  });

  it('still reports a live key as a replay when asked with an already-closed window', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    cache.remember('k', clock.now() + WINDOW_MS);
    expect(cache.remember('k', clock.now() - 1)).toBe('replay');
  });

  it('extends the memory when a replay carries a later expiry', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const start = clock.now();
    expect(cache.remember('k', start + 10_000)).toBe('fresh');
    clock.advance(5000);
    expect(cache.remember('k', start + 60_000)).toBe('replay');
    // Past the first expiry the key must still be remembered, or the second token could replay.
    clock.advance(10_000);
    expect(cache.remember('k', start + 60_000)).toBe('replay');
    expect(cache.size).toBe(1);
    clock.advance(45_000);
    expect(cache.size).toBe(0);
    expect(cache.remember('k', clock.now() + 1)).toBe('fresh');
  });

  it('does not shorten the memory when a replay carries an earlier expiry', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const start = clock.now();
    cache.remember('k', start + 60_000);
    expect(cache.remember('k', start + 1000)).toBe('replay');
    clock.advance(30_000);
    expect(cache.remember('k', start + 60_000)).toBe('replay');
  });

  it('expires entries in expiry order, whatever order they arrived in', () => {
    const clock = manualClock(0);
    const cache = new ReplayCache(clock);
    const expiries = [50, 10, 90, 30, 70, 20, 80, 40, 60, 100];
    for (const [i, at] of expiries.entries()) cache.remember(`k${i}`, at);
    for (let t = 0; t <= 100; t += 5) {
      clock.advance(t - clock.now());
      expect(cache.size).toBe(expiries.filter((at) => at > t).length);
      for (const [i, at] of expiries.entries()) {
        if (at > t) expect(cache.remember(`k${i}`, at)).toBe('replay');
      }
    }
  });

  it('agrees with a reference model over many random operations', () => {
    let seed = 12345;
    const random = () => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    const clock = manualClock(0);
    const cache = new ReplayCache(clock, { maxEntries: 200 });
    const model = new Map<string, number>();
    for (let step = 0; step < 50_000; step++) {
      clock.advance(Math.floor(random() * 20));
      const now = clock.now();
      for (const [key, until] of model) if (until <= now) model.delete(key);
      const key = `k${Math.floor(random() * 400)}`;
      const until = now + Math.floor(random() * 1000) - 100;
      const existing = model.get(key);
      let expected: string;
      if (existing !== undefined) {
        expected = 'replay';
        if (until > existing) model.set(key, until);
      } else if (until <= now) {
        expected = 'fresh';
      } else if (model.size >= 200) {
        expected = 'full';
      } else {
        expected = 'fresh';
        model.set(key, until);
      }
      expect(cache.remember(key, until)).toBe(expected);
      if (step % 97 === 0) expect(cache.size).toBe(model.size);
    }
  });
});

describe('ReplayCache: capacity', () => {
  it('returns full instead of evicting a live entry', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 3 });
    const until = clock.now() + WINDOW_MS;
    for (const key of ['a', 'b', 'c']) expect(cache.remember(key, until)).toBe('fresh');
    expect(cache.remember('d', until)).toBe('full');
    expect(cache.remember('d', until)).toBe('full');
    // Every remembered key is still caught.
    for (const key of ['a', 'b', 'c']) expect(cache.remember(key, until)).toBe('replay');
    expect(cache.size).toBe(3);
  });

  it('makes room again once entries expire', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 2 });
    cache.remember('a', clock.now() + 1000);
    cache.remember('b', clock.now() + 5000);
    expect(cache.remember('c', clock.now() + 5000)).toBe('full');
    clock.advance(1000);
    expect(cache.remember('c', clock.now() + 5000)).toBe('fresh');
    expect(cache.remember('d', clock.now() + 5000)).toBe('full');
    expect(cache.remember('b', clock.now() + 5000)).toBe('replay');
  });

  it('defaults to 1 000 000 entries', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    for (let i = 0; i < 1_000_000; i++) cache.remember(`k${i}`, until);
    expect(cache.size).toBe(1_000_000);
    expect(cache.remember('one-more', until)).toBe('full');
  });

  it('purges without scanning everything on each call', () => {
    const clock = manualClock(0);
    const cache = new ReplayCache(clock, { maxEntries: 300_000 });
    // 200 000 long-lived entries that a per-call scan would walk every time (10^10 steps in all).
    for (let i = 0; i < 200_000; i++) cache.remember(`live${i}`, 10_000_000 + i);
    const started = performance.now();
    let fresh = 0;
    for (let i = 0; i < 50_000; i++) {
      clock.advance(1);
      if (cache.remember(`short${i}`, clock.now() + 100) === 'fresh') fresh++;
    }
    expect(performance.now() - started).toBeLessThan(5000);
    expect(fresh).toBe(50_000);
    expect(cache.size).toBe(200_000 + 100);
  });

  it.each([0, -1, 1.5, NaN])('rejects maxEntries %d', (maxEntries) => {
    expect(() => new ReplayCache(manualClock(), { maxEntries })).toThrow(RangeError);
  });

  it('rejects a NaN expiry, which would corrupt the ordering', () => {
    expect(() => new ReplayCache(manualClock()).remember('k', NaN)).toThrow(RangeError);
  });
});
