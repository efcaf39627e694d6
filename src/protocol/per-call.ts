/**
 * Per-call approval (issue 16 §1): an execution of a `capabilities.per_call` capability passes
 * every §5.11 check and then waits, as an async execution (`202 {status: "pending", status_url}`),
 * for a person to approve its exact arguments with a passkey (§8.11). The row holds the arguments
 * shown, then the outcome the agent polls for once; it is deleted once delivered or past
 * `keep_until`.
 *
 * Addressee: the agent's user (or its host's); an agent acting for nobody (autonomous, §2.2.2)
 * is addressed to the policy's `approval.approvers`, and refused when there are none.
 *
 * What the passkey confirms: `shownHash`, a SHA-256 over a canonical JSON of the approval id,
 * the capability, the arguments (keys sorted) and the deadline. The page shows it, the challenge
 * is derived from it, and Approve recomputes it from the stored row (per-call-decide.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { ProtocolError } from '../errors.js';
import type { PerCallRecord } from '../storage/types.js';
import { PER_CALL_RESULT_TTL_MS, perCallEvent } from './per-call-events.js';
import type { AgentAuth } from './authenticate.js';
import { statusUrlOf } from './async-jobs.js';
import { isApprover } from './approvers.js';
import type { ProtocolContext } from './context.js';
import { perCallNotice } from './notifications.js';
import { admitPendingHostApproval } from './pending-hosts.js';
import { canonicalJson } from '../util/canonical-json.js';

export const PER_CALL_PREFIX = 'call_';

/** Open per-call approvals one agent may have at once; more is `429 rate_limited`. */
export const MAX_OPEN_PER_AGENT = 20;

/** The outcome of an execution that waits for its approval: activity records and metrics. */
export const PENDING_APPROVAL = 'pending_approval';

/** Rows the periodic sweep expires or deletes per run, so one run never holds the database long. */
export const PER_CALL_SWEEP_BATCH = 100;

export function isPerCallId(id: string): boolean {
  return id.startsWith(PER_CALL_PREFIX);
}

/** What the approver is shown and the passkey confirms, as a SHA-256 (base64url). */
export function shownHash(r: Pick<PerCallRecord, 'id' | 'capability' | 'arguments' | 'expiresAt'>): string {
  const shown = canonicalJson({
    approval_id: r.id,
    capability: r.capability,
    arguments: r.arguments,
    expires_at: r.expiresAt,
  });
  return createHash('sha256').update(shown).digest('base64url');
}

/** Whether `userId` is the addressee of `r`. */
export function mayDecide(ctx: ProtocolContext, r: PerCallRecord, userId: string): boolean {
  return r.userId === null ? isApprover(ctx, userId) : r.userId === userId;
}

/**
 * Stores a per-call execution that passed every check and returns its status URL (§5.11). Nothing
 * is stored for an agent nobody can approve for.
 */
export async function openPerCall(
  ctx: ProtocolContext,
  auth: AgentAuth,
  request: { capability: string; args: Readonly<Record<string, unknown>> },
): Promise<string> {
  const userId = auth.agent.userId ?? auth.host.userId ?? null;
  if (userId === null && ctx.policy.approval.approvers.length === 0) {
    throw new ProtocolError(
      'capability_not_granted',
      `${request.capability} needs a person to approve each call, and this agent acts for no user while the policy lists no approval.approvers; nothing was executed.`,
    );
  }
  const now = ctx.clock.now();
  const expiresAt = now + ctx.policy.approval.perCallExpiresInMs;
  const record: PerCallRecord = {
    id: `${PER_CALL_PREFIX}${randomBytes(18).toString('base64url')}`,
    agentId: auth.agent.id,
    hostId: auth.host.id,
    userId,
    capability: request.capability,
    arguments: request.args,
    status: 'pending',
    result: null,
    error: null,
    createdAt: now,
    expiresAt,
    decidedAt: null,
    decidedBy: null,
    keepUntil: expiresAt + PER_CALL_RESULT_TTL_MS,
  };
  await ctx.write(async (tx, after) => {
    // Bounded: a host nobody approved holds at most pending_hosts.max_open_approvals requests
    // waiting for a person, per-call ones included; any agent at most MAX_OPEN_PER_AGENT calls.
    await admitPendingHostApproval(ctx, tx, auth.host, now);
    if ((await tx.countOpenPerCalls(auth.agent.id, now)) >= MAX_OPEN_PER_AGENT) {
      throw new ProtocolError(
        'rate_limited',
        `This agent already has ${MAX_OPEN_PER_AGENT} calls waiting for approval; retry once one is decided.`,
        { headers: { 'retry-after': '60' } },
      );
    }
    await tx.insertPerCall(record);
    await tx.appendActivity(
      perCallEvent(record, now, 'per_call.opened', 'pending', {
        expires_at: expiresAt,
        // §11: arguments can hold personal data; recorded only when the policy says so.
        ...(ctx.policy.audit.logArguments ? { arguments: request.args } : {}),
      }),
    );
    const notifier = ctx.notifier;
    if (notifier) {
      const notice = await perCallNotice(ctx, tx, record, auth.agent);
      after(() => {
        notifier.approvalRequested(notice);
      });
    }
  });
  return statusUrlOf(ctx, record.id);
}

/** The open per-call approval `id` if `userId` may decide it; for anyone else, nothing. */
export async function lookUpPerCall(
  ctx: ProtocolContext,
  id: string,
  userId: string,
): Promise<PerCallRecord | undefined> {
  if (!isPerCallId(id)) return undefined;
  const r = await ctx.store.perCall(id.slice(0, 100));
  if (!r || r.status !== 'pending' || r.expiresAt <= ctx.clock.now() || !mayDecide(ctx, r, userId)) {
    return undefined;
  }
  return r;
}

/** Per-call approvals shown in one inbox page, at most. */
export const PER_CALL_INBOX_SIZE = 20;

/**
 * The open calls waiting for `userId`: those of the user's agents, and, for a listed approver,
 * those of agents acting for nobody; newest first, at most PER_CALL_INBOX_SIZE, and whether more
 * wait past those (the page says so rather than leave them unseen).
 */
export async function perCallInbox(
  ctx: ProtocolContext,
  userId: string,
): Promise<{ calls: PerCallRecord[]; more: boolean }> {
  const now = ctx.clock.now();
  const own = await ctx.store.perCallsAddressedTo(userId, now, PER_CALL_INBOX_SIZE + 1);
  const shared = isApprover(ctx, userId)
    ? await ctx.store.perCallsAddressedTo(null, now, PER_CALL_INBOX_SIZE + 1)
    : [];
  const newestFirst = [...own, ...shared].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
  return {
    calls: newestFirst.slice(0, PER_CALL_INBOX_SIZE),
    more: newestFirst.length > PER_CALL_INBOX_SIZE,
  };
}
