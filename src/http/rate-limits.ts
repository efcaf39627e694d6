/**
 * §8.13 rate limiting at the HTTP edge: per client IP for unauthenticated endpoints (with a
 * tighter bucket for registrations from unknown hosts), per agent, host and user once
 * authenticated, and a per-IP budget of failed authentications that is checked before any
 * signature is verified, so forged tokens cost a stranger more than they cost the proxy.
 * Over a limit → `429 rate_limited` with `Retry-After`.
 *
 * The budgets are the Limiter's: shared by every replica on PostgreSQL (one round trip per limit
 * step, however many buckets it takes), this process's own on SQLite (synchronous). The failed
 * authentications are always this process's own: that budget guards this process's CPU against
 * signature floods, is checked before every verification, and costs no round trip.
 */
import { ProtocolError } from '../errors.js';
import type { Policy, RateLimitSpec } from '../policy/policy.js';
import type { Limiter, RateLimiter, RateVerdict } from '../util/rate-limit.js';
import type { LimitName } from '../metrics.js';

/** One budget a request takes from: its key, its limit (null: off), whom the refusal names. */
type Budget = readonly [key: string, spec: RateLimitSpec | null, who: string, limit: LimitName];

export class RateLimits {
  constructor(
    private readonly limiter: Limiter,
    /** Failed authentications per IP: this process's own (see above). */
    private readonly failures: RateLimiter,
    private readonly limits: Policy['rateLimits'],
    /** Told which limit refused a request (the rate_limited_total metric). */
    private readonly onRefused: (limit: LimitName) => void = () => {},
  ) {}

  /** Takes from each budget in order, stopping at the first that refuses (Limiter.take). */
  private take(budgets: readonly Budget[]): void | Promise<void> {
    const on = budgets.filter((b): b is readonly [string, RateLimitSpec, string, LimitName] => b[1] !== null);
    if (on.length === 0) return;
    const verdict = this.limiter.take(on.map(([key, limit]) => ({ key, limit })));
    if (verdict instanceof Promise) return verdict.then((v) => this.settle(v, on));
    this.settle(verdict, on);
  }

  private settle(
    verdict: RateVerdict,
    budgets: readonly (readonly [string, RateLimitSpec, string, LimitName])[],
  ): void {
    if (verdict.ok) return;
    const [, spec, who, limit] = budgets[verdict.refused] as (typeof budgets)[number];
    this.onRefused(limit);
    throw limited(spec, who, verdict.retryAfterSec);
  }

  ip(ip: string): void | Promise<void> {
    return this.take([[`ip:${ip}`, this.limits.perIp, `Client ${ip}`, 'per_ip']]);
  }

  unknownHostRegistration(ip: string): void | Promise<void> {
    return this.take([
      [
        `reg:${ip}`,
        this.limits.unknownHostRegistration,
        `Registrations of new hosts from ${ip}`,
        'unknown_host_registration',
      ],
    ]);
  }

  /** Refuses a client that has used up its failed-authentication budget (nothing is charged). */
  authFailuresLeft(ip: string): void {
    const spec = this.limits.failedAuthPerIp;
    if (!spec) return;
    const result = this.failures.check(`authfail:${ip}`, spec);
    if (!result.ok) {
      this.onRefused('failed_auth_per_ip');
      throw new ProtocolError(
        'rate_limited',
        `Too many failed authentications from ${ip}; retry in ${result.retryAfterSec} s.`,
        { headers: { 'retry-after': String(result.retryAfterSec) } },
      );
    }
  }

  /** Charges one failed authentication to the client. */
  authFailed(ip: string): void {
    const spec = this.limits.failedAuthPerIp;
    if (spec) this.failures.take(`authfail:${ip}`, spec);
  }

  host(hostId: string): void | Promise<void> {
    return this.take([[`host:${hostId}`, this.limits.perHost, `Host ${hostId}`, 'per_host']]);
  }

  agent(agentId: string, hostId: string, userId: string | null): void | Promise<void> {
    return this.take([
      [`agent:${agentId}`, this.limits.perAgent, `Agent ${agentId}`, 'per_agent'],
      [`host:${hostId}`, this.limits.perHost, `Host ${hostId}`, 'per_host'],
      ...(userId !== null
        ? [[`user:${userId}`, this.limits.perUser, `User ${userId}`, 'per_user'] as const]
        : []),
    ]);
  }

  /**
   * Executions of one capability (policy `rate_limits.per_capability`). The narrowest bucket is
   * taken first, so an agent refused by its own limit does not also drain the buckets it shares
   * with others (host, user, everyone).
   */
  capability(name: string, agentId: string, hostId: string, userId: string | null): void | Promise<void> {
    const limits = this.limits.perCapability.get(name);
    if (!limits) return;
    const per = 'per_capability';
    return this.take([
      [`cap:${name}:agent:${agentId}`, limits.perAgent, `Agent ${agentId} on ${name}`, per],
      [`cap:${name}:host:${hostId}`, limits.perHost, `Host ${hostId} on ${name}`, per],
      ...(userId !== null
        ? [[`cap:${name}:user:${userId}`, limits.perUser, `User ${userId} on ${name}`, per] as const]
        : []),
      [`cap:${name}`, limits.global, `Capability ${name}`, per],
    ]);
  }
}

function limited(spec: RateLimitSpec, who: string, retryAfterSec: number): ProtocolError {
  return new ProtocolError(
    'rate_limited',
    `${who} exceeded ${spec.count} requests per ${Math.round(spec.windowMs / 1000)} s.`,
    { headers: { 'retry-after': String(retryAfterSec) } },
  );
}
