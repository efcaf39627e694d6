/**
 * Bounds on what a host nobody has approved can make the proxy store (§2.11, §8.10; policy
 * `pending_hosts`). Any self-signed key can register (§5.3), so without them a stranger could
 * fill the database with hosts, agents and approval requests. Checked inside the registration's
 * transaction, so concurrent registrations cannot overshoot. Pending rows are deleted once older
 * than `lifetimes.pending_cleanup` (§10.9), which frees the room again.
 */
import { ProtocolError } from '../errors.js';
import type { AgentRecord, HostRecord, StoreWriter } from '../storage/types.js';
import type { ProtocolContext } from './context.js';

/** Retry-After for a full set of pending hosts: a human approving, or cleanup, frees room. */
const PENDING_HOSTS_RETRY_AFTER_SEC = 60;

/**
 * Hosts nobody has approved: pending ones, and those admitted by policy alone
 * (`autonomous.bootstrap: policy`, §2.2.2) while unlinked. Both are a stranger's doing.
 */
export function isUnapproved(host: HostRecord): boolean {
  return (
    host.status === 'pending' || (host.status === 'active' && host.admittedByPolicy && host.userId === null)
  );
}

/**
 * A new, unknown host is about to be stored, pending or admitted by policy: refused when too many
 * hosts nobody approved are already stored.
 */
export async function admitNewPendingHost(ctx: ProtocolContext, tx: StoreWriter): Promise<void> {
  const max = ctx.policy.pendingHosts.maxHosts;
  if ((await tx.countHosts('pending')) + (await tx.countPolicyAdmittedHosts()) >= max) {
    throw new ProtocolError(
      'rate_limited',
      `${max} hosts nobody has approved are already stored, the most this server keeps (policy pending_hosts.max_hosts = ${max}); retry later.`,
      {
        headers: { 'retry-after': String(PENDING_HOSTS_RETRY_AFTER_SEC) },
        fields: { limit: 'pending_hosts.max_hosts', maximum: max },
      },
    );
  }
}

/** A pending host registers one more agent (with its approval request). */
export async function admitPendingHostAgent(
  ctx: ProtocolContext,
  tx: StoreWriter,
  host: HostRecord,
  now: number,
): Promise<void> {
  if (!isUnapproved(host)) return;
  await refuseFullPendingHost(ctx, tx, host);
  await admitPendingHostApproval(ctx, tx, host, now);
}

/**
 * Refused when a host nobody approved already has `pending_hosts.max_agents` agents. Also run
 * before anything of a registration costs work (its agent's JWKS URL fetched), outside the
 * transaction; admitPendingHostAgent checks again inside it.
 */
export async function refuseFullPendingHost(
  ctx: ProtocolContext,
  store: Pick<StoreWriter, 'agents'>,
  host: HostRecord,
): Promise<void> {
  if (!isUnapproved(host)) return;
  const max = ctx.policy.pendingHosts.maxAgents;
  if ((await store.agents({ hostId: host.id, limit: max })).length >= max) {
    throw pendingHostFull(
      'pending_hosts.max_agents',
      max,
      `${notApproved(host)} and already has ${max} agents`,
    );
  }
}

/** A pending host gets one more open approval request. */
export async function admitPendingHostApproval(
  ctx: ProtocolContext,
  tx: StoreWriter,
  host: HostRecord,
  now: number,
): Promise<void> {
  if (!isUnapproved(host)) return;
  const max = ctx.policy.pendingHosts.maxOpenApprovals;
  if ((await tx.countOpenApprovals(host.id, now)) >= max) {
    throw pendingHostFull(
      'pending_hosts.max_open_approvals',
      max,
      `${notApproved(host)} and already has ${max} open approval requests`,
    );
  }
}

function notApproved(host: HostRecord): string {
  return host.status === 'pending'
    ? 'This host is not approved yet'
    : 'This host was admitted by policy, not approved by a person,';
}

/**
 * A never-activated pending agent retried its registration after its approval request expired: the
 * expired requests can never be decided, so they go rather than pile up once per expiry (§7.1).
 */
export async function dropExpiredRegistrationApprovals(tx: StoreWriter, agent: AgentRecord): Promise<void> {
  if (agent.status !== 'pending' || agent.activatedAt !== null) return;
  for (const approval of await tx.approvals({ agentId: agent.id, status: 'expired' })) {
    if (approval.kind === 'registration') await tx.deleteApproval(approval.id);
  }
}

function pendingHostFull(limit: string, maximum: number, what: string): ProtocolError {
  return new ProtocolError(
    'host_pending',
    `${what}, the most a host may have before a human approves it (policy ${limit} = ${maximum}).`,
    { fields: { limit, maximum } },
  );
}
