/**
 * §8.13 rate limiting at the HTTP edge: per client IP for unauthenticated endpoints (with a
 * tighter bucket for registrations from unknown hosts), per agent, host and user once
 * authenticated, and a per-IP budget of failed authentications that is checked before any
 * signature is verified, so forged tokens cost a stranger more than they cost the proxy.
 * Over a limit → `429 rate_limited` with `Retry-After`.
 */
import { ProtocolError } from '../errors.js';
import type { Policy, RateLimitSpec } from '../policy/policy.js';
import type { RateLimiter } from '../util/rate-limit.js';
import type { LimitName } from '../metrics.js';

export class RateLimits {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: Policy['rateLimits'],
    /** Told which limit refused a request (the rate_limited_total metric). */
    private readonly onRefused: (limit: LimitName) => void = () => {},
  ) {}

  private take(key: string, spec: RateLimitSpec | null, who: string, limit: LimitName): void {
    if (!spec) return;
    const result = this.limiter.take(key, spec);
    if (result.ok) return;
    this.onRefused(limit);
    throw limited(spec, who, result.retryAfterSec);
  }

  ip(ip: string): void {
    this.take(`ip:${ip}`, this.limits.perIp, `Client ${ip}`, 'per_ip');
  }

  unknownHostRegistration(ip: string): void {
    this.take(
      `reg:${ip}`,
      this.limits.unknownHostRegistration,
      `Registrations of new hosts from ${ip}`,
      'unknown_host_registration',
    );
  }

  /** Refuses a client that has used up its failed-authentication budget (nothing is charged). */
  authFailuresLeft(ip: string): void {
    const spec = this.limits.failedAuthPerIp;
    if (!spec) return;
    const result = this.limiter.check(`authfail:${ip}`, spec);
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
    if (spec) this.limiter.take(`authfail:${ip}`, spec);
  }

  host(hostId: string): void {
    this.take(`host:${hostId}`, this.limits.perHost, `Host ${hostId}`, 'per_host');
  }

  agent(agentId: string, hostId: string, userId: string | null): void {
    this.take(`agent:${agentId}`, this.limits.perAgent, `Agent ${agentId}`, 'per_agent');
    this.host(hostId);
    if (userId !== null) this.take(`user:${userId}`, this.limits.perUser, `User ${userId}`, 'per_user');
  }

  /**
   * Executions of one capability (policy `rate_limits.per_capability`). The narrowest bucket is
   * taken first, so an agent refused by its own limit does not also drain the buckets it shares
   * with others (host, user, everyone).
   */
  capability(name: string, agentId: string, hostId: string, userId: string | null): void {
    const limits = this.limits.perCapability.get(name);
    if (!limits) return;
    const per = 'per_capability';
    this.take(`cap:${name}:agent:${agentId}`, limits.perAgent, `Agent ${agentId} on ${name}`, per);
    this.take(`cap:${name}:host:${hostId}`, limits.perHost, `Host ${hostId} on ${name}`, per);
    if (userId !== null)
      this.take(`cap:${name}:user:${userId}`, limits.perUser, `User ${userId} on ${name}`, per);
    this.take(`cap:${name}`, limits.global, `Capability ${name}`, per);
  }
}

function limited(spec: RateLimitSpec, who: string, retryAfterSec: number): ProtocolError {
  return new ProtocolError(
    'rate_limited',
    `${who} exceeded ${spec.count} requests per ${Math.round(spec.windowMs / 1000)} s.`,
    { headers: { 'retry-after': String(retryAfterSec) } },
  );
}
