import { describe, expect, it } from 'vitest';

import { TtlCache } from '../../../src/util/ttl-cache.js';

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

describe('TtlCache', () => {
  it('returns what was set, and undefined for unknown keys', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    expect(cache.get('b')).toBe(2);
    expect(cache.get('c')).toBeUndefined();
  });

  it('caches null and falsy values as values', () => {
    const cache = new TtlCache<number | null | string>(manualClock(), 10_000);
    cache.set('missing-agent', null);
    cache.set('zero', 0);
    cache.set('empty', '');
    expect(cache.get('missing-agent')).toBeNull();
    expect(cache.get('zero')).toBe(0);
    expect(cache.get('empty')).toBe('');
  });

  it('expires an entry ttlMs after it was set', () => {
    const clock = manualClock();
    const cache = new TtlCache<string>(clock, 5000);
    cache.set('k', 'v');
    clock.advance(4999);
    expect(cache.get('k')).toBe('v');
    clock.advance(1);
    expect(cache.get('k')).toBeUndefined();
  });

  it('does not extend the TTL on read (§10.2 bounds revocation delay by the TTL)', () => {
    const clock = manualClock();
    const cache = new TtlCache<string>(clock, 5000);
    cache.set('k', 'v');
    for (let i = 0; i < 4; i++) {
      clock.advance(1000);
      expect(cache.get('k')).toBe('v');
    }
    clock.advance(1000);
    expect(cache.get('k')).toBeUndefined();
  });

  it('restarts the TTL when a key is set again', () => {
    const clock = manualClock();
    const cache = new TtlCache<string>(clock, 5000);
    cache.set('k', 'old');
    clock.advance(4000);
    cache.set('k', 'new');
    clock.advance(4000);
    expect(cache.get('k')).toBe('new');
    clock.advance(1000);
    expect(cache.get('k')).toBeUndefined();
  });

  it('stays expired after the clock passes the TTL, even if a get happened in between', () => {
    const clock = manualClock();
    const cache = new TtlCache<string>(clock, 1000);
    cache.set('k', 'v');
    clock.advance(2000);
    expect(cache.get('k')).toBeUndefined();
    expect(cache.get('k')).toBeUndefined();
  });

  it('deletes one key', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.delete('a');
    cache.delete('never-set');
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBe(2);
  });

  it('clears everything', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.clear();
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBeUndefined();
    cache.set('a', 3);
    expect(cache.get('a')).toBe(3);
  });

  it('keeps keys that merely share a name with Object.prototype apart', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000);
    expect(cache.get('constructor')).toBeUndefined();
    expect(cache.get('__proto__')).toBeUndefined();
    cache.set('__proto__', 1);
    expect(cache.get('__proto__')).toBe(1);
  });
});

describe('TtlCache: eviction (second chance)', () => {
  it('evicts the least recently set key beyond maxEntries', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 3);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    cache.set('d', 4);
    expect(cache.get('a')).toBeUndefined();
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).toEqual([2, 3, 4]);
  });

  it('counts a get as use', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 3);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    expect(cache.get('a')).toBe(1);
    cache.set('d', 4);
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c'), cache.get('d')]).toEqual([1, 3, 4]);
  });

  it('spares a read entry once: read again, it is spared again; not read, it goes', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3); // a spared (moved behind b), b evicted
    expect(cache.get('b')).toBeUndefined();
    cache.set('d', 4); // a, not read since, is now the oldest
    expect(cache.get('a')).toBeUndefined();
    expect([cache.get('c'), cache.get('d')]).toEqual([3, 4]);
  });

  it('evicts the oldest set when every entry was read (the second pass ends it)', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 3);
    for (const k of ['a', 'b', 'c']) cache.set(k, 0);
    for (const k of ['c', 'b', 'a']) cache.get(k);
    cache.set('d', 4);
    expect(cache.get('a')).toBeUndefined();
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).toEqual([0, 0, 4]);
  });

  it('counts setting an existing key as use, without growing', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 10);
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(10);
    expect(cache.get('c')).toBe(3);
  });

  it('holds exactly maxEntries', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000, 100);
    for (let i = 0; i < 1000; i++) cache.set(`k${i}`, i);
    const present = Array.from({ length: 1000 }, (_, i) => cache.get(`k${i}`)).filter((v) => v !== undefined);
    expect(present).toEqual(Array.from({ length: 100 }, (_, i) => 900 + i));
  });

  it('defaults to 10 000 entries', () => {
    const cache = new TtlCache<number>(manualClock(), 10_000);
    for (let i = 0; i <= 10_000; i++) cache.set(`k${i}`, i);
    expect(cache.get('k0')).toBeUndefined();
    expect(cache.get('k1')).toBe(1);
    expect(cache.get('k10000')).toBe(10_000);
  });

  it('stays fast when churned far beyond its size', () => {
    const clock = manualClock();
    const cache = new TtlCache<number>(clock, 50, 1000);
    const started = performance.now();
    for (let i = 0; i < 200_000; i++) {
      clock.advance(1);
      cache.set(`k${i % 5000}`, i);
      cache.get(`k${(i * 7) % 5000}`);
    }
    expect(performance.now() - started).toBeLessThan(3000);
  });
});

describe('TtlCache: argument checks', () => {
  it.each([0, -1, NaN, Infinity])('rejects ttlMs %d', (ttlMs) => {
    expect(() => new TtlCache(manualClock(), ttlMs)).toThrow(RangeError);
  });

  it.each([0, -1, 1.5, NaN])('rejects maxEntries %d', (maxEntries) => {
    expect(() => new TtlCache(manualClock(), 1000, maxEntries)).toThrow(RangeError);
  });
});
