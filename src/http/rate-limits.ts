/**
 * §8.13 rate limiting at the HTTP edge: per IP for unauthenticated endpoints (with a tighter
 * bucket for registrations from unknown hosts), per agent, host and user once authenticated.
 * Over a limit → `429 rate_limited` with `Retry-After`.
 */
import type { IncomingMessage } from 'node:http';
import { ProtocolError } from '../errors.js';
import type { Policy, RateLimitSpec } from '../policy/policy.js';
import type { RateLimiter } from '../protocol/rate-limit.js';

export class RateLimits {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: Policy['rateLimits'],
  ) {}

  private take(key: string, spec: RateLimitSpec | null, who: string): void {
    if (!spec) return;
    const result = this.limiter.take(key, spec);
    if (!result.ok) {
      throw new ProtocolError(
        'rate_limited',
        `${who} exceeded ${spec.count} requests per ${Math.round(spec.windowMs / 1000)} s.`,
        { headers: { 'retry-after': String(result.retryAfterSec) } },
      );
    }
  }

  ip(req: IncomingMessage): void {
    const ip = clientIp(req);
    this.take(`ip:${ip}`, this.limits.perIp, `Client ${ip}`);
  }

  unknownHostRegistration(req: IncomingMessage): void {
    const ip = clientIp(req);
    this.take(`reg:${ip}`, this.limits.unknownHostRegistration, `Registrations of new hosts from ${ip}`);
  }

  host(hostId: string): void {
    this.take(`host:${hostId}`, this.limits.perHost, `Host ${hostId}`);
  }

  agent(agentId: string, hostId: string, userId: string | null): void {
    this.take(`agent:${agentId}`, this.limits.perAgent, `Agent ${agentId}`);
    this.host(hostId);
    if (userId !== null) this.take(`user:${userId}`, this.limits.perUser, `User ${userId}`);
  }

  capability(name: string): void {
    this.take(`cap:${name}`, this.limits.perCapability.get(name) ?? null, `Capability ${name}`);
  }
}

/** The socket's address: forwarded headers are client-controlled and not trusted here. */
export function clientIp(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? 'unknown';
}
