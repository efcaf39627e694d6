/**
 * Approval requests that resist phishing by volume (issue 16 §3, §8.10, §8.13): each user can be
 * asked only so often (policy `rate_limits.approval_requests_per_user`, default 5 a minute), and
 * an agent repeating a request that is still pending gets the same approval back (same user code,
 * same expiry), which costs nothing against that limit. A flood of prompts trains people to click
 * Approve; a repeat is the agent polling, not a new question.
 *
 * Strangers' CIBA requests (from a host linked to nobody) are counted per login_hint in a budget of
 * their own (approvals.ts `requestBudget`), the same for any hint, so that they neither use up a
 * user's own budget nor tell an approver from a made-up name (§7.2).
 *
 * Requests addressed to nobody known (an unlinked host's device-authorization request) are bounded
 * elsewhere: policy `pending_hosts`, `rate_limits.unknown_host_registration`, `per_ip`, `per_host`.
 */
import { ProtocolError } from '../errors.js';
import type { ApprovalRecord, RequestedCapability, StoreReader } from '../storage/types.js';
import { canonicalJson } from '../util/canonical-json.js';
import type { ProtocolContext } from './context.js';

/**
 * Refuses one more approval request from `budget` (approvals.ts names it) with `429 rate_limited` and `Retry-After` when
 * its budget is spent; takes nothing. Called inside the request's transaction, so a refusal rolls
 * everything back; `chargeApprovalRequest` takes from the budget once the request is committed
 * (a transaction may be run again, and must not change the limiter). Requests to one user in
 * flight at the same moment (on any replica) are all checked before any is charged, so they may
 * exceed the budget by that many.
 */
export async function checkApprovalRequest(ctx: ProtocolContext, budget: string): Promise<void> {
  const spec = ctx.policy.rateLimits.approvalRequestsPerUser;
  if (!spec) return;
  const result = await ctx.approvalLimiter.check({ key: budget, limit: spec });
  if (result.ok) return;
  throw new ProtocolError(
    'rate_limited',
    `Too many approval requests for this user (at most ${spec.count} per ${Math.round(spec.windowMs / 1000)} s); retry in ${result.retryAfterSec} s.`,
    {
      headers: { 'retry-after': String(result.retryAfterSec) },
      fields: { limit: 'rate_limits.approval_requests_per_user' },
    },
  );
}

/** One requested capability as a comparable key: its name, effective and proposed constraints. */
function requestKey(c: RequestedCapability): string {
  return canonicalJson([c.name, c.constraints ?? null, c.proposed ?? null]);
}

/**
 * The agent's open approval of one of `kinds` that already asks for every one of `requested`, exactly so
 * (same constraints as proposed and as in effect): asking again is a repeat, not a new request.
 */
export async function pendingRepeat(
  tx: StoreReader,
  agentId: string,
  kinds: readonly ApprovalRecord['kind'][],
  requested: readonly RequestedCapability[],
  now: number,
): Promise<ApprovalRecord | undefined> {
  if (requested.length === 0) return undefined;
  const wanted = requested.map(requestKey);
  return (await tx.approvals({ status: 'pending', agentId }))
    .filter((a) => kinds.includes(a.kind) && a.expiresAt > now)
    .find((a) => {
      const asked = new Set(a.capabilities.map(requestKey));
      return wanted.every((k) => asked.has(k));
    });
}

/**
 * Takes one request from `budget`: after its approval request committed (see above).
 * On the replicas' shared budget this is a round trip the request does not wait for.
 */
export function chargeApprovalRequest(ctx: ProtocolContext, budget: string): void {
  const spec = ctx.policy.rateLimits.approvalRequestsPerUser;
  if (!spec) return;
  const taken = ctx.approvalLimiter.take([{ key: budget, limit: spec }]);
  if (taken instanceof Promise) {
    void taken.catch((err: unknown) => {
      ctx.logger.warn('approval request budget not charged', {
        error: err instanceof Error ? err.message : String(err),
      });
    });
  }
}
