/**
 * §7 approval requests: creating them (device authorization, RFC 8628 user codes; CIBA when the
 * policy enables it and the login hint names a known approver), answering them (full or partial
 * approval, narrowing constraints, denial with a reason), and expiring unanswered ones.
 */
import { ProtocolError } from '../errors.js';
import type {
  AgentRecord,
  AgentStatus,
  ApprovalKind,
  ApprovalRecord,
  GrantRecord,
  HostRecord,
  RequestedCapability,
  StoreReader,
  StoreWriter,
} from '../storage/types.js';
import { intersectConstraints, parseConstraints, type Constraints } from './constraints.js';
import { newId, type AfterCommit, type ProtocolContext } from './context.js';
import { inputFields, requestedFromGrant } from './grants.js';
import { constraintTrail, originDetail, type DecisionOrigin } from './decision-record.js';
import { userCodeFor } from './approval-codes.js';
import { protocolEvent } from './activity.js';
import { closePendingApprovals, revokeGrants } from './lifecycle.js';
import { approvalNotice } from './notifications.js';
import { currentVersion } from './capability-version.js';
import { checkApprovalRequest, chargeApprovalRequest } from './approval-limits.js';
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
 * §7.5: the server chooses; CIBA only when enabled and the hint names a known approver who can
 * answer: when the agent already acts for a user (a linked host), only that user (§2.9).
 */
function chooseMethod(
  ctx: ProtocolContext,
  hints: ApprovalHints,
  knownUser: string | null,
): 'device_authorization' | 'ciba' {
  const { methods, approvers } = ctx.policy.approval;
  if (
    methods.includes('ciba') &&
    hints.preferredMethod !== 'device_authorization' &&
    hints.loginHint !== undefined &&
    approvers.includes(hints.loginHint) &&
    (knownUser === null || knownUser === hints.loginHint)
  ) {
    return 'ciba';
  }
  return 'device_authorization';
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
  const knownUser = agent.userId ?? (await tx.host(agent.hostId))?.userId ?? null;
  const method = chooseMethod(ctx, hints, knownUser);
  // Issue 16 §3: a new question to a known user is rate-limited per user (approval-limits.ts):
  // refused here, which rolls everything back; charged once the request is committed.
  const addressee = knownUser ?? (method === 'ciba' ? (hints.loginHint ?? null) : null);
  if (addressee !== null) {
    await checkApprovalRequest(ctx, addressee);
    after(() => {
      chargeApprovalRequest(ctx, addressee);
    });
  }
  const userCode = await userCodeFor(tx, agent.id, superseded, method);
  const approval: ApprovalRecord = {
    id: newId('apr'),
    kind,
    agentId: agent.id,
    hostId: agent.hostId,
    userCode,
    method,
    loginHint: hints.loginHint ?? null,
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
  if (notifier) {
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

export interface ApproveInput {
  readonly userId?: string;
  /** The capabilities approved; the others are denied. Absent: all of them. */
  readonly capabilities?: readonly string[];
  /** Narrowing by the approver, per capability (§2.13: MAY narrow, never widen). */
  readonly constraints?: Readonly<Record<string, unknown>>;
  readonly reason?: string;
  /**
   * The approved grants end this long after the approval (§3.3 grant `expires_at`), never later
   * than the agent's absolute lifetime (§2.4): a grant cannot outlive its agent. Absent: the
   * grants have no expiry of their own.
   */
  readonly grantLifetimeMs?: number;
  /** Who decided, for granted_by / denied_by. */
  readonly actor: string;
  /** How the person who decided on a page authenticated (password, oidc, passkey …). */
  readonly authMethod?: string;
  /** The decision record's origin: auth method with acr/amr, IP, user agent, content hash. */
  readonly origin?: DecisionOrigin;
}

export interface Decision {
  readonly approval: ApprovalRecord;
  readonly agent: AgentRecord;
  readonly approved: readonly string[];
  readonly denied: readonly string[];
  /** When the approved grants end (ms), null when they have no expiry of their own. */
  readonly grantsExpireAt: number | null;
}

/** The `expires_at` of grants approved now with `lifetimeMs` (see ApproveInput). */
function grantExpiry(
  ctx: ProtocolContext,
  agent: AgentRecord,
  lifetimeMs: number | undefined,
  now: number,
): number | null {
  if (lifetimeMs === undefined) return null;
  if (!Number.isSafeInteger(lifetimeMs) || lifetimeMs <= 0) {
    throw new ProtocolError('invalid_request', 'A grant lifetime must be a positive number of milliseconds.');
  }
  const absolute = ctx.policy.lifetimes.absoluteLifetimeMs;
  return absolute === null ? now + lifetimeMs : Math.min(now + lifetimeMs, agent.createdAt + absolute);
}

/**
 * §7.2: a CIBA request is delivered to one user (the login_hint it was chosen for), so only that
 * user can answer it; without a user_id the approval is that user's.
 */
function cibaApprover(approval: ApprovalRecord, input: ApproveInput): ApproveInput {
  const addressee = approval.method === 'ciba' ? approval.loginHint : null;
  if (addressee === null) return input;
  if (input.userId === undefined) return { ...input, userId: addressee };
  if (input.userId !== addressee) {
    throw new ProtocolError(
      'invalid_request',
      `This CIBA request was sent to ${addressee}; only that user can approve it (§7.2).`,
    );
  }
  return input;
}

async function pendingApproval(ctx: ProtocolContext, tx: StoreWriter, id: string): Promise<ApprovalRecord> {
  const approval = await tx.approval(id);
  if (!approval) throw new ProtocolError('approval_not_found', `No approval request "${id}".`);
  if (approval.status !== 'pending' || approval.expiresAt <= ctx.clock.now()) {
    throw new ProtocolError(
      'approval_closed',
      `Approval request "${id}" is ${approval.status === 'pending' ? 'expired' : approval.status}.`,
    );
  }
  return approval;
}

function activity(
  tx: StoreWriter,
  at: number,
  type: string,
  agent: AgentRecord,
  outcome: string,
  detail: Record<string, unknown> | null,
): Promise<void> {
  return tx.appendActivity(
    protocolEvent({
      at,
      type,
      agentId: agent.id,
      hostId: agent.hostId,
      userId: agent.userId,
      capability: null,
      outcome,
      detail,
    }),
  );
}

export function approve(ctx: ProtocolContext, approvalId: string, given: ApproveInput): Promise<Decision> {
  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    const approval = await pendingApproval(ctx, tx, approvalId);
    const input = cibaApprover(approval, given);
    const agent = await tx.agent(approval.agentId);
    const host = await tx.host(approval.hostId);
    if (!agent || !host)
      throw new ProtocolError('approval_not_found', `No approval request "${approvalId}".`);
    const requested = new Map(approval.capabilities.map((c) => [c.name, c]));
    const chosen = input.capabilities ?? [...requested.keys()];
    const notRequested = chosen.filter((n) => !requested.has(n));
    if (notRequested.length) {
      throw new ProtocolError(
        'invalid_request',
        `capabilities: ${notRequested.join(', ')} ${notRequested.length === 1 ? 'was' : 'were'} not requested; an approval can only grant what was asked.`,
      );
    }
    const narrowed = narrowing(ctx, input.constraints, requested);
    const expiresAt = grantExpiry(ctx, agent, input.grantLifetimeMs, now);

    // Whose authority the agent acts with: a delegated registration links the host (§2.9).
    let userId = agent.userId ?? host.userId;
    if (agent.mode === 'delegated' && userId === null) {
      if (!input.userId) {
        throw new ProtocolError(
          'invalid_request',
          'user_id is required: approving a delegated agent of an unlinked host links the host to that user.',
        );
      }
      userId = input.userId;
    } else if (input.userId && userId !== null && input.userId !== userId && agent.mode === 'delegated') {
      throw new ProtocolError(
        'invalid_request',
        `This host is linked to another user; a host is linked to at most one user (§2.9).`,
      );
    }
    const actor = input.userId ?? input.actor;
    if (agent.mode === 'delegated' && host.userId === null && userId !== null) {
      await linkHost(ctx, tx, host, userId, now);
    } else if (host.status === 'pending') {
      await tx.updateHost(host.id, { status: 'active', activatedAt: now, updatedAt: now });
    }

    const approved: string[] = [];
    const denied: string[] = [];
    const trail: GrantRecord[] = [];
    for (const grant of await tx.grants(agent.id)) {
      if (grant.approvalId !== approval.id || grant.status !== 'pending') continue;
      if (chosen.includes(grant.capability)) {
        approved.push(grant.capability);
        const constraints = narrowed.get(grant.capability) ?? requested.get(grant.capability)?.constraints;
        // What the approver approved is what is in effect now; kept apart so the proposal, the
        // approval and the effective constraints stay readable each on their own (§2.13).
        const patch = {
          status: 'active' as const,
          constraints: constraints ?? null,
          approvedConstraints: constraints ?? null,
          expiresAt,
          grantedBy: actor,
          // §2.12: the approver approved the capability as it is now (drift.ts compares later).
          capabilityVersion: currentVersion(ctx.catalog, grant.capability),
          updatedAt: now,
        };
        await tx.updateGrant(grant.id, patch);
        trail.push({ ...grant, ...patch });
      } else {
        denied.push(grant.capability);
        await tx.updateGrant(grant.id, {
          status: 'denied',
          deniedBy: actor,
          reason: input.reason ?? 'Not approved.',
          updatedAt: now,
        });
      }
    }
    let updated = agent;
    if (approval.kind !== 'capability_request' && agent.status === 'pending') {
      // §5.3: the agent is active once its registration or reactivation is approved, even with
      // every capability denied; it can ask again through §5.4.
      updated = {
        ...agent,
        status: 'active',
        userId: agent.mode === 'delegated' ? userId : null,
        activatedAt: now,
        updatedAt: now,
      };
      await tx.updateAgent(agent.id, {
        status: 'active',
        userId: updated.userId,
        activatedAt: now,
        updatedAt: now,
      });
      after(() => {
        ctx.usage.reset(agent.id);
      });
    }
    const decided = { ...approval, status: 'approved' as const, decidedAt: now, decidedBy: actor };
    await tx.updateApproval(approval.id, { status: 'approved', decidedAt: now, decidedBy: actor });
    announce(ctx, after, approval.id);
    await activity(tx, now, `approval.approved`, updated, 'approved', {
      approval_id: approval.id,
      kind: approval.kind,
      approved,
      denied,
      ...(input.authMethod ? { auth_method: input.authMethod } : {}),
      ...originDetail(input.origin),
      ...(narrowed.size > 0 ? { narrowed: [...narrowed.keys()] } : {}),
      ...(trail.length > 0 ? { constraints: constraintTrail(trail) } : {}),
      ...(expiresAt !== null ? { grants_expire_at: new Date(expiresAt).toISOString() } : {}),
      by: actor,
    });
    return { approval: decided, agent: updated, approved, denied, grantsExpireAt: expiresAt };
  });
}

/** Approver narrowing: each entry must name a requested capability and is intersected with it. */
function narrowing(
  ctx: ProtocolContext,
  raw: Readonly<Record<string, unknown>> | undefined,
  requested: ReadonlyMap<string, RequestedCapability>,
): Map<string, Constraints> {
  const out = new Map<string, Constraints>();
  for (const [name, value] of Object.entries(raw ?? {})) {
    const req = requested.get(name);
    const capability = ctx.catalog.get(name);
    if (!req || !capability) {
      throw new ProtocolError('invalid_request', `constraints.${name}: that capability was not requested.`);
    }
    const parsed = parseConstraints(value, inputFields(capability));
    if (!parsed.ok) {
      if (parsed.problem.kind === 'unknown_operator') {
        throw new ProtocolError(
          'unknown_constraint_operator',
          `constraints.${name}: ${parsed.problem.message}`,
          {
            fields: { unknown_operators: parsed.problem.operators },
          },
        );
      }
      throw new ProtocolError('invalid_request', `constraints.${name}: ${parsed.problem.message}`);
    }
    const { constraints, conflicts } = intersectConstraints(req.constraints, parsed.constraints);
    if (conflicts.length) {
      throw new ProtocolError(
        'invalid_request',
        `constraints.${name}: ${conflicts.join(', ')} would allow nothing the agent asked for; narrow within the request.`,
      );
    }
    if (constraints) out.set(name, constraints);
  }
  return out;
}

export function deny(
  ctx: ProtocolContext,
  approvalId: string,
  input: {
    readonly reason?: string;
    readonly actor: string;
    readonly authMethod?: string;
    readonly origin?: DecisionOrigin;
  },
): Promise<Decision> {
  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    const approval = await pendingApproval(ctx, tx, approvalId);
    const agent = await tx.agent(approval.agentId);
    if (!agent) throw new ProtocolError('approval_not_found', `No approval request "${approvalId}".`);
    const reason = input.reason ?? 'Denied by the approver.';
    const denied = await denyGrants(tx, approval, reason, input.actor, now);
    let updated = agent;
    if (approval.kind === 'registration' && agent.status === 'pending') {
      // §7.1: a denied registration is terminal for that attempt.
      updated = { ...agent, status: 'rejected', updatedAt: now };
      await tx.updateAgent(agent.id, { status: 'rejected', updatedAt: now });
      await rejectLonePendingHost(tx, agent.hostId, now);
    } else if (approval.kind === 'reactivation' && agent.status === 'pending') {
      updated = { ...agent, status: 'expired', updatedAt: now };
      await tx.updateAgent(agent.id, { status: 'expired', updatedAt: now });
    }
    const decided = { ...approval, status: 'denied' as const, decidedAt: now, decidedBy: input.actor };
    await tx.updateApproval(approval.id, { status: 'denied', decidedAt: now, decidedBy: input.actor });
    announce(ctx, after, approval.id);
    await activity(tx, now, 'approval.denied', updated, 'denied', {
      approval_id: approval.id,
      kind: approval.kind,
      reason,
      ...(input.authMethod ? { auth_method: input.authMethod } : {}),
      ...originDetail(input.origin),
      by: input.actor,
    });
    return { approval: decided, agent: updated, approved: [], denied, grantsExpireAt: null };
  });
}

async function denyGrants(
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

/** A dynamically registered host whose only registrations were all denied is rejected (§2.11). */
async function rejectLonePendingHost(tx: StoreWriter, hostId: string, now: number): Promise<void> {
  const host = await tx.host(hostId);
  if (!host || host.status !== 'pending') return;
  const others = (await tx.agents({ hostId })).filter((a) => a.status !== 'rejected');
  if (others.length === 0) await tx.updateHost(hostId, { status: 'rejected', updatedAt: now });
}

/**
 * §2.9 linking with §2.10 claiming: the host gets its one user, and every active autonomous
 * agent under it is claimed — capabilities revoked, status `claimed`, history attributed. Pending
 * ones are claimed too: a linked host may not have autonomous agents (registration refuses them),
 * so approving one later must not be possible. Claimed agents' open approvals are closed.
 */
export async function linkHost(
  ctx: ProtocolContext,
  tx: StoreWriter,
  host: HostRecord,
  userId: string,
  now: number,
): Promise<number> {
  if (host.userId !== null && host.userId !== userId) {
    throw new ProtocolError(
      'invalid_request',
      `Host ${host.id} is already linked to another user; unlink it first.`,
    );
  }
  await tx.updateHost(host.id, {
    userId,
    status: 'active',
    activatedAt: host.activatedAt ?? now,
    updatedAt: now,
  });
  let claimed = 0;
  for (const agent of await tx.agents({ hostId: host.id })) {
    if (agent.mode !== 'autonomous' || !CLAIMABLE.has(agent.status)) continue;
    claimed++;
    await revokeGrants(tx, agent.id, now, 'Agent claimed by a user.');
    await closePendingApprovals(tx, agent.id, now);
    await tx.updateAgent(agent.id, { status: 'claimed', userId, updatedAt: now });
    await activity(tx, now, 'agent.claimed', { ...agent, userId }, 'claimed', { user_id: userId });
  }
  await tx.appendActivity(
    protocolEvent({
      at: now,
      type: 'host.linked',
      agentId: null,
      hostId: host.id,
      userId,
      capability: null,
      outcome: 'linked',
      detail: { claimed_agents: claimed },
    }),
  );
  return claimed;
}

const CLAIMABLE: ReadonlySet<AgentStatus> = new Set(['active', 'expired', 'pending']);

/**
 * Expires unanswered approvals (§7.1): their pending grants become `denied` with a reason; a
 * reactivation that nobody answered leaves the agent `expired` again. A registration stays
 * pending (a retry refreshes it) until pending cleanup removes it (§10.9).
 */
export async function expireApprovals(ctx: ProtocolContext, limit = EXPIRY_BATCH): Promise<number> {
  const now = ctx.clock.now();
  // At most one batch (a range of approvals_deadline): called on request paths too, so it never
  // reads every pending approval; the maintenance sweep repeats it until a batch comes back short.
  const due = await ctx.store.overdueApprovals(now, limit);
  if (due.length === 0) return 0;
  await ctx.write(async (tx, after) => {
    for (const approval of due) {
      // Read again inside the transaction: another request may have decided it meanwhile.
      const fresh = await tx.approval(approval.id);
      if (fresh?.status !== 'pending') continue;
      await tx.updateApproval(approval.id, { status: 'expired', decidedAt: now });
      announce(ctx, after, approval.id);
      if (approval.kind !== 'registration') {
        await denyGrants(tx, approval, 'The approval request expired.', 'system', now);
      }
      const agent = await tx.agent(approval.agentId);
      if (approval.kind === 'reactivation' && agent?.status === 'pending') {
        await tx.updateAgent(agent.id, { status: 'expired', updatedAt: now });
      }
    }
  });
  return due.length;
}
