/**
 * `rate_limits` (§8.13): "COUNT/DURATION" strings → count + window, per-capability limits by
 * dimension, and the caps on upstream calls running at once (fair share between agents).
 */
import type { Catalog } from '../openapi/catalog.js';
import { parseDuration } from '../config/durations.js';
import type { Problems } from './problems.js';
import type {
  CapabilityRateLimits,
  InFlightLimits,
  Policy,
  RateLimitSpec,
} from '../protocol/resolved-policy.js';
import type { CapabilityRateLimitsFile, PolicyFile } from './types.js';

type Rate = (value: string | null | undefined, path: string) => RateLimitSpec | null;

export function resolveRateLimits(
  rl: PolicyFile['rate_limits'],
  catalog: Catalog,
  problems: Problems,
): Policy['rateLimits'] {
  const rate: Rate = (value, path) =>
    value === null || value === undefined ? null : parseRateLimit(value, path, problems);
  const perAgent = rate(rl.per_agent, 'rate_limits.per_agent');
  const perHost = rate(rl.per_host, 'rate_limits.per_host');
  const perUser = rate(rl.per_user, 'rate_limits.per_user');
  const perIp = rate(rl.per_ip, 'rate_limits.per_ip');
  const unknownHostRegistration = rate(rl.unknown_host_registration, 'rate_limits.unknown_host_registration');
  const failedAuthPerIp = rate(rl.failed_auth_per_ip, 'rate_limits.failed_auth_per_ip');
  const approvalRequestsPerUser = rate(
    rl.approval_requests_per_user,
    'rate_limits.approval_requests_per_user',
  );
  const perCapability = new Map<string, CapabilityRateLimits>();
  for (const [name, value] of Object.entries(rl.per_capability)) {
    const path = `rate_limits.per_capability.${name}`;
    if (!catalog.get(name)) {
      problems.add(
        path,
        `${JSON.stringify(name)} is not a capability name (per_capability takes exact names, not globs)`,
      );
      continue;
    }
    const limits = capabilityLimits(value, path, rate);
    if (limits) perCapability.set(name, limits);
  }
  const highRisk =
    rl.high_risk === undefined ? null : capabilityLimits(rl.high_risk, 'rate_limits.high_risk', rate);
  return Object.freeze({
    perAgent,
    perHost,
    perUser,
    perIp,
    unknownHostRegistration,
    approvalRequestsPerUser,
    failedAuthPerIp,
    perCapability,
    highRisk,
    inFlight: inFlightLimits(rl, problems),
  });
}

/**
 * §8.13 "high-risk capabilities SHOULD have tighter per-capability limits": `limits` with
 * `rate_limits.high_risk` set for each of `highRisk` that per_capability does not name. Applied
 * once the high-risk set is final (policy.ts: from the file, or derived from methods without one).
 */
export function withHighRiskLimits(
  limits: Policy['rateLimits'],
  highRisk: ReadonlySet<string>,
  file: PolicyFile['rate_limits'],
): Policy['rateLimits'] {
  const shared = limits.highRisk;
  if (shared === null) return limits;
  // Named in per_capability, even as null ("no limit"): that entry is the capability's own.
  const ownEntry = new Set(Object.keys(file.per_capability));
  const perCapability = new Map(limits.perCapability);
  for (const name of highRisk) if (!ownEntry.has(name)) perCapability.set(name, shared);
  return Object.freeze({ ...limits, perCapability });
}

/** A plain string keeps its old meaning: one bucket over all agents. null when nothing is limited. */
function capabilityLimits(
  value: CapabilityRateLimitsFile,
  path: string,
  rate: Rate,
): CapabilityRateLimits | null {
  const limits: CapabilityRateLimits =
    value === null || typeof value === 'string'
      ? { global: rate(value, path), perAgent: null, perHost: null, perUser: null }
      : {
          global: rate(value.global, `${path}.global`),
          perAgent: rate(value.per_agent, `${path}.per_agent`),
          perHost: rate(value.per_host, `${path}.per_host`),
          perUser: rate(value.per_user, `${path}.per_user`),
        };
  return Object.values(limits).some((l) => l !== null) ? Object.freeze(limits) : null;
}

/**
 * A narrower cap larger than a wider one never binds (the wider one is hit first), which is
 * almost certainly not what the operator meant: refused rather than silently ignored.
 */
function inFlightLimits(rl: PolicyFile['rate_limits'], problems: Problems): InFlightLimits {
  const perAgent = rl.in_flight_per_agent;
  const perHost = rl.in_flight_per_host;
  const total = rl.in_flight_total;
  const wider: [string, number | null, string, number | null][] = [
    ['in_flight_per_agent', perAgent, 'in_flight_per_host', perHost],
    ['in_flight_per_agent', perAgent, 'in_flight_total', total],
    ['in_flight_per_host', perHost, 'in_flight_total', total],
  ];
  for (const [narrowKey, narrow, wideKey, wide] of wider) {
    if (narrow !== null && wide !== null && narrow > wide) {
      problems.add(
        `rate_limits.${narrowKey}`,
        `must not exceed rate_limits.${wideKey} (${wide}), which would be reached first (got ${narrow})`,
      );
    }
  }
  return Object.freeze({ perAgent, perHost, total });
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
