/**
 * The one JWKS key source of a proxy: settings → address guard, guarded fetch and cache, built
 * once at start-up (a bad allow-list entry stops it there).
 */
import type { Clock } from '../../clock.js';
import type { JwksSettings } from '../../config/jwks.js';
import { createAddressGuard } from './address-guard.js';
import { JwksCache } from './cache.js';
import { fetchJwksDocument, type JwksFetchOptions } from './fetch.js';

export { JwksCache, JwksKeyError } from './cache.js';

export function createJwksCache(
  settings: JwksSettings,
  clock: Clock,
  resolve?: JwksFetchOptions['resolve'],
): JwksCache {
  const options: JwksFetchOptions = {
    guard: createAddressGuard(settings.allowedCidrs),
    allowHttp: settings.allowHttp,
    timeoutMs: settings.timeoutMs,
    maxBytes: settings.maxBytes,
    ...(settings.ca !== undefined ? { ca: settings.ca } : {}),
    ...(resolve !== undefined ? { resolve } : {}),
  };
  return new JwksCache({
    clock,
    fetch: (url) => fetchJwksDocument(url, options),
    refreshIntervalMs: settings.refreshIntervalMs,
  });
}
