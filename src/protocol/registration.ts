/**
 * §5.3 agent registration: dynamic hosts (§2.8), idempotent retry of a pending registration,
 * auto-approval for linked hosts within their defaults (§2.9), approval otherwise (§7), and the
 * §8.10 rule that an unknown host gets nothing until a human approves, and may store only so much
 * until then (pending-hosts.ts).
 */
import { currentVersion } from './capability-version.js';
import { ProtocolError } from '../errors.js';
import type {
  AgentMode,
  AgentRecord,
  ApprovalRecord,
  GrantRecord,
  RequestedCapability,
  StoreWriter,
} from '../storage/types.js';
import { approvalObject } from './approval-object.js';
import { createApproval, displayText, openApproval, readHints } from './approvals.js';
import type { HostAuth } from './authenticate.js';
import { newId, type ProtocolContext } from './context.js';
import { parseCapabilityRequest, POLICY_ACTOR, requestedFromGrant } from './grants.js';
import { autoGrantableNow } from './stored-policy.js';
import { agentKeyFromUrl, type RegisteredAgentKey } from './jwks-auth.js';
import { parsePublicJwk, thumbprint } from './keys.js';
import { agentView } from './views.js';
import { protocolEvent } from './activity.js';
import {
  admitNewPendingHost,
  admitPendingHostAgent,
  admitPendingHostApproval,
  dropExpiredRegistrationApprovals,
  refuseFullPendingHost,
} from './pending-hosts.js';

/** Where a registration request came from: kept with a new host (RFC 8628 §5.4, issue 16). */
export interface RegistrationOrigin {
  readonly ip: string;
  /** Already capped and cleaned (decision-record.ts cleanUserAgent). */
  readonly userAgent: string | null;
}

export async function registerAgent(
  ctx: ProtocolContext,
  auth: HostAuth,
  body: Readonly<Record<string, unknown>>,
  origin?: RegistrationOrigin,
): Promise<Record<string, unknown>> {
  if (auth.host) await refuseFullPendingHost(ctx, ctx.store, auth.host);
  const agentKey = await registeredAgentKey(ctx, auth);
  const agentThumbprint = await thumbprint(agentKey.jwk);
  if (agentThumbprint === auth.thumbprint) {
    throw new ProtocolError('invalid_request', 'The agent key must differ from the host key.');
  }

  const name = displayText(body.name, 'name', 200);
  if (!name) throw new ProtocolError('invalid_request', 'name is required.');
  const hostName = displayText(body.host_name, 'host_name', 200);
  const modeRaw = body.mode ?? 'delegated';
  if (modeRaw !== 'delegated' && modeRaw !== 'autonomous') {
    throw new ProtocolError('unsupported_mode', `mode must be "delegated" or "autonomous".`);
  }
  const mode: AgentMode = modeRaw;
  // §2.2: a server MUST reject registration for a mode it does not support.
  if (!ctx.policy.modes.includes(mode)) {
    throw new ProtocolError('unsupported_mode', `This server does not support ${mode} agents.`, {
      fields: { supported_modes: ctx.policy.modes },
    });
  }
  const requested =
    body.capabilities === undefined ? [] : parseCapabilityRequest(ctx, body.capabilities, 'capabilities');
  const hints = readHints(body);

  return ctx.write(async (tx, after) => {
    const now = ctx.clock.now();
    let host = await tx.hostByThumbprint(auth.thumbprint);
    if (host && (host.status === 'revoked' || host.status === 'rejected')) {
      // §2.11: a terminal host MUST NOT register agents.
      throw new ProtocolError(host.status === 'revoked' ? 'host_revoked' : 'host_rejected');
    }
    if (mode === 'autonomous' && host?.userId) {
      throw new ProtocolError(
        'unsupported_mode',
        'This host is linked to a user: register a delegated agent (autonomous agents of linked hosts are claimed, §2.10).',
      );
    }
    if (!host) {
      // §5.9: "the old key stops working immediately". Beyond the spec, it does not come back as a
      // new host either: a leaked key a host rotated away would otherwise open a pending host that
      // a person might approve as theirs.
      if (await tx.retiredHostKey(auth.thumbprint)) {
        throw new ProtocolError(
          'invalid_jwt',
          'This key was rotated away from a host (§5.9) and no longer works.',
        );
      }
      await admitNewPendingHost(ctx, tx);
      // §2.2.2 bootstrap: with `autonomous.bootstrap: policy` server policy, not a person, admits
      // an unknown host for an autonomous agent. Its agents get only what autonomousGrants allows
      // (never high-risk or blocked), and it stays within the pending-host bounds (isUnapproved).
      const admitted = mode === 'autonomous' && ctx.policy.autonomousBootstrap === 'policy';
      host = {
        id: newId('hst'),
        thumbprint: auth.thumbprint,
        publicJwk: auth.publicJwk,
        jwksUrl: auth.jwksUrl ?? null,
        name: hostName ?? null,
        userId: null,
        defaultCapabilities: [],
        status: admitted ? 'active' : 'pending',
        preRegistered: false,
        admittedByPolicy: admitted,
        registeredIp: origin?.ip ?? null,
        registeredUserAgent: origin?.userAgent ?? null,
        activatedAt: admitted ? now : null,
        lastUsedAt: now,
        createdAt: now,
        updatedAt: now,
      };
      await tx.insertHost(host);
      if (admitted) {
        await tx.appendActivity(
          protocolEvent({
            at: now,
            type: 'host.admitted_by_policy',
            agentId: null,
            hostId: host.id,
            userId: null,
            capability: null,
            outcome: 'active',
            detail: { policy: 'autonomous.bootstrap' },
            jti: auth.claims.jti,
          }),
        );
      }
    } else if (hostName && hostName !== host.name) {
      await tx.updateHost(host.id, { name: hostName, updatedAt: now });
      host = { ...host, name: hostName };
    }

    const existing = await tx.agentByKey(host.id, agentThumbprint);
    if (existing) {
      if (existing.status !== 'pending') {
        throw new ProtocolError(
          'agent_exists',
          `An agent with this key is already registered under this host (${existing.status}); generate a new agent key.`,
          { fields: { agent_id: existing.id } },
        );
      }
      // §5.3: a pending registration retried with the same key is idempotent.
      let approval = await openApproval(ctx, tx, existing.id);
      if (!approval) {
        await admitPendingHostApproval(ctx, tx, host, now);
        // The earlier request expired: a fresh one (new user code) takes over its pending grants.
        const fresh = await createApproval(
          ctx,
          tx,
          after,
          'registration',
          existing,
          requestedFromGrants(await tx.grants(existing.id)),
          hints,
        );
        for (const g of await tx.grants(existing.id)) {
          if (g.status === 'pending') await tx.updateGrant(g.id, { approvalId: fresh.id, updatedAt: now });
        }
        await dropExpiredRegistrationApprovals(tx, existing);
        approval = fresh;
      }
      return {
        ...agentView(ctx, existing, await tx.grants(existing.id), host),
        approval: approvalObject(ctx, approval),
      };
    }

    await admitPendingHostAgent(ctx, tx, host, now);
    const agent: AgentRecord = {
      id: newId('agt'),
      hostId: host.id,
      userId: mode === 'delegated' ? host.userId : null,
      name,
      publicJwk: agentKey.jwk,
      keyThumbprint: agentThumbprint,
      jwksUrl: agentKey.jwksUrl,
      jwksKid: agentKey.jwksKid,
      mode,
      status: 'pending',
      lastUsedAt: null,
      activatedAt: null,
      createdAt: now,
      updatedAt: now,
    };
    // §2.11: under a pending host the agent stays pending; an unlinked host cannot vouch for a
    // delegated agent's user, so a human decides (§2.9).
    const hostTrusted = host.status === 'active' && (mode === 'autonomous' || host.userId !== null);
    const auto = hostTrusted ? await autoGrantableNow(ctx, tx, host, mode) : new Set<string>();
    const needsApproval = requested.filter((r) => !auto.has(r.name));
    const activeNow = hostTrusted;
    const finalAgent: AgentRecord = activeNow ? { ...agent, status: 'active', activatedAt: now } : agent;
    await tx.insertAgent(finalAgent);
    const approval =
      needsApproval.length > 0 || !activeNow
        ? await createApproval(ctx, tx, after, 'registration', finalAgent, needsApproval, hints)
        : undefined;
    // A new agent has no grants to replace, and its answer shows what was just written: neither
    // is read back, which on PostgreSQL would conflict with other agents' registrations.
    const grants = requestedGrants(ctx, finalAgent.id, requested, auto, approval, now, hints.reason ?? null);
    for (const grant of grants) await tx.insertGrant(grant);
    await tx.appendActivity(
      protocolEvent({
        at: now,
        type: 'agent.registered',
        agentId: finalAgent.id,
        hostId: host.id,
        userId: finalAgent.userId,
        capability: null,
        outcome: finalAgent.status,
        detail: {
          mode,
          requested: requested.map((r) => r.name),
          auto_granted: [...auto].filter((n) => requested.some((r) => r.name === n)),
        },
        jti: auth.claims.jti,
      }),
    );
    const view = agentView(ctx, finalAgent, grants, host);
    return approval ? { ...view, approval: approvalObject(ctx, approval) } : view;
  });
}

/** §4.2: the agent's key, inline (`agent_public_key`) or from `agent_jwks_url` by `agent_kid`. */
async function registeredAgentKey(ctx: ProtocolContext, auth: HostAuth): Promise<RegisteredAgentKey> {
  const { claims } = auth;
  if (claims.agent_jwks_url !== undefined) return agentKeyFromUrl(ctx, claims, auth.jwksUrl);
  if (claims.agent_public_key === undefined) {
    throw new ProtocolError(
      'invalid_request',
      'Registration needs agent_public_key or agent_jwks_url in the host JWT (§4.2).',
    );
  }
  const parsed = parsePublicJwk(claims.agent_public_key);
  if (!parsed.ok) throw new ProtocolError(parsed.code, `agent_public_key: ${parsed.message}`);
  return { jwk: parsed.jwk, jwksUrl: null, jwksKid: null };
}

/** Writes `grants`, each replacing the agent's row for its capability (putGrant); returns them. */
export async function putGrants(tx: StoreWriter, grants: readonly GrantRecord[]): Promise<GrantRecord[]> {
  for (const grant of grants) await tx.putGrant(grant);
  return [...grants];
}

/**
 * One grant per requested capability, not yet written: active (granted by policy) when `auto`
 * holds it, else pending under `approval`. Registration, capability requests and reactivation all
 * decide grants this way.
 */
export function requestedGrants(
  ctx: ProtocolContext,
  agentId: string,
  requested: readonly RequestedCapability[],
  auto: ReadonlySet<string>,
  approval: ApprovalRecord | undefined,
  now: number,
  reason: string | null,
): GrantRecord[] {
  return requested.map((r) => {
    const granted = auto.has(r.name);
    return {
      id: newId('grt'),
      agentId,
      capability: r.name,
      status: granted ? 'active' : 'pending',
      constraints: r.constraints ?? null,
      proposedConstraints: r.proposed ?? null,
      approvedConstraints: null,
      grantedBy: granted ? POLICY_ACTOR : null,
      deniedBy: null,
      reason,
      expiresAt: null,
      approvalId: granted ? null : (approval?.id ?? null),
      // §2.12: what the policy granted is the capability as it is now.
      capabilityVersion: granted ? currentVersion(ctx.catalog, r.name) : null,
      createdAt: now,
      updatedAt: now,
    };
  });
}

function requestedFromGrants(grants: readonly GrantRecord[]): RequestedCapability[] {
  return grants.filter((g) => g.status === 'pending').map(requestedFromGrant);
}
