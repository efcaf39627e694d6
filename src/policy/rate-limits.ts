/** `rate_limits` (§8.13): "COUNT/DURATION" strings → count + window. */
import type { Catalog } from '../openapi/catalog.js';
import { parseDuration } from '../protocol/durations.js';
import type { Problems } from './problems.js';
import type { Policy, PolicyFile, RateLimitSpec } from './types.js';

export function resolveRateLimits(
  rl: PolicyFile['rate_limits'],
  catalog: Catalog,
  problems: Problems,
): Policy['rateLimits'] {
  const rate = (value: string | null, path: string): RateLimitSpec | null =>
    value === null ? null : parseRateLimit(value, path, problems);
  const perAgent = rate(rl.per_agent, 'rate_limits.per_agent');
  const perHost = rate(rl.per_host, 'rate_limits.per_host');
  const perUser = rate(rl.per_user, 'rate_limits.per_user');
  const perIp = rate(rl.per_ip, 'rate_limits.per_ip');
  const unknownHostRegistration = rate(rl.unknown_host_registration, 'rate_limits.unknown_host_registration');
  const perCapability = new Map<string, RateLimitSpec>();
  for (const [name, value] of Object.entries(rl.per_capability)) {
    const path = `rate_limits.per_capability.${name}`;
    if (!catalog.get(name)) {
      problems.add(
        path,
        `${JSON.stringify(name)} is not a capability name (per_capability takes exact names, not globs)`,
      );
      continue;
    }
    const spec = rate(value, path);
    if (spec) perCapability.set(name, spec);
  }
  return Object.freeze({
    perAgent,
    perHost,
    perUser,
    perIp,
    unknownHostRegistration,
    perCapability,
  });
}

/** `"60/1m"` → 60 per 60000 ms. The schema already checked the shape. */
export function parseRateLimit(value: string, path: string, problems: Problems): RateLimitSpec | null {
  const where = `${problems.file}: ${path}`;
  const match = /^(\d+)\/(.+)$/.exec(value);
  const count = Number(match?.[1]);
  const window = match?.[2];
  if (window === undefined || !Number.isSafeInteger(count) || count < 1) {
    problems.addLine(
      `${where}: must be a rate limit "COUNT/DURATION" with COUNT >= 1, e.g. "60/1m" (got ${JSON.stringify(value)})`,
    );
    return null;
  }
  const windowMs = problems.catching(() => parseDuration(window, where), null);
  if (windowMs === null) return null;
  if (windowMs < 1000) {
    problems.addLine(`${where}: the window must be at least 1s (got ${JSON.stringify(value)})`);
    return null;
  }
  return Object.freeze({ count, windowMs });
}
