/**
 * §7 answering an approval request: approval, full or partial (the capabilities not approved are
 * denied, §5.3), with constraints the approver may narrow but never widen (§2.13) and an optional
 * grant lifetime (§3.3); or denial with a reason. Each decision commits with its activity record
 * and is announced to the request's listeners (§10.10.2).
 */
import { ProtocolError } from '../errors.js';
import type {
  AgentRecord,
  ApprovalRecord,
  GrantRecord,
  Patch,
  RequestedCapability,
  StoreWriter,
} from '../storage/types.js';
import { agentEvent } from './activity.js';
import { announce, denyGrants } from './approvals.js';
import { currentVersion } from './capability-version.js';
import { intersectConstraints, parseConstraints, type Constraints } from './constraints.js';
import type { ProtocolContext } from './context.js';
import { constraintTrail, originDetail, type DecisionOrigin } from './decision-record.js';
import { inputFields, SYSTEM_ACTOR } from './grants.js';
import { linkHost } from './host-linking.js';
import { currentAgent } from './lifecycle.js';

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
  /**
   * When the approved grants end (ms): the earliest, as a re-approved grant may keep an earlier
   * expiry of its own (grantEnd); null when none has an expiry.
   */
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
 * When a grant approved now ends: the decision's expiry, or the grant's own if it is earlier. A
 * pending grant has one only when drift suspended it after a person approved it with a lifetime
 * (drift.ts keeps it): re-approving what changed (§2.12) answers whether the change is acceptable,
 * and must not give the agent longer than the person first did (§3.3 `expires_at`).
 */
function grantEnd(grant: GrantRecord, decided: number | null): number | null {
  if (grant.expiresAt === null) return decided;
  return decided === null ? grant.expiresAt : Math.min(grant.expiresAt, decided);
}

/** Agent and host statuses no approval can bring back. */
const ENDED_AGENT: ReadonlySet<string> = new Set(['revoked', 'rejected', 'claimed']);
const ENDED_HOST: ReadonlySet<string> = new Set(['revoked', 'rejected']);

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

export async function approve(
  ctx: ProtocolContext,
  approvalId: string,
  given: ApproveInput,
): Promise<Decision> {
  // An agent past its absolute lifetime is revoked first (§2.4), which closes its approvals:
  // approving one then answers approval_closed instead of activating a dead agent.
  const asked = await ctx.store.approval(approvalId);
  const stored = asked && (await ctx.store.agent(asked.agentId));
  if (stored) await currentAgent(ctx, stored);
  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    const approval = await pendingApproval(ctx, tx, approvalId);
    const input = cibaApprover(approval, given);
    const agent = await tx.agent(approval.agentId);
    const host = await tx.host(approval.hostId);
    if (!agent || !host)
      throw new ProtocolError('approval_not_found', `No approval request "${approvalId}".`);
    // A request that slipped in while its agent was being revoked, or its host unlinked or revoked
    // (agents.ts reads them again, but the two may cross), revives nothing and links nothing.
    if (ENDED_AGENT.has(agent.status) || ENDED_HOST.has(host.status)) {
      throw new ProtocolError(
        'approval_closed',
        `This request's agent is ${ENDED_AGENT.has(agent.status) ? agent.status : `on a ${host.status} host`}: there is nothing to approve.`,
      );
    }
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
    const decidedExpiry = grantExpiry(ctx, agent, input.grantLifetimeMs, now);

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
    // Only a registration (or an agent still pending) links: an active agent's request on a host
    // that was unlinked since must not link it to the user again.
    const links = approval.kind === 'registration' || agent.status === 'pending';
    if (links && agent.mode === 'delegated' && host.userId === null && userId !== null) {
      await linkHost(ctx, tx, host, userId, now);
    } else if (host.status === 'pending') {
      await tx.updateHost(host.id, { status: 'active', activatedAt: now, updatedAt: now });
    }

    const approved: string[] = [];
    const denied: string[] = [];
    const trail: GrantRecord[] = [];
    for (const grant of await tx.grants(agent.id)) {
      if (grant.approvalId !== approval.id || grant.status !== 'pending') continue;
      // §2.12: a capability no longer in the catalog cannot be approved as it is now; its grant
      // is denied (asked again if it comes back), never stamped with no version to compare.
      const version = currentVersion(ctx.catalog, grant.capability);
      // §3.3: an expiry the grant kept through drift that passed while it waited stays passed.
      const lapsedAt = grant.expiresAt !== null && grant.expiresAt <= now ? grant.expiresAt : null;
      // A capability a reload blocked while its request waited is never grantable (§2.12 keeps
      // an existing grant inoperative, but approving would make one that a later unblocking
      // revives without anyone asked since): denied, asked again once unblocked.
      const blocked = ctx.policy.blocked.has(grant.capability);
      if (chosen.includes(grant.capability) && version !== null && !blocked && lapsedAt === null) {
        approved.push(grant.capability);
        const constraints = narrowed.get(grant.capability) ?? requested.get(grant.capability)?.constraints;
        // What the approver approved is what is in effect now; kept apart so the proposal, the
        // approval and the effective constraints stay readable each on their own (§2.13).
        const patch = {
          status: 'active' as const,
          constraints: constraints ?? null,
          approvedConstraints: constraints ?? null,
          expiresAt: grantEnd(grant, decidedExpiry),
          grantedBy: actor,
          // §2.12: the approver approved the capability as it is now (drift.ts compares later).
          capabilityVersion: version,
          updatedAt: now,
        };
        await tx.updateGrant(grant.id, patch);
        trail.push({ ...grant, ...patch });
      } else {
        denied.push(grant.capability);
        await tx.updateGrant(grant.id, notApproved(version, blocked, lapsedAt, actor, input.reason, now));
      }
    }
    const expiresAt = earliestEnd(trail, decidedExpiry);
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
    await tx.appendActivity(
      agentEvent(updated, {
        at: now,
        type: 'approval.approved',
        outcome: 'approved',
        detail: {
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
        },
      }),
    );
    return { approval: decided, agent: updated, approved, denied, grantsExpireAt: expiresAt };
  });
}

/**
 * The denial of a grant left out of an approval, or one it cannot approve: its capability removed
 * (§2.12), or its own expiry passed while it waited for re-approval (§3.3: what lapsed stays
 * lapsed). Nobody decided the latter: it is denied by the system, and since the person who
 * approved it is still its grantedBy, asking for it again goes back to a person (agents.ts).
 */
function notApproved(
  version: string | null,
  blocked: boolean,
  lapsedAt: number | null,
  actor: string,
  reason: string | undefined,
  now: number,
): Patch<GrantRecord> {
  if (version === null) {
    return {
      status: 'denied',
      deniedBy: actor,
      reason: 'This capability was removed from the server before it was approved (§2.12).',
      updatedAt: now,
    };
  }
  if (blocked) {
    return {
      status: 'denied',
      deniedBy: actor,
      reason: "This capability is blocked by the server's policy; it was not approved.",
      updatedAt: now,
    };
  }
  if (lapsedAt !== null) {
    return {
      status: 'denied',
      deniedBy: SYSTEM_ACTOR,
      reason: `This grant ended at ${new Date(lapsedAt).toISOString()} while it waited for re-approval (§3.3).`,
      updatedAt: now,
    };
  }
  return { status: 'denied', deniedBy: actor, reason: reason ?? 'Not approved.', updatedAt: now };
}

/**
 * When the approved grants end: the earliest expiry among them, null when none has one; the
 * decision's own when it approved none.
 */
function earliestEnd(approved: readonly GrantRecord[], decided: number | null): number | null {
  if (approved.length === 0) return decided;
  const ends = approved.map((g) => g.expiresAt).filter((t): t is number => t !== null);
  return ends.length > 0 ? Math.min(...ends) : null;
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
    await tx.appendActivity(
      agentEvent(updated, {
        at: now,
        type: 'approval.denied',
        outcome: 'denied',
        detail: {
          approval_id: approval.id,
          kind: approval.kind,
          reason,
          ...(input.authMethod ? { auth_method: input.authMethod } : {}),
          ...originDetail(input.origin),
          by: input.actor,
        },
      }),
    );
    return { approval: decided, agent: updated, approved: [], denied, grantsExpireAt: null };
  });
}

/** A dynamically registered host whose only registrations were all denied is rejected (§2.11). */
async function rejectLonePendingHost(tx: StoreWriter, hostId: string, now: number): Promise<void> {
  const host = await tx.host(hostId);
  if (!host || host.status !== 'pending') return;
  const others = (await tx.agents({ hostId })).filter((a) => a.status !== 'rejected');
  if (others.length === 0) await tx.updateHost(hostId, { status: 'rejected', updatedAt: now });
}
