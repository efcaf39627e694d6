/**
 * §7 approval requests: creating them (device authorization, RFC 8628 user codes; CIBA when the
 * policy enables it and the login hint names a known approver), and expiring unanswered ones.
 * Answering them is approval-decisions.ts; linking a host to its user host-linking.ts.
 */
import { ProtocolError } from '../errors.js';
import type {
  AgentRecord,
  ApprovalKind,
  ApprovalRecord,
  RequestedCapability,
  StoreReader,
  StoreWriter,
} from '../storage/types.js';
import { checkApprovalRequest, chargeApprovalRequest } from './approval-limits.js';
import { userCodeFor } from './approval-codes.js';
import { isApprover } from './approvers.js';
import { newId, type AfterCommit, type ProtocolContext } from './context.js';
import { requestedFromGrant, SYSTEM_ACTOR } from './grants.js';
import { approvalNotice } from './notifications.js';
import { EXPIRY_BATCH } from './sweeps.js';

export interface ApprovalHints {
  readonly preferredMethod?: string;
  readonly loginHint?: string;
  readonly bindingMessage?: string;
  readonly reason?: string;
}

const MAX_DISPLAY_TEXT = 500;

/** §8.10: display text from agents is stored as plain, bounded text (control characters removed). */
export function displayText(value: unknown, field: string, max = MAX_DISPLAY_TEXT): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ProtocolError('invalid_request', `${field} must be a string.`);
  // eslint-disable-next-line no-control-regex -- stripping control characters is the point
  const clean = value.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, ' ').trim();
  if (clean.length > max)
    throw new ProtocolError('invalid_request', `${field} must be at most ${max} characters.`);
  return clean || undefined;
}

export function readHints(body: Readonly<Record<string, unknown>>): ApprovalHints {
  const preferredMethod = displayText(body.preferred_method, 'preferred_method', 64);
  const loginHint = displayText(body.login_hint, 'login_hint', 256);
  const bindingMessage = displayText(body.binding_message, 'binding_message', 256);
  const reason = displayText(body.reason, 'reason');
  return {
    ...(preferredMethod ? { preferredMethod } : {}),
    ...(loginHint ? { loginHint } : {}),
    ...(bindingMessage ? { bindingMessage } : {}),
    ...(reason ? { reason } : {}),
  };
}

/**
 * §7.5: the server chooses; CIBA only when enabled and asked for with a login_hint. When the agent
 * already acts for a user (a linked host), only that user, and only if an approver (§2.9); such a
 * request may also simply prefer CIBA and name nobody: "CIBA when the server already knows the
 * user" (addresseeHint). For a host linked to nobody, any hint gets CIBA, whether or not it names
 * an approver: §7.2 and CIBA Core §14, a stranger must not learn from the answer who the approvers
 * are. A hint that names nobody reaches nobody, and the request expires unanswered.
 */
function chooseMethod(
  ctx: ProtocolContext,
  hints: ApprovalHints,
  knownUser: string | null,
): 'device_authorization' | 'ciba' {
  const hint = addresseeHint(hints, knownUser);
  if (
    !ctx.policy.approval.methods.includes('ciba') ||
    hints.preferredMethod === 'device_authorization' ||
    hint === undefined
  ) {
    return 'device_authorization';
  }
  if (knownUser === null) return 'ciba';
  return knownUser === hint && isApprover(ctx, hint) ? 'ciba' : 'device_authorization';
}

/** The login_hint, or for `preferred_method: "ciba"` without one the user the agent acts for. */
function addresseeHint(hints: ApprovalHints, knownUser: string | null): string | undefined {
  if (hints.loginHint !== undefined) return hints.loginHint;
  return hints.preferredMethod === 'ciba' && knownUser !== null ? knownUser : undefined;
}

/**
 * Whose budget a new request takes from (approval-limits.ts): the user the agent acts for; for a
 * CIBA request from a host linked to nobody, the hint's own stranger budget, kept apart so that
 * strangers can neither use up the budget a user's own agents ask under nor tell an approver's
 * hint from a made-up one by when the 429 comes. None for an unlinked host's device request.
 */
function requestBudget(knownUser: string | null, method: string, hints: ApprovalHints): string | null {
  if (knownUser !== null) return `approvals:${knownUser}`;
  return method === 'ciba' && hints.loginHint !== undefined ? `approvals-unlinked:${hints.loginHint}` : null;
}

/**
 * Stores a new approval request in `tx`. Once it commits (`after`), listeners of the requests it
 * supersedes hear of them, the addressee's request budget is charged and the notifier is told.
 */
export async function createApproval(
  ctx: ProtocolContext,
  tx: StoreWriter,
  after: AfterCommit,
  kind: ApprovalKind,
  agent: AgentRecord,
  capabilities: readonly RequestedCapability[],
  hints: ApprovalHints,
): Promise<ApprovalRecord> {
  const now = ctx.clock.now();
  const knownUser = agent.userId ?? (await tx.host(agent.hostId))?.userId ?? null;
  const method = chooseMethod(ctx, hints, knownUser);
  // Issue 16 §3: a new question to a known user is rate-limited per user (approval-limits.ts):
  // refused before anything is written (a caller that goes on after the refusal, as drift does,
  // must not find the older request superseded), charged once the request is committed.
  const budget = requestBudget(knownUser, method, hints);
  if (budget !== null) {
    await checkApprovalRequest(ctx, budget);
    after(() => {
      chargeApprovalRequest(ctx, budget);
    });
  }
  // A newer request supersedes an older unanswered one for the same agent and purpose. The
  // older one's still-pending grants move to the new request: left behind they could never be
  // decided, yet would block asking again (already_granted).
  const superseded = new Set<string>();
  for (const old of await tx.approvals({ status: 'pending', agentId: agent.id })) {
    if (old.kind !== kind) continue;
    await tx.updateApproval(old.id, { status: 'expired', decidedAt: now });
    superseded.add(old.id);
    announce(ctx, after, old.id);
  }
  const carried = (await tx.grants(agent.id)).filter(
    (g) =>
      g.status === 'pending' &&
      g.approvalId !== null &&
      superseded.has(g.approvalId) &&
      !capabilities.some((c) => c.name === g.capability),
  );
  const userCode = await userCodeFor(tx, agent.id, superseded, method);
  const approval: ApprovalRecord = {
    id: newId('apr'),
    kind,
    agentId: agent.id,
    hostId: agent.hostId,
    userCode,
    method,
    // A CIBA request is addressed by its hint: the one given, or the known user it defaulted to.
    loginHint: (method === 'ciba' ? addresseeHint(hints, knownUser) : hints.loginHint) ?? null,
    bindingMessage: hints.bindingMessage ?? null,
    reason: hints.reason ?? null,
    capabilities: [...carried.map(requestedFromGrant), ...capabilities],
    status: 'pending',
    createdAt: now,
    expiresAt: now + ctx.policy.approval.expiresInMs,
    decidedAt: null,
    decidedBy: null,
  };
  await tx.insertApproval(approval);
  for (const g of carried) await tx.updateGrant(g.id, { approvalId: approval.id, updatedAt: now });
  // §7.2: the approver hears of it once it is committed, off the request's path.
  const notifier = ctx.notifier;
  // A CIBA request whose hint names no approver has nobody to tell.
  if (notifier && (method !== 'ciba' || isApprover(ctx, approval.loginHint ?? ''))) {
    const notice = await approvalNotice(ctx, tx, approval, agent);
    after(() => {
      notifier.approvalRequested(notice);
    });
  }
  return approval;
}

/** §10.10.2: listeners of approval `id` hear of its change once the transaction commits. */
export function announce(ctx: ProtocolContext, after: AfterCommit, id: string): void {
  after(() => {
    ctx.approvalEvents.publish(id);
  });
}

/** The pending approval still open for an agent, if any (read through `reader`: a store or a tx). */
export async function openApproval(
  ctx: ProtocolContext,
  reader: StoreReader,
  agentId: string,
): Promise<ApprovalRecord | undefined> {
  const now = ctx.clock.now();
  return (await reader.approvals({ status: 'pending', agentId })).filter((a) => a.expiresAt > now).at(-1);
}

/**
 * Expires unanswered approvals (§7.1): their pending grants become `denied` with a reason; a
 * reactivation that nobody answered leaves the agent `expired` again. A pending agent's
 * registration stays pending (a retry refreshes it) until pending cleanup removes it (§10.9).
 */
export async function expireApprovals(ctx: ProtocolContext, limit = EXPIRY_BATCH): Promise<number> {
  const now = ctx.clock.now();
  // At most one batch (a range of approvals_deadline): called on request paths too, so it never
  // reads every pending approval; the maintenance sweep repeats it until a batch comes back short.
  const due = await ctx.store.overdueApprovals(now, limit);
  if (due.length === 0) return 0;
  await ctx.write(async (tx, after) => {
    for (const approval of due) {
      // Read again inside the transaction: another request may have decided it meanwhile, or
      // extended it (a replica whose clock is behind this one's still sees it open).
      const fresh = await tx.approval(approval.id);
      if (fresh?.status !== 'pending' || fresh.expiresAt > now) continue;
      await tx.updateApproval(approval.id, { status: 'expired', decidedAt: now });
      announce(ctx, after, approval.id);
      const agent = await tx.agent(approval.agentId);
      // A pending agent's registration waits for a retry; an active agent's (what it asked for
      // beyond what was granted at once) is over: left pending, it could be asked for never again.
      if (approval.kind !== 'registration' || agent?.status !== 'pending') {
        await denyGrants(tx, approval, 'The approval request expired.', SYSTEM_ACTOR, now);
      }
      if (approval.kind === 'reactivation' && agent?.status === 'pending') {
        await tx.updateAgent(agent.id, { status: 'expired', updatedAt: now });
      }
    }
  });
  // The batch's size, not how many expired: the maintenance sweep stops on a short batch.
  return due.length;
}

/** The approval's still-pending grants become `denied` by `actor` with `reason`; their capabilities. */
export async function denyGrants(
  tx: StoreWriter,
  approval: ApprovalRecord,
  reason: string,
  actor: string,
  now: number,
): Promise<string[]> {
  const denied: string[] = [];
  for (const grant of await tx.grants(approval.agentId)) {
    if (grant.approvalId !== approval.id || grant.status !== 'pending') continue;
    denied.push(grant.capability);
    await tx.updateGrant(grant.id, { status: 'denied', deniedBy: actor, reason, updatedAt: now });
  }
  return denied;
}
