/**
 * Keys from JWKS URLs, kept in memory per URL so that the hot path never fetches (§10.4): a set
 * is fresh for its Cache-Control max-age clamped to [5 min, 24 h] (§8.12), a `kid` miss refreshes
 * at most once per `refreshIntervalMs` per URL (§8.7 rotation without cache-busting), and when the
 * URL fails the last good keys stay in use (§10.4) while retries stay bounded the same way.
 */
import type { Clock } from '../../clock.js';
import { thumbprint, type Ed25519PublicJwk } from '../keys.js';
import type { FetchedDocument } from './fetch.js';
import { JwksFetchError } from './fetch.js';
import { JwksContentError, parseJwks } from './parse.js';

export const CACHE_MIN_MS = 5 * 60_000;
export const CACHE_MAX_MS = 24 * 60 * 60_000;
/** Enough for every registered host and agent of a sidecar; the oldest URL is dropped beyond. */
const MAX_URLS = 10_000;
// Fetches in flight at once, whoever asked: each holds a socket, a DNS query and up to the size
// cap; strangers' registrations (each may name a URL) would otherwise start any number. Past it
// a key is refused for now, and the URL is not marked as tried, so it is fetched on the next ask.
export const MAX_FETCHES_AT_ONCE = 32;

/** §8.12: max-age within [5 min, 24 h]; no max-age (or no-store, no-cache) means the minimum. */
export function cacheTtlMs(cacheControl: string | undefined): number {
  if (cacheControl === undefined) return CACHE_MIN_MS;
  const directives = cacheControl
    .toLowerCase()
    .split(',')
    .map((d) => d.trim());
  if (directives.some((d) => d === 'no-store' || d === 'no-cache')) return CACHE_MIN_MS;
  const maxAge = directives.map((d) => /^max-age="?(\d+)"?$/.exec(d)?.[1]).find((v) => v !== undefined);
  if (maxAge === undefined) return CACHE_MIN_MS;
  return Math.min(CACHE_MAX_MS, Math.max(CACHE_MIN_MS, Number(maxAge) * 1000));
}

/** The URL cannot give a key for this `kid`: the message is safe to show the client. */
export class JwksKeyError extends Error {}

interface Entry {
  keys: ReadonlyMap<string, Ed25519PublicJwk> | undefined;
  freshUntil: number;
  lastAttemptAt: number;
  lastError: string | undefined;
  inFlight: Promise<void> | undefined;
}

export interface JwksCacheOptions {
  readonly clock: Clock;
  readonly fetch: (url: string) => Promise<FetchedDocument>;
  /** The least time between two fetches of one URL outside its TTL expiry (kid miss, failure). */
  readonly refreshIntervalMs: number;
}

export class JwksCache {
  private readonly entries = new Map<string, Entry>();
  /** Refreshes in flight (MAX_FETCHES_AT_ONCE). */
  private fetching = 0;

  constructor(private readonly options: JwksCacheOptions) {}

  /** The key for `kid` at `url`, fetching only when the set is stale or misses the kid (bounded). */
  async key(url: string, kid: string): Promise<Ed25519PublicJwk> {
    const key = await this.find(url, (keys) => keys.get(kid));
    if (key) return key;
    throw new JwksKeyError(`the JWKS at the URL has no Ed25519 key with kid ${JSON.stringify(kid)}`);
  }

  /**
   * Whether a key of the set at `url` has the RFC 7638 thumbprint `tp` (an agent JWT's `iss` while
   * its JWKS-based host rotates, §4.5 step 4), fetching as `key` does when the set misses it.
   */
  async hasThumbprint(url: string, tp: string): Promise<boolean> {
    const found = await this.find(url, async (keys) => {
      for (const key of keys.values()) if ((await thumbprint(key)) === tp) return true;
      return undefined;
    });
    return found === true;
  }

  /**
   * What `match` finds in the set at `url`: in the cached set when it is fresh, else (or on a miss)
   * in the set fetched again, at most once per `refreshIntervalMs` per URL. Throws JwksKeyError
   * when the URL never gave a set.
   */
  private async find<T>(
    url: string,
    match: (keys: ReadonlyMap<string, Ed25519PublicJwk>) => T | undefined | Promise<T | undefined>,
  ): Promise<T | undefined> {
    const now = this.options.clock.now();
    let entry = this.entries.get(url);
    if (!entry) {
      entry = {
        keys: undefined,
        freshUntil: 0,
        lastAttemptAt: -Infinity,
        lastError: undefined,
        inFlight: undefined,
      };
      if (this.entries.size >= MAX_URLS) this.evictOne();
      this.entries.set(url, entry);
    }
    const fresh = now < entry.freshUntil;
    if (fresh && entry.keys) {
      const hit = await match(entry.keys);
      if (hit !== undefined) return hit;
    }
    if (entry.inFlight) {
      await entry.inFlight;
    } else if (now - entry.lastAttemptAt >= this.options.refreshIntervalMs) {
      if (this.fetching >= MAX_FETCHES_AT_ONCE) {
        // §10.4: the last good keys stay in use while a fresh copy cannot be had, here because
        // other URLs (strangers' slow ones, or many sets expiring together) hold every slot.
        if (entry.keys !== undefined) return match(entry.keys);
        throw new JwksKeyError('too many JWKS URLs are being fetched at once; retry in a few seconds');
      }
      this.fetching += 1;
      entry.inFlight = this.refresh(url, entry).finally(() => {
        this.fetching -= 1;
        if (entry) entry.inFlight = undefined;
      });
      await entry.inFlight;
    }
    if (entry.keys === undefined) {
      throw new JwksKeyError(`the JWKS URL gives no keys: ${entry.lastError ?? 'not fetched yet'}`);
    }
    return match(entry.keys);
  }

  /**
   * Makes room for one more URL: the oldest that never gave keys (strangers' URLs that failed)
   * before any that did, so a flood of bad URLs does not push out the last good keys (§10.4).
   */
  private evictOne(): void {
    for (const [url, entry] of this.entries) {
      if (entry.keys === undefined && entry.inFlight === undefined) {
        this.entries.delete(url);
        return;
      }
    }
    this.entries.delete(this.entries.keys().next().value ?? '');
  }

  private async refresh(url: string, entry: Entry): Promise<void> {
    entry.lastAttemptAt = this.options.clock.now();
    try {
      const document = await this.options.fetch(url);
      entry.keys = parseJwks(document.body);
      entry.freshUntil = this.options.clock.now() + cacheTtlMs(document.cacheControl);
      entry.lastError = undefined;
    } catch (err) {
      if (!(err instanceof JwksFetchError || err instanceof JwksContentError)) throw err;
      // §10.4: the last good keys (if any) stay; the next attempt waits refreshIntervalMs.
      entry.lastError = err.message;
    }
  }
}
