/**
 * §2.4 lifetime clocks, evaluated on every request: session TTL (sliding, from the last use or
 * activation), max lifetime (from activation) → `expired`; absolute lifetime (from creation) →
 * `revoked`. The stored status changes only when a clock runs out, so steady use costs no write.
 */
import type { ErrorCode } from '../errors.js';
import type { AgentRecord, AgentStatus, GrantRecord, StoreWriter } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { agentEvent } from './activity.js';
import { closePendingPerCalls } from './per-call-events.js';
import { USAGE_FLUSH_MS } from './usage.js';

export interface AgentClocks {
  /**
   * When the active agent stops working if nothing happens: it becomes `expired` (session TTL or
   * max lifetime), or `revoked` when its absolute lifetime comes first. What status, reactivation
   * and introspection report as `expires_at`: never later than the agent can be used (§2.4).
   */
  readonly expiresAt: number | null;
  /** When it becomes `revoked` for good (absolute lifetime). */
  readonly revokesAt: number | null;
}

export function agentClocks(ctx: ProtocolContext, agent: AgentRecord): AgentClocks {
  const { sessionTtlMs, maxLifetimeMs, absoluteLifetimeMs } = ctx.policy.lifetimes;
  const revokesAt = absoluteLifetimeMs === null ? null : agent.createdAt + absoluteLifetimeMs;
  if (agent.status !== 'active' || agent.activatedAt === null) return { expiresAt: null, revokesAt };
  const lastUsed = ctx.usage.lastUsed(agent.id, agent.lastUsedAt);
  const since = Math.max(agent.activatedAt, lastUsed ?? 0);
  const candidates = [
    sessionTtlMs === null ? null : since + sessionTtlMs,
    maxLifetimeMs === null ? null : agent.activatedAt + maxLifetimeMs,
    revokesAt,
  ].filter((t): t is number => t !== null);
  return { expiresAt: candidates.length ? Math.min(...candidates) : null, revokesAt };
}

// A use this close to the session's end is written through at once (usage.ts recordAgentNow): a
// replica hears of other replicas' uses up to two flush intervals late, then commits.
const SHARED_USE_MARGIN_MS = 2 * USAGE_FLUSH_MS + 1_000;

/**
 * Whether a use of `agent` at `now` comes so near the end of its session TTL (§2.4) that another
 * replica, not hearing of it in time, could find the session over: then it is written at once.
 */
export function nearSessionEnd(ctx: ProtocolContext, agent: AgentRecord, now: number): boolean {
  const ttl = ctx.policy.lifetimes.sessionTtlMs;
  if (ttl === null || agent.activatedAt === null) return false;
  const since = Math.max(agent.activatedAt, ctx.usage.lastUsed(agent.id, agent.lastUsedAt) ?? 0);
  return now - since >= ttl - SHARED_USE_MARGIN_MS;
}

/**
 * The status an expiry or absolute-lifetime revocation that has come due moves the agent to;
 * undefined when none has (then the agent stands as stored, and nothing needs writing).
 */
export function dueStatus(ctx: ProtocolContext, agent: AgentRecord): AgentStatus | undefined {
  const now = ctx.clock.now();
  const clocks = agentClocks(ctx, agent);
  const terminal = agent.status === 'revoked' || agent.status === 'rejected' || agent.status === 'claimed';
  // Pending ones too: a registration retried past the absolute lifetime must not become approvable.
  if (!terminal && clocks.revokesAt !== null && now >= clocks.revokesAt) return 'revoked';
  if (agent.status === 'active' && clocks.expiresAt !== null && now >= clocks.expiresAt) return 'expired';
  return undefined;
}

/**
 * The agent as it stands now: applies (and persists) an expiry or absolute-lifetime revocation
 * that has come due. Returns the possibly updated record.
 */
export async function currentAgent(ctx: ProtocolContext, agent: AgentRecord): Promise<AgentRecord> {
  const status = dueStatus(ctx, agent);
  return status === undefined ? agent : applyDueStatus(ctx, agent, status);
}

/**
 * Persists `changed`, the status `dueStatus` found due (the hot path calls it only then), once the
 * stored row, read again in the transaction, still finds it due: another replica may have used
 * the agent since this one last heard (acceptAgent writes such a use through at once).
 */
export async function applyDueStatus(
  ctx: ProtocolContext,
  agent: AgentRecord,
  changed: AgentStatus,
): Promise<AgentRecord> {
  const now = ctx.clock.now();
  return ctx.write(async (tx) => {
    const fresh = await tx.agent(agent.id);
    if (!fresh || fresh.status !== agent.status) return fresh ?? agent;
    if (dueStatus(ctx, fresh) !== changed) return fresh;
    await tx.updateAgent(agent.id, { status: changed, updatedAt: now });
    if (changed === 'revoked') {
      // §2.4: past the absolute lifetime the agent is revoked, exactly as an explicit revocation:
      // no grant stays active and no open approval can revive it.
      await revokeGrants(tx, agent.id, now, 'Absolute lifetime exceeded.');
      await closePendingApprovals(tx, agent.id, now, 'agent_revoked');
    }
    await tx.appendActivity(
      agentEvent(agent, {
        at: now,
        type: changed === 'revoked' ? 'agent.absolute_lifetime_exceeded' : 'agent.expired',
        outcome: changed,
        detail: null,
      }),
    );
    return { ...fresh, status: changed, updatedAt: now };
  });
}

/** §3.3: effective grants are active and not past their own expiry. */
export function isGrantEffective(grant: GrantRecord, now: number): boolean {
  return grant.status === 'active' && (grant.expiresAt === null || grant.expiresAt > now);
}

/** Closes (as `expired`) every approval still open for an agent whose state no longer allows one. */
export async function closePendingApprovals(
  tx: StoreWriter,
  agentId: string,
  now: number,
  /** What the agent's pending per-call approvals fail with (agent_revoked, agent_claimed, …). */
  perCallError: ErrorCode,
): Promise<string[]> {
  const closed: string[] = [];
  for (const a of await tx.approvals({ status: 'pending', agentId })) {
    await tx.updateApproval(a.id, { status: 'expired', decidedAt: now });
    closed.push(a.id);
  }
  await closePendingPerCalls(tx, agentId, now, perCallError);
  // The ids closed, for callers that tell §10.10.2 listeners (others are seen at the next keep-alive).
  return closed;
}

/** Moves every current grant of an agent to the internal `revoked` state. */
export async function revokeGrants(
  tx: StoreWriter,
  agentId: string,
  now: number,
  reason: string,
): Promise<void> {
  for (const grant of await tx.grants(agentId)) {
    if (grant.status === 'revoked') continue;
    await tx.updateGrant(grant.id, { status: 'revoked', reason, updatedAt: now });
  }
}
