/** `approval` and `lifetimes`: how users approve (§7) and the clocks agents and JWTs live by (§2.4, §8.2). */
import type { Problems } from './problems.js';
import type { Policy } from '../protocol/resolved-policy.js';
import type { PolicyFile } from './types.js';
import { MAX_CLOCK_SKEW_MS } from '../protocol/jwt.js';

export { MAX_CLOCK_SKEW_MS };

export function resolveApproval(approval: PolicyFile['approval'], problems: Problems): Policy['approval'] {
  const expiresInMs = problems.duration(approval.expires_in, 'approval.expires_in', 1000);
  const intervalMs = problems.duration(approval.interval, 'approval.interval', 1000);
  const perCallExpiresInMs = problems.duration(
    approval.per_call_expires_in,
    'approval.per_call_expires_in',
    1000,
  );
  if (intervalMs > expiresInMs) {
    problems.add(
      'approval.interval',
      `must not exceed approval.expires_in (${JSON.stringify(approval.expires_in)})`,
    );
  }
  if (approval.verification_uri !== null && !isWebUrl(approval.verification_uri)) {
    problems.add(
      'approval.verification_uri',
      'must be an absolute http(s) URL without a fragment (users are sent there with ?code=…)',
    );
  }
  if (approval.methods.includes('ciba') && approval.approvers.length === 0) {
    problems.add(
      'approval.approvers',
      'must list at least one user when approval.methods includes "ciba" (CIBA only ever reaches a listed approver)',
    );
  }
  return Object.freeze({
    methods: Object.freeze([...approval.methods]),
    expiresInMs,
    intervalMs,
    approvers: Object.freeze([...approval.approvers]),
    verificationUri: approval.verification_uri,
    requirePresence: approval.require_presence,
    warnNames: Object.freeze([...approval.warn_names]),
    perCallExpiresInMs,
    perCallMaxResultBytes: approval.per_call_max_result_bytes,
  });
}

/** `approval` is the resolved approval: pending cleanup must outlast an open approval. */
export function resolveLifetimes(
  raw: PolicyFile,
  approval: Policy['approval'],
  problems: Problems,
): Policy['lifetimes'] {
  const { lifetimes } = raw;
  const sessionTtlMs = problems.optionalDuration(lifetimes.session_ttl, 'lifetimes.session_ttl');
  const maxLifetimeMs = problems.optionalDuration(lifetimes.max_lifetime, 'lifetimes.max_lifetime');
  const absoluteLifetimeMs = problems.optionalDuration(
    lifetimes.absolute_lifetime,
    'lifetimes.absolute_lifetime',
  );
  const maxJwtLifetimeMs = problems.duration(lifetimes.max_jwt_lifetime, 'lifetimes.max_jwt_lifetime', 1000);
  const clockSkewMs = problems.duration(lifetimes.clock_skew, 'lifetimes.clock_skew', 0);
  if (clockSkewMs > MAX_CLOCK_SKEW_MS) {
    problems.add(
      'lifetimes.clock_skew',
      `must be at most 30s: servers tolerate no more than 30 seconds of clock skew (§8.2) (got ${JSON.stringify(lifetimes.clock_skew)})`,
    );
  }
  const pendingCleanupMs = problems.duration(lifetimes.pending_cleanup, 'lifetimes.pending_cleanup', 1000);
  if (pendingCleanupMs < approval.expiresInMs) {
    problems.add(
      'lifetimes.pending_cleanup',
      `must be at least approval.expires_in (${JSON.stringify(raw.approval.expires_in)}): pending agents would be deleted while their approval is still open`,
    );
  }
  return Object.freeze({
    sessionTtlMs,
    maxLifetimeMs,
    absoluteLifetimeMs,
    maxJwtLifetimeSec: maxJwtLifetimeMs / 1000,
    clockSkewSec: clockSkewMs / 1000,
    pendingCleanupMs,
  });
}

function isWebUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'https:' || url.protocol === 'http:') && !text.includes('#');
  } catch {
    return false;
  }
}
