import { describe, expect, it } from 'vitest';

import {
  DEFAULT_MAX_ENTRIES,
  DEFAULT_MAX_PER_IDENTITY,
  NEW_IDENTITY_SHARE,
  ReplayCache,
} from '../../../src/protocol/replay-cache.js';

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

describe('ReplayCache: remembering', () => {
  it('reports the first sighting as fresh and a second as a replay', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    expect(cache.remember('agent:a', 'jti-1', until)).toBe('fresh');
    expect(cache.remember('agent:a', 'jti-1', until)).toBe('replay');
    expect(cache.remember('agent:a', 'jti-1', until)).toBe('replay');
    expect(cache.size).toBe(1);
  });

  it('keeps partitions apart: the same jti under another identity is fresh', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    expect(cache.remember('agent:a', 'jti-1', until)).toBe('fresh');
    expect(cache.remember('agent:b', 'jti-1', until)).toBe('fresh');
    expect(cache.remember('host:a', 'jti-1', until)).toBe('fresh');
    expect(cache.size).toBe(3);
  });

  it('remembers a key up to and excluding rememberUntilMs', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const until = clock.now() + WINDOW_MS;
    cache.remember('id', 'k', until);
    clock.advance(WINDOW_MS - 1);
    expect(cache.remember('id', 'k', until)).toBe('replay');
    clock.advance(1);
    expect(cache.size).toBe(0);
    expect(cache.remember('id', 'k', clock.now() + WINDOW_MS)).toBe('fresh');
  });

  it('does not store a key whose window has already closed', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    expect(cache.remember('id', 'k', clock.now())).toBe('fresh');
    expect(cache.remember('id', 'old', clock.now() - 1)).toBe('fresh');
    expect(cache.size).toBe(0);
  });

  it('still reports a live key as a replay when asked with an already-closed window', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    cache.remember('id', 'k', clock.now() + WINDOW_MS);
    expect(cache.remember('id', 'k', clock.now() - 1)).toBe('replay');
  });

  it('extends the memory when a replay carries a later expiry', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const start = clock.now();
    expect(cache.remember('id', 'k', start + 10_000)).toBe('fresh');
    clock.advance(5000);
    expect(cache.remember('id', 'k', start + 60_000)).toBe('replay');
    // Past the first expiry the key must still be remembered, or the second token could replay.
    clock.advance(10_000);
    expect(cache.remember('id', 'k', start + 60_000)).toBe('replay');
    expect(cache.size).toBe(1);
    clock.advance(45_000);
    expect(cache.size).toBe(0);
    expect(cache.remember('id', 'k', clock.now() + 1)).toBe('fresh');
  });

  it('does not shorten the memory when a replay carries an earlier expiry', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock);
    const start = clock.now();
    cache.remember('id', 'k', start + 60_000);
    expect(cache.remember('id', 'k', start + 1000)).toBe('replay');
    clock.advance(30_000);
    expect(cache.remember('id', 'k', start + 60_000)).toBe('replay');
  });

  it('expires entries in expiry order, whatever order they arrived in', () => {
    const clock = manualClock(0);
    const cache = new ReplayCache(clock);
    const expiries = [50, 10, 90, 30, 70, 20, 80, 40, 60, 100];
    for (const [i, at] of expiries.entries()) cache.remember('id', `k${i}`, at);
    for (let t = 0; t <= 100; t += 5) {
      clock.advance(t - clock.now());
      expect(cache.size).toBe(expiries.filter((at) => at > t).length);
      for (const [i, at] of expiries.entries()) {
        if (at > t) expect(cache.remember('id', `k${i}`, at)).toBe('replay');
      }
    }
  });

  it('agrees with a reference model of both caps over many random operations', () => {
    let seed = 12345;
    const random = () => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    const clock = manualClock(0);
    const MAX = 200;
    const PER = 40;
    const cache = new ReplayCache(clock, { maxEntries: MAX, maxPerIdentity: PER });
    const model = new Map<string, Map<string, number>>();
    const total = () => [...model.values()].reduce((n, m) => n + m.size, 0);
    const outcomes = new Set<string>();
    for (let step = 0; step < 30_000; step++) {
      clock.advance(Math.floor(random() * 4));
      const now = clock.now();
      for (const [id, m] of model) {
        for (const [jti, until] of m) if (until <= now) m.delete(jti);
        if (m.size === 0) model.delete(id);
      }
      // Half of the traffic is one flooding identity, so both caps are reached.
      const id = random() < 0.5 ? 'agent:flood' : `agent:${Math.floor(random() * 12)}`;
      const jti = `j${Math.floor(random() * 100)}`;
      const until = now + Math.floor(random() * 2000) - 100;
      const mine = model.get(id);
      const existing = mine?.get(jti);
      let expected: string;
      if (mine !== undefined && existing !== undefined) {
        expected = 'replay';
        if (until > existing) mine.set(jti, until);
      } else if (until <= now) {
        expected = 'fresh';
      } else if (mine === undefined && total() >= Math.floor(MAX * NEW_IDENTITY_SHARE)) {
        expected = 'full';
      } else if (mine !== undefined && mine.size >= PER) {
        expected = 'identity_full';
      } else if (total() >= MAX) {
        expected = 'full';
      } else {
        expected = 'fresh';
        model.set(id, (mine ?? new Map<string, number>()).set(jti, until));
      }
      expect(cache.remember(id, jti, until)).toBe(expected);
      outcomes.add(expected);
      if (step % 97 === 0) {
        expect(cache.size).toBe(total());
        expect(cache.identities).toBe(model.size);
      }
    }
    // The walk reached every outcome, so each rule above was exercised.
    expect([...outcomes].sort()).toEqual(['fresh', 'full', 'identity_full', 'replay']);
  });
});

describe('ReplayCache: bounds (per identity and in total)', () => {
  const until = (clock: { now(): number }) => clock.now() + WINDOW_MS;

  it('a flooding identity hits its own cap first, and other identities are unaffected', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 1000, maxPerIdentity: 5 });
    for (let i = 0; i < 5; i++) expect(cache.remember('host:flood', `j${i}`, until(clock))).toBe('fresh');
    for (let i = 5; i < 50; i++) {
      expect(cache.remember('host:flood', `j${i}`, until(clock))).toBe('identity_full');
    }
    expect(cache.entriesOf('host:flood')).toBe(5);
    expect(cache.size).toBe(5);
    for (let i = 0; i < 5; i++) expect(cache.remember('agent:quiet', `j${i}`, until(clock))).toBe('fresh');
    // Its own entries are still caught as replays, not forgotten to make room.
    expect(cache.remember('host:flood', 'j0', until(clock))).toBe('replay');
  });

  it('when full, refuses new unknown identities and evicts nobody', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 100, maxPerIdentity: 10 });
    // 9 identities × 10 entries = 90 = the share open to new identities.
    for (let a = 0; a < 9; a++) {
      for (let i = 0; i < 10; i++) expect(cache.remember(`agent:${a}`, `j${i}`, until(clock))).toBe('fresh');
    }
    expect(cache.remember('host:stranger', 'j0', until(clock))).toBe('full');
    expect(cache.remember('agent:newcomer', 'j0', until(clock))).toBe('full');
    expect(cache.identities).toBe(9);
    for (let a = 0; a < 9; a++) {
      for (let i = 0; i < 10; i++) expect(cache.remember(`agent:${a}`, `j${i}`, until(clock))).toBe('replay');
    }
  });

  it('an identity that already has entries keeps working up to its own cap in the headroom', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 100, maxPerIdentity: 10 });
    expect(cache.remember('agent:known', 'j0', until(clock))).toBe('fresh');
    for (let i = 0; i < 89; i++) expect(cache.remember(`host:s${i}`, 'j', until(clock))).toBe('fresh');
    expect(cache.size).toBe(90);
    expect(cache.remember('host:one-more-stranger', 'j', until(clock))).toBe('full');
    for (let i = 1; i < 10; i++) expect(cache.remember('agent:known', `j${i}`, until(clock))).toBe('fresh');
    expect(cache.remember('agent:known', 'j10', until(clock))).toBe('identity_full');
    expect(cache.size).toBe(99);
  });

  it('never holds more than maxEntries, even when the identities already present fill the headroom', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 100, maxPerIdentity: 50 });
    for (let a = 0; a < 3; a++) {
      for (let i = 0; i < 30; i++) cache.remember(`agent:${a}`, `j${i}`, until(clock));
    }
    expect(cache.size).toBe(90);
    let kept = 0;
    for (let a = 0; a < 3; a++) {
      for (let i = 30; i < 50; i++)
        if (cache.remember(`agent:${a}`, `j${i}`, until(clock)) === 'fresh') kept++;
    }
    expect(kept).toBe(10);
    expect(cache.size).toBe(100);
    expect(cache.remember('agent:0', 'j-last', until(clock))).toBe('full');
  });

  it('makes room again once entries expire, and says when', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 10, maxPerIdentity: 2 });
    cache.remember('a', 'j1', clock.now() + 1500);
    cache.remember('a', 'j2', clock.now() + 5000);
    expect(cache.remember('a', 'j3', clock.now() + 5000)).toBe('identity_full');
    expect(cache.retryAfterSec('a')).toBe(2);
    clock.advance(1500);
    expect(cache.remember('a', 'j3', clock.now() + 5000)).toBe('fresh');
    expect(cache.remember('a', 'j2', clock.now() + 5000)).toBe('replay');
  });

  it('retryAfterSec for a full cache is the time until the next entry anywhere expires', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 2, maxPerIdentity: 2 });
    cache.remember('a', 'j1', clock.now() + 7200);
    cache.remember('a', 'j2', clock.now() + 90_000);
    expect(cache.remember('b', 'j1', clock.now() + 90_000)).toBe('full');
    expect(cache.retryAfterSec()).toBe(8);
  });

  it('has documented defaults: 200 000 entries, 2 000 per identity', () => {
    const cache = new ReplayCache(manualClock());
    expect(cache.maxEntries).toBe(DEFAULT_MAX_ENTRIES);
    expect(cache.maxPerIdentity).toBe(DEFAULT_MAX_PER_IDENTITY);
    expect([DEFAULT_MAX_ENTRIES, DEFAULT_MAX_PER_IDENTITY]).toEqual([200_000, 2_000]);
  });

  it('holds exactly maxEntries when filled by many identities, then refuses', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 100_000, maxPerIdentity: 200 });
    for (let a = 0; a < 900; a++) {
      for (let i = 0; i < 100; i++) cache.remember(`agent:${a}`, `j${i}`, until(clock));
    }
    expect(cache.size).toBe(90_000);
    expect(cache.remember('agent:new', 'j', until(clock))).toBe('full');
    for (let a = 0; a < 900; a++) cache.remember(`agent:${a}`, 'extra', until(clock));
    expect(cache.size).toBe(90_900);
  });

  it('purges without scanning everything on each call', () => {
    const clock = manualClock(0);
    const cache = new ReplayCache(clock, { maxEntries: 300_000, maxPerIdentity: 300_000 });
    // 200 000 long-lived entries that a per-call scan would walk every time (10^10 steps in all).
    for (let i = 0; i < 200_000; i++) cache.remember(`agent:${i % 1000}`, `live${i}`, 10_000_000 + i);
    const started = performance.now();
    let fresh = 0;
    for (let i = 0; i < 50_000; i++) {
      clock.advance(1);
      if (cache.remember('agent:short', `short${i}`, clock.now() + 100) === 'fresh') fresh++;
    }
    expect(performance.now() - started).toBeLessThan(5000);
    expect(fresh).toBe(50_000);
    expect(cache.size).toBe(200_000 + 100);
  });

  it.each([0, -1, 1.5, NaN])('rejects maxEntries %d', (maxEntries) => {
    expect(() => new ReplayCache(manualClock(), { maxEntries, maxPerIdentity: 1 })).toThrow(RangeError);
  });

  it.each([0, -1, 1.5, 11])('rejects maxPerIdentity %d (with maxEntries 10)', (maxPerIdentity) => {
    expect(() => new ReplayCache(manualClock(), { maxEntries: 10, maxPerIdentity })).toThrow(RangeError);
  });

  it('rejects a NaN expiry, which would corrupt the ordering', () => {
    expect(() => new ReplayCache(manualClock()).remember('id', 'k', NaN)).toThrow(RangeError);
  });
});

describe('ReplayCache: restore (replay across restarts)', () => {
  it('restore brings back live entries as replays, drops expired ones, and ignores the caps', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 2, maxPerIdentity: 1 });
    const now = clock.now();
    cache.restore([
      { identity: 'agent:a', jti: 'j1', untilMs: now + 1000 },
      { identity: 'agent:a', jti: 'j2', untilMs: now + 1000 },
      { identity: 'agent:b', jti: 'j1', untilMs: now + 5000 },
      { identity: 'agent:b', jti: 'j1', untilMs: now + 9000 },
      { identity: 'agent:c', jti: 'gone', untilMs: now },
    ]);
    expect(cache.size).toBe(3);
    expect(cache.remember('agent:a', 'j1', now + 1000)).toBe('replay');
    expect(cache.remember('agent:a', 'j2', now + 1000)).toBe('replay');
    expect(cache.remember('agent:c', 'gone', now + 1000)).toBe('full');
    clock.advance(5000);
    expect(cache.remember('agent:b', 'j1', now + 9000)).toBe('replay');
  });
});

describe('ReplayCache: check, then keep (a ledger records in between)', () => {
  it('check keeps nothing; keep remembers, extends, and ignores a closed window', () => {
    const clock = manualClock();
    const cache = new ReplayCache(clock, { maxEntries: 10, maxPerIdentity: 2 });
    const until = clock.now() + 1000;
    expect(cache.check('agent:a', 'j1', until)).toBe('fresh');
    expect(cache.check('agent:a', 'j1', until)).toBe('fresh');
    expect(cache.size).toBe(0);
    cache.keep('agent:a', 'j1', until);
    expect(cache.check('agent:a', 'j1', until)).toBe('replay');
    // A later-expiring token reusing the jti: a replay that is to be remembered longer.
    expect(cache.check('agent:a', 'j1', until + 500)).toBe('extend');
    cache.keep('agent:a', 'j1', until + 500);
    clock.advance(1200);
    expect(cache.check('agent:a', 'j1', until + 500)).toBe('replay');
    cache.keep('agent:b', 'old', clock.now());
    expect(cache.size).toBe(1);
    // The caps are check's answer, as remember's.
    cache.keep('agent:a', 'j2', clock.now() + 1000);
    expect(cache.check('agent:a', 'j3', clock.now() + 1000)).toBe('identity_full');
  });
});
