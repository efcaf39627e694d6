/**
 * The limit steps (§8.13). `perIp` is the cheap first step of unauthenticated endpoints;
 * `principalLimits` runs right after a token is verified, before anything is recorded for it.
 * Each is synchronous on this process's limiter, one round trip on the replicas' (http/rate-limits.ts).
 */
import { step, type SharedStep } from '../pipeline.js';
import { isUnapproved } from '../../protocol/pending-hosts.js';
import type { RateLimits } from '../rate-limits.js';

/** The per-IP budget of endpoints anyone may call without a token. */
export function perIp(limits: RateLimits): SharedStep {
  return step('ip-limit', (x) => limits.ip(x.clientIp));
}

/**
 * The verified principal's budgets: agent (and its host and user), or host. A host nobody has
 * approved, and its agents, are charged to their client IP as well; a host the server has never seen to its client IP
 * alone, and its registrations to their own tighter per-IP bucket. With no token, the per-IP one.
 */
export function principalLimits(limits: RateLimits, unknownHost: 'registration' | 'ip' = 'ip'): SharedStep {
  return step('principal-limits', (x) => {
    if (x.agent) {
      const { agent, host } = x.agent;
      return isUnapproved(host)
        ? limits.unapprovedAgent(agent.id, host.id, agent.userId, x.clientIp)
        : limits.agent(agent.id, host.id, agent.userId);
    }
    if (x.host?.host) {
      const host = x.host.host;
      return isUnapproved(host) ? limits.unapprovedHost(host.id, x.clientIp) : limits.host(host.id);
    }
    if (x.host && unknownHost === 'registration') return limits.unknownHostRegistration(x.clientIp);
    return limits.ip(x.clientIp);
  });
}
