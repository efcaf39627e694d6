/** Wire shapes of stored records (§5.3, §5.5): the one place records become response JSON. */
import type { AgentRecord, GrantRecord, HostRecord } from '../storage/types.js';
import { iso, type ProtocolContext } from './context.js';
import { currentGrants, grantView } from './grants.js';
import { agentClocks } from './lifecycle.js';

/**
 * The §5.5 agent object with its grants. Used by register, status and reactivate; the top-level
 * `status` is what the reference SDK reads (interop, README).
 */
export function agentView(
  ctx: ProtocolContext,
  agent: AgentRecord,
  grants: readonly GrantRecord[],
  host?: HostRecord,
  options: { audit?: boolean } = {},
): Record<string, unknown> {
  const clocks = agentClocks(ctx, agent);
  const lastUsed = ctx.usage.lastUsed(agent.id, agent.lastUsedAt);
  return {
    agent_id: agent.id,
    host_id: agent.hostId,
    name: agent.name,
    status: agent.status,
    mode: agent.mode,
    agent_capability_grants: currentGrants(grants).map((g) => grantView(ctx, g, options.audit)),
    ...(agent.userId ? { user_id: agent.userId } : {}),
    ...(agent.activatedAt !== null && agent.status === 'active'
      ? { activated_at: iso(agent.activatedAt) }
      : {}),
    created_at: iso(agent.createdAt),
    ...(lastUsed !== null ? { last_used_at: iso(lastUsed) } : {}),
    ...(clocks.expiresAt !== null ? { expires_at: iso(clocks.expiresAt) } : {}),
    ...(host?.name ? { host_name: host.name } : {}),
  };
}

export function hostView(host: HostRecord): Record<string, unknown> {
  return {
    host_id: host.id,
    name: host.name,
    status: host.status,
    user_id: host.userId,
    thumbprint: host.thumbprint,
    public_key: host.publicJwk,
    // §3.1: present for JWKS-based hosts; `public_key` is then the key they last signed with.
    ...(host.jwksUrl ? { jwks_url: host.jwksUrl } : {}),
    default_capabilities: host.defaultCapabilities,
    pre_registered: host.preRegistered,
    admitted_by_policy: host.admittedByPolicy,
    activated_at: iso(host.activatedAt) ?? null,
    last_used_at: iso(host.lastUsedAt) ?? null,
    created_at: iso(host.createdAt),
    updated_at: iso(host.updatedAt),
  };
}
