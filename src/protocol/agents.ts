/**
 * Operations on one agent: status (§5.5), request-capability (§5.4), reactivate (§5.6), revoke
 * (§5.7) and key rotation (§5.8). Host-authenticated ones first check that the agent is the
 * host's own (§5.5: the server MUST verify the agent is registered under this host).
 */
import { ProtocolError } from '../errors.js';
import type {
  AgentRecord,
  GrantRecord,
  HostRecord,
  RequestedCapability,
  StoreReader,
} from '../storage/types.js';
import { pendingRepeat } from './approval-limits.js';
import { checkCapabilityClaim } from './capability-claim.js';
import { canonicalJson } from '../util/canonical-json.js';
import { approvalObject } from './approval-object.js';
import { announce, createApproval, openApproval, readHints, expireApprovals } from './approvals.js';
import { agentStatusError, hostStatusError, type AgentAuth, type HostAuth } from './authenticate.js';
import type { ProtocolContext } from './context.js';
import {
  baselineCapabilities,
  effectiveConstraints,
  parseCapabilityRequest,
  POLICY_ACTOR,
  SYSTEM_ACTOR,
} from './grants.js';
import { parsePublicJwk, thumbprint } from './keys.js';
import { closePendingApprovals, currentAgent, isGrantEffective, revokeGrants } from './lifecycle.js';
import { putGrants, requestedGrants } from './registration.js';
import { autoGrantableNow } from './stored-policy.js';
import { agentView } from './views.js';
import { agentEvent } from './activity.js';

export function requireAgentId(body: Readonly<Record<string, unknown>>): string {
  const id = body.agent_id;
  if (typeof id !== 'string' || id === '' || id.length > 100) {
    throw new ProtocolError('invalid_request', 'agent_id is required.');
  }
  return id;
}

/** The host's own agent, with due lifetime transitions applied. */
async function ownAgent(
  ctx: ProtocolContext,
  auth: HostAuth,
  agentId: string,
): Promise<{ agent: AgentRecord; host: HostRecord }> {
  const stored = await ctx.store.agent(agentId);
  const host = auth.host;
  if (!stored || !host) throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
  if (stored.hostId !== host.id) {
    throw new ProtocolError('unauthorized', 'This agent is not registered under the calling host.');
  }
  return { agent: await currentAgent(ctx, stored), host };
}

export async function agentStatus(
  ctx: ProtocolContext,
  auth: HostAuth,
  agentId: string,
): Promise<Record<string, unknown>> {
  await expireApprovals(ctx);
  const { agent, host } = await ownAgent(ctx, auth, agentId);
  const view = agentView(ctx, agent, await ctx.store.grants(agent.id), host, { audit: true });
  const approval = await openApproval(ctx, ctx.store, agent.id);
  return approval ? { ...view, approval: approvalObject(ctx, approval) } : view;
}

/** §5.4 */
export function requestCapability(
  ctx: ProtocolContext,
  auth: AgentAuth,
  body: Readonly<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  if (body.capabilities === undefined)
    throw new ProtocolError('invalid_request', 'capabilities is required.');
  const requested = parseCapabilityRequest(ctx, body.capabilities);
  if (requested.length === 0) throw new ProtocolError('invalid_request', 'capabilities must not be empty.');
  for (const r of requested) checkCapabilityClaim(auth, r.name);
  const hints = readHints(body);
  // A grant left pending by an approval that ran out is denied first, so it can be asked again.
  return expireApprovals(ctx).then(() => requestWriting(ctx, auth, requested, hints));
}

function requestWriting(
  ctx: ProtocolContext,
  auth: AgentAuth,
  requested: readonly RequestedCapability[],
  hints: ReturnType<typeof readHints>,
): Promise<Record<string, unknown>> {
  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    const agent = (await tx.agent(auth.agent.id)) ?? auth.agent;
    const host = (await tx.host(agent.hostId)) ?? auth.host;
    // The JWT was checked before the body arrived (up to server.request_timeout): a revocation,
    // an unlink or a claim written meanwhile holds, rather than open a request for what ended.
    if (
      agent.status !== auth.agent.status ||
      host.status !== auth.host.status ||
      host.userId !== auth.host.userId ||
      agent.userId !== auth.agent.userId
    ) {
      throw (
        agentStatusError(agent) ??
        hostStatusError(host) ??
        new ProtocolError(
          'invalid_request',
          'The agent or its host changed while this request was read; send it again.',
        )
      );
    }
    // Issue 16 §3: the same request while it is still pending is a repeat: the same approval
    // (same user code, same expiry), not a new one, and not counted against the user's limit.
    // That includes what an active agent's registration still asks for (granted in part at once).
    const repeat = await pendingRepeat(tx, agent.id, ['capability_request', 'registration'], requested, now);
    if (repeat) {
      const asked = new Set(requested.map((r) => r.name));
      const view = agentView(
        ctx,
        agent,
        (await tx.grants(agent.id)).filter((g) => asked.has(g.capability)),
      );
      return {
        agent_id: agent.id,
        status: agent.status,
        agent_capability_grants: view.agent_capability_grants,
        approval: approvalObject(ctx, repeat),
      };
    }
    const current = new Map((await tx.grants(agent.id)).map((g) => [g.capability, g]));
    // A pending grant is held only while a request that can decide it is open: one left without
    // (drift under the approver's rate limit) is asked anew rather than refused for good.
    const open = new Set(
      (await tx.approvals({ status: 'pending', agentId: agent.id }))
        .filter((a) => a.expiresAt > now)
        .map((a) => a.id),
    );
    // A pending capability asked again with other constraints is asked anew: the new request
    // replaces the pending one, and whoever reviews it sees what changed (§2.13, §7.2).
    const isHeld = (r: RequestedCapability): boolean => {
      const g = current.get(r.name);
      if (g === undefined) return false;
      if (isGrantEffective(g, now)) return true;
      return g.status === 'pending' && g.approvalId !== null && open.has(g.approvalId) && sameTerms(g, r);
    };
    const fresh = requested.filter((r) => !isHeld(r));
    if (fresh.length === 0) {
      throw new ProtocolError(
        'already_granted',
        'All requested capabilities are already granted or pending.',
        {
          fields: { capabilities: requested.map((r) => r.name) },
        },
      );
    }
    // A person's decision on this agent and capability stands over what policy would grant: a
    // denial, or an approval narrowed or time-limited, is asked again rather than replaced by an
    // unconstrained policy grant at the agent's own request (§2.13, §5.3 partial approval).
    const auto = new Set(
      [...(await autoGrantableNow(ctx, tx, host, agent.mode))].filter(
        (name) => !decidedByPerson(current.get(name)),
      ),
    );
    const needsApproval = fresh.filter((r) => !auto.has(r.name));
    const approval = needsApproval.length
      ? await createApproval(ctx, tx, after, 'capability_request', agent, needsApproval, hints)
      : undefined;
    const written = await putGrants(
      tx,
      requestedGrants(ctx, agent.id, fresh, auto, approval, now, hints.reason ?? null),
    );
    await tx.appendActivity(
      agentEvent(agent, {
        at: now,
        type: 'agent.capabilities_requested',
        outcome: approval ? 'pending' : 'granted',
        detail: {
          requested: fresh.map((r) => r.name),
          auto_granted: fresh.filter((r) => auto.has(r.name)).map((r) => r.name),
        },
        jti: auth.claims.jti,
      }),
    );
    const view = agentView(ctx, agent, written);
    return {
      agent_id: agent.id,
      status: agent.status,
      agent_capability_grants: view.agent_capability_grants,
      ...(approval ? { approval: approvalObject(ctx, approval) } : {}),
    };
  });
}

/**
 * Whether a person (an approver, not policy and not an approval's expiry) decided this grant:
 * denied it, or approved it, perhaps narrowed or with an expiry. Revoked grants count too.
 *
 * An approval is kept whatever happened to the grant since: drift (§2.12) suspends it with its
 * approver still in grantedBy, and when nobody answers the re-approval its expiry denies it as
 * the system. That denial decided nothing: the person's narrowing (§2.13) stands, and the
 * capability goes back to a person rather than come back from policy unconstrained. A grant that
 * was only ever asked for has no grantedBy (registration.ts writes each request as a new row).
 */
function decidedByPerson(grant: GrantRecord | undefined): boolean {
  if (grant === undefined) return false;
  if (grant.status === 'revoked') return true;
  if (grant.status === 'denied' && grant.deniedBy !== null && grant.deniedBy !== SYSTEM_ACTOR) return true;
  return grant.grantedBy !== null && grant.grantedBy !== POLICY_ACTOR;
}

/** Whether a pending grant asks exactly what `r` asks: the same proposal and effective terms. */
function sameTerms(g: GrantRecord, r: RequestedCapability): boolean {
  return (
    canonicalJson(g.constraints ?? null) === canonicalJson(r.constraints ?? null) &&
    canonicalJson(g.proposedConstraints ?? null) === canonicalJson(r.proposed ?? null)
  );
}

/**
 * §5.6 step 1: only an expired agent reactivates (true); an active one gets its status back
 * (false: nothing to do); any other status is refused.
 */
function mayReactivate(agent: AgentRecord): boolean {
  switch (agent.status) {
    case 'active':
      return false;
    case 'revoked':
      throw new ProtocolError('agent_revoked');
    case 'rejected':
      throw new ProtocolError('agent_rejected');
    case 'claimed':
      throw new ProtocolError('agent_claimed');
    case 'pending':
      throw new ProtocolError('agent_pending');
    case 'expired':
      return true;
  }
}

/** §5.6, step by step. */
export async function reactivate(
  ctx: ProtocolContext,
  auth: HostAuth,
  body: Readonly<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const agentId = requireAgentId(body);
  const before = (await ctx.store.agent(agentId))?.status;
  const { agent, host } = await ownAgent(ctx, auth, agentId);
  // Step 2 (below) may already have happened in the lookup, which applies the absolute clock:
  // the caller still learns why (§5.6), not a bare agent_revoked.
  if (agent.status === 'revoked' && before !== 'revoked') {
    throw new ProtocolError('absolute_lifetime_exceeded');
  }
  // Step 1.
  if (!mayReactivate(agent)) return agentView(ctx, agent, await ctx.store.grants(agent.id), host);
  const now = ctx.clock.now();
  // Step 2: the absolute lifetime is never reset; once elapsed the agent is revoked for good.
  const absolute = ctx.policy.lifetimes.absoluteLifetimeMs;
  if (absolute !== null && now >= agent.createdAt + absolute) {
    await ctx.write(async (tx) => {
      await tx.updateAgent(agent.id, { status: 'revoked', updatedAt: now });
      await revokeGrants(tx, agent.id, now, 'Absolute lifetime exceeded.');
    });
    throw new ProtocolError('absolute_lifetime_exceeded');
  }
  const hints = readHints(body);
  return ctx.write(async (tx, after) => {
    // Step 1 again on the agent as it is now: another request may have reactivated or revoked it
    // since it was read above.
    const latest = await tx.agent(agent.id);
    if (!latest) throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
    if (!mayReactivate(latest)) return agentView(ctx, latest, await tx.grants(agent.id), host);
    // Step 3: every existing grant goes, and with them every request still open for more: a
    // capability asked for before must be asked for again (§2.5).
    await revokeGrants(tx, agent.id, now, 'Reset by reactivation (§5.6).');
    for (const id of await closePendingApprovals(tx, agent.id, now, 'agent_expired'))
      announce(ctx, after, id);
    // Step 4: the host's defaults, auto-approved only as registration would.
    const baseline = baselineCapabilities(ctx, host, agent.mode).map((name) => {
      const capability = ctx.catalog.get(name);
      const constraints = capability ? effectiveConstraints(ctx, capability, undefined, name) : undefined;
      return constraints ? { name, constraints } : { name };
    });
    const trusted = host.status === 'active' && (agent.mode === 'autonomous' || host.userId !== null);
    const auto = trusted ? await autoGrantableNow(ctx, tx, host, agent.mode) : new Set<string>();
    const needsApproval = baseline.filter((b) => !auto.has(b.name));
    // Step 5–6: new activation, active unless a human must approve first.
    const pending = !trusted;
    const updated: AgentRecord = pending
      ? { ...agent, status: 'pending', updatedAt: now }
      : { ...agent, status: 'active', activatedAt: now, lastUsedAt: null, updatedAt: now };
    await tx.updateAgent(
      agent.id,
      pending
        ? { status: 'pending', updatedAt: now }
        : { status: 'active', activatedAt: now, lastUsedAt: null, updatedAt: now },
    );
    after(() => {
      ctx.usage.reset(agent.id);
    });
    const approval =
      needsApproval.length > 0 || pending
        ? await createApproval(ctx, tx, after, 'reactivation', updated, needsApproval, hints)
        : undefined;
    await putGrants(tx, requestedGrants(ctx, agent.id, baseline, auto, approval, now, null));
    await tx.appendActivity(
      agentEvent(agent, {
        at: now,
        type: 'agent.reactivated',
        outcome: updated.status,
        detail: { baseline: baseline.map((b) => b.name) },
        jti: auth.claims.jti,
      }),
    );
    const view = agentView(ctx, updated, await tx.grants(agent.id), host);
    return approval ? { ...view, approval: approvalObject(ctx, approval) } : view;
  });
}

/**
 * §5.7 (host), §2.6 (the owning user, on the account page) and the operator API: permanent. With
 * `userId`, only that user's own agent (linked to them, or under a host linked to them) is
 * revoked; any other is answered as missing, inside the same transaction, so nothing changes.
 */
export function revokeAgent(
  ctx: ProtocolContext,
  agentId: string,
  actor: { hostId?: string; userId?: string; by: string },
): Promise<Record<string, unknown>> {
  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    const agent = await tx.agent(agentId);
    if (!agent || (actor.userId !== undefined && !(await isUsersAgent(tx, actor.userId, agent)))) {
      throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
    }
    if (actor.hostId !== undefined && agent.hostId !== actor.hostId) {
      throw new ProtocolError('unauthorized', 'This agent is not registered under the calling host.');
    }
    // Claimed and rejected are terminal as revoked is (§2.3): revoking changes none of them.
    if (TERMINAL.has(agent.status)) return { agent_id: agent.id, status: agent.status };
    await tx.updateAgent(agent.id, { status: 'revoked', updatedAt: now });
    await revokeGrants(tx, agent.id, now, 'Agent revoked.');
    for (const id of await closePendingApprovals(tx, agent.id, now, 'agent_revoked'))
      announce(ctx, after, id);
    await tx.appendActivity(
      agentEvent(agent, {
        at: now,
        type: 'agent.revoked',
        outcome: 'revoked',
        detail: { by: actor.by },
      }),
    );
    return { agent_id: agent.id, status: 'revoked' };
  });
}

/** States no revocation changes (§2.3). */
const TERMINAL: ReadonlySet<AgentRecord['status']> = new Set(['revoked', 'claimed', 'rejected']);

/** The user's own agent: linked to them, or registered under a host linked to them (§2.9). */
export async function isUsersAgent(store: StoreReader, userId: string, agent: AgentRecord): Promise<boolean> {
  return agent.userId === userId || (await store.host(agent.hostId))?.userId === userId;
}

/** §5.8: the old key stops working at once (the cache is cleared by the write). */
export async function rotateAgentKey(
  ctx: ProtocolContext,
  auth: HostAuth,
  body: Readonly<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const agentId = requireAgentId(body);
  const parsed = parsePublicJwk(body.public_key);
  if (!parsed.ok) throw new ProtocolError(parsed.code, `public_key: ${parsed.message}`);
  const tp = await thumbprint(parsed.jwk);
  const { agent } = await ownAgent(ctx, auth, agentId);
  refuseRotation(agent);
  // §8.7: the key delivery mode is fixed at registration; a JWKS-based agent rotates at its URL.
  if (agent.jwksUrl) {
    throw new ProtocolError(
      'invalid_request',
      'This agent uses agent_jwks_url: publish the new key there (§8.7).',
    );
  }
  if (tp === auth.thumbprint)
    throw new ProtocolError('invalid_request', 'The agent key must differ from the host key.');
  return ctx.write(async (tx) => {
    const now = ctx.clock.now();
    // The status again as it is now: the agent may have been revoked since it was read above.
    const latest = await tx.agent(agent.id);
    if (!latest) throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
    refuseRotation(latest);
    const clash = await tx.agentByKey(agent.hostId, tp);
    if (clash && clash.id !== agent.id) {
      throw new ProtocolError('agent_exists', 'Another agent of this host already uses that key.');
    }
    await tx.updateAgent(agent.id, { publicJwk: parsed.jwk, keyThumbprint: tp, updatedAt: now });
    await tx.appendActivity(
      agentEvent(agent, {
        at: now,
        type: 'agent.key_rotated',
        outcome: 'rotated',
        detail: null,
        jti: auth.claims.jti,
      }),
    );
    return { agent_id: agent.id, status: agent.status };
  });
}

/** A revoked, rejected or claimed agent keeps its key: it can never act again (§5.8). */
function refuseRotation(agent: AgentRecord): void {
  if (agent.status === 'revoked' || agent.status === 'rejected' || agent.status === 'claimed') {
    throw new ProtocolError(`agent_${agent.status}`);
  }
}
