import { describe, expect, it } from 'vitest';
import {
  CACHE_MAX_MS,
  CACHE_MIN_MS,
  cacheTtlMs,
  JwksCache,
  JwksKeyError,
  MAX_FETCHES_AT_ONCE,
} from '../../../../src/protocol/jwks/cache.js';
import { JwksFetchError, type FetchedDocument } from '../../../../src/protocol/jwks/fetch.js';
import { thumbprint } from '../../../../src/protocol/keys.js';
import { generateTestKey } from '../../../helpers/keys.js';
import { TestClock } from '../../../helpers/protocol.js';

describe('JWKS cache TTL (§8.12: 5 min to 24 h)', () => {
  it.each([
    [undefined, CACHE_MIN_MS],
    ['max-age=60', CACHE_MIN_MS],
    ['public, max-age=3600', 3_600_000],
    ['max-age=604800', CACHE_MAX_MS],
    ['no-store', CACHE_MIN_MS],
    ['no-cache, max-age=3600', CACHE_MIN_MS],
    ['private', CACHE_MIN_MS],
  ])('%s → %d ms', (header, ttl) => {
    expect(cacheTtlMs(header)).toBe(ttl);
  });
});

describe('JWKS cache', () => {
  async function setup() {
    const clock = new TestClock(1_000_000);
    const a = { ...(await generateTestKey()).publicJwk, kid: 'a' };
    const b = { ...(await generateTestKey()).publicJwk, kid: 'b' };
    let document: FetchedDocument | Error = { body: { keys: [a] }, cacheControl: undefined };
    let fetches = 0;
    const cache = new JwksCache({
      clock,
      refreshIntervalMs: 30_000,
      fetch: () => {
        fetches += 1;
        return document instanceof Error ? Promise.reject(document) : Promise.resolve(document);
      },
    });
    return {
      clock,
      a,
      b,
      cache,
      fetches: () => fetches,
      serve: (d: FetchedDocument | Error) => {
        document = d;
      },
    };
  }
  const url = 'https://keys.example/jwks.json';

  it('serves hits from memory until the TTL ends', async () => {
    const t = await setup();
    expect((await t.cache.key(url, 'a')).x).toBe(t.a.x);
    await t.cache.key(url, 'a');
    expect(t.fetches()).toBe(1);
    t.clock.advance(CACHE_MIN_MS);
    await t.cache.key(url, 'a');
    expect(t.fetches()).toBe(2);
  });

  it('refreshes on a kid miss at most once per interval (§8.7)', async () => {
    const t = await setup();
    await t.cache.key(url, 'a');
    t.clock.advance(30_000);
    await expect(t.cache.key(url, 'b')).rejects.toThrow(JwksKeyError);
    await expect(t.cache.key(url, 'b')).rejects.toThrow(/no Ed25519 key with kid "b"/);
    expect(t.fetches()).toBe(2);
    t.serve({ body: { keys: [t.a, t.b] }, cacheControl: undefined });
    await expect(t.cache.key(url, 'b')).rejects.toThrow(JwksKeyError);
    t.clock.advance(30_000);
    expect((await t.cache.key(url, 'b')).x).toBe(t.b.x);
    expect(t.fetches()).toBe(3);
  });

  it('finds a key by its thumbprint, refreshing on a miss at most once per interval (§4.5 step 4)', async () => {
    const t = await setup();
    const [tpA, tpB] = await Promise.all([thumbprint(t.a), thumbprint(t.b)]);
    expect(await t.cache.hasThumbprint(url, tpA)).toBe(true);
    t.serve({ body: { keys: [t.a, t.b] }, cacheControl: undefined });
    // The set is fresh and the interval has not passed: no fetch, so b's thumbprint is unknown yet.
    expect(await t.cache.hasThumbprint(url, tpB)).toBe(false);
    expect(t.fetches()).toBe(1);
    t.clock.advance(30_000);
    expect(await t.cache.hasThumbprint(url, tpB)).toBe(true);
    expect(await t.cache.hasThumbprint(url, 'not-a-thumbprint')).toBe(false);
    expect(t.fetches()).toBe(2);
  });

  it('drops a removed key at the next refresh', async () => {
    const t = await setup();
    await t.cache.key(url, 'a');
    t.serve({ body: { keys: [t.b] }, cacheControl: undefined });
    t.clock.advance(CACHE_MIN_MS);
    await expect(t.cache.key(url, 'a')).rejects.toThrow(JwksKeyError);
  });

  it('keeps the last good keys when the URL fails (§10.4), retrying at a bounded rate', async () => {
    const t = await setup();
    await t.cache.key(url, 'a');
    t.serve(new JwksFetchError('down'));
    t.clock.advance(CACHE_MIN_MS);
    expect((await t.cache.key(url, 'a')).x).toBe(t.a.x);
    expect((await t.cache.key(url, 'a')).x).toBe(t.a.x);
    expect(t.fetches()).toBe(2);
  });

  it('says why when there were never keys (§10.4 clear error)', async () => {
    const t = await setup();
    t.serve(new JwksFetchError('the JWKS URL answered HTTP 500'));
    await expect(t.cache.key(url, 'a')).rejects.toThrow(/gives no keys: the JWKS URL answered HTTP 500/);
  });

  it('refuses an invalid document without discarding good keys', async () => {
    const t = await setup();
    await t.cache.key(url, 'a');
    t.serve({ body: { keys: [{ ...t.a, d: 'x' }] }, cacheControl: undefined });
    t.clock.advance(CACHE_MIN_MS);
    expect((await t.cache.key(url, 'a')).x).toBe(t.a.x);
  });
});

describe('JWKS cache bounds (strangers may name any URL)', () => {
  /**
   * A cache whose fetches of URLs ending in /slow wait until `release` answers them all; other
   * URLs answer at once. All serve one key, kid "a".
   */
  async function slowSlots(clock = new TestClock(1_000_000)) {
    const key = { ...(await generateTestKey()).publicJwk, kid: 'a' };
    const waiting: (() => void)[] = [];
    const cache = new JwksCache({
      clock,
      refreshIntervalMs: 30_000,
      fetch: (u) =>
        u.endsWith('/slow')
          ? new Promise<FetchedDocument>((done) =>
              waiting.push(() => done({ body: { keys: [key] }, cacheControl: undefined })),
            )
          : Promise.resolve({ body: { keys: [key] }, cacheControl: undefined }),
    });
    const takeEverySlot = () =>
      Array.from({ length: MAX_FETCHES_AT_ONCE }, (_, i) => cache.key(`https://s${i}.example/slow`, 'a'));
    return { key, cache, waiting, takeEverySlot };
  }

  it(`at most ${MAX_FETCHES_AT_ONCE} fetches at once: the next URL is refused for now, not marked as tried`, async () => {
    const { key, cache, waiting, takeEverySlot } = await slowSlots();
    const slow = takeEverySlot();
    await expect(cache.key('https://fine.example/jwks', 'a')).rejects.toThrow(/too many JWKS URLs/);
    waiting.shift()?.();
    await slow[0];
    // Refused before, not counted as an attempt: fetched now, without waiting out the interval.
    expect((await cache.key('https://fine.example/jwks', 'a')).x).toBe(key.x);
    for (const done of waiting) done();
    await Promise.all(slow);
  });

  it('while every fetch slot is taken, a URL past its TTL keeps its last good keys (§10.4)', async () => {
    const clock = new TestClock(1_000_000);
    const { key, cache, waiting, takeEverySlot } = await slowSlots(clock);
    await cache.key('https://good-host.example/jwks', 'a');
    clock.advance(CACHE_MIN_MS + 1);
    const slow = takeEverySlot();
    expect((await cache.key('https://good-host.example/jwks', 'a')).x).toBe(key.x);
    for (const done of waiting) done();
    await Promise.all(slow);
  });

  it('a flood of failing URLs does not push out a URL that gave keys', async () => {
    const key = { ...(await generateTestKey()).publicJwk, kid: 'a' };
    let goodFetches = 0;
    const cache = new JwksCache({
      clock: new TestClock(1_000_000),
      refreshIntervalMs: 30_000,
      fetch: (u) => {
        if (u === 'https://good.example/jwks') {
          goodFetches += 1;
          return Promise.resolve({ body: { keys: [key] }, cacheControl: undefined });
        }
        return Promise.reject(new JwksFetchError('HTTP 404'));
      },
    });
    await cache.key('https://good.example/jwks', 'a');
    for (let i = 0; i < 10_050; i += 1) {
      await expect(cache.key(`https://bad${i}.example/jwks`, 'a')).rejects.toThrow(JwksKeyError);
    }
    expect((await cache.key('https://good.example/jwks', 'a')).x).toBe(key.x);
    expect(goodFetches).toBe(1);
  });
});
