/**
 * The signed-in user's own agents and hosts (issue 11, `{issuer}/account`): what they may do, what
 * they did lately, and what a user may do about them — revoke an agent (§2.6: "the owning user …
 * through the server's management UI"), revoke a host with its agents (§8.8.1: "an out-of-band
 * mechanism … for users to revoke hosts") and delete an agent's activity records (§9.2).
 * An agent is the user's when it is linked to them or registered under a host linked to them
 * (§2.9); every other agent is answered as missing, so the page reveals nothing about others.
 */
import { ProtocolError } from '../errors.js';
import type { ActivityRecord, AgentRecord, GrantRecord, HostRecord } from '../storage/types.js';
import { protocolEvent } from './activity.js';
import { isUsersAgent, revokeAgent } from './agents.js';
import type { ProtocolContext } from './context.js';
import { revokeHostIn } from './hosts.js';
import { currentAgent } from './lifecycle.js';
import { grantEnding, type GrantEnding } from './grant-ending.js';

/** Agents per page of the account page. */
export const ACCOUNT_PAGE_SIZE = 20;
/** Most recent activity records shown per agent. */
export const RECENT_ACTIVITY = 5;
/** Grant rows shown per agent (one per capability, so only a huge catalog reaches it). */
export const MAX_GRANTS_SHOWN = 50;
/** Active hosts linked to the user shown on the page (and read: one more, to tell there are more). */
export const MAX_HOSTS_SHOWN = 50;
/**
 * Activity rows one "Delete activity records" deletes, in one transaction: a short write lock
 * even for an agent with millions of rows; the page offers the button again while rows remain.
 */
export const ACTIVITY_DELETE_BATCH = 10_000;

/** One grant as the account page shows it (issue 16 §5). */
export interface AccountGrant {
  readonly grant: GrantRecord;
  /** Calls made with it, from the coalesced counters (migration 12) plus those not yet flushed. */
  readonly uses: number;
  readonly lastUsedAt: number | null;
  /** Why it ended; null while it is allowed or still asked for. */
  readonly ending: GrantEnding | null;
}

export interface AccountAgent {
  readonly agent: AgentRecord;
  readonly host: HostRecord | undefined;
  /** Every grant row, ended ones included (they say why they ended), at most MAX_GRANTS_SHOWN. */
  readonly grants: readonly AccountGrant[];
  readonly moreGrants: number;
  /** When it last made a request, as far as this process knows (§10.2 coalesced writes). */
  readonly lastUsedAt: number | null;
  readonly recent: readonly ActivityRecord[];
}

export interface AccountAgents {
  /** The user's active hosts, oldest first, at most MAX_HOSTS_SHOWN. */
  readonly hosts: readonly HostRecord[];
  /** More active hosts than shown. */
  readonly moreHosts: boolean;
  readonly agents: readonly AccountAgent[];
  readonly total: number;
  /** 1-based; clamped to the pages there are. */
  readonly page: number;
  readonly pages: number;
}

/** One page of the user's agents, newest first, with lifetime clocks applied (§2.4). */
export async function accountAgents(
  ctx: ProtocolContext,
  userId: string,
  requestedPage: number,
): Promise<AccountAgents> {
  const total = await ctx.store.countAgentsOfUser(userId);
  const pages = Math.max(1, Math.ceil(total / ACCOUNT_PAGE_SIZE));
  const page = Math.min(Math.max(1, Math.trunc(requestedPage) || 1), pages);
  const rows = await ctx.store.agentsOfUser(userId, {
    limit: ACCOUNT_PAGE_SIZE,
    offset: (page - 1) * ACCOUNT_PAGE_SIZE,
  });
  // Connected apps: the active hosts (a disconnected one is history), a bounded read.
  const listed = await ctx.store.hosts({ userId, status: 'active', limit: MAX_HOSTS_SHOWN + 1 });
  const hosts = listed.slice(0, MAX_HOSTS_SHOWN);
  const hostById = new Map<string, HostRecord | undefined>(hosts.map((h) => [h.id, h]));
  const agents: AccountAgent[] = [];
  for (const stored of rows) {
    const agent = await currentAgent(ctx, stored);
    if (!hostById.has(agent.hostId)) hostById.set(agent.hostId, await ctx.store.host(agent.hostId));
    const grants = await ctx.store.grants(agent.id);
    // One indexed read of the counters per agent: no counting of activity rows at page time.
    const counters = await ctx.store.grantUses(agent.id);
    const now = ctx.clock.now();
    agents.push({
      agent,
      host: hostById.get(agent.hostId),
      grants: grants.slice(0, MAX_GRANTS_SHOWN).map((grant) => ({
        grant,
        ...ctx.usage.grantUse(grant.id, counters.get(grant.id)),
        ending: grantEnding(grant, agent, now),
      })),
      moreGrants: Math.max(0, grants.length - MAX_GRANTS_SHOWN),
      lastUsedAt: ctx.usage.lastUsed(agent.id, agent.lastUsedAt),
      recent: await ctx.store.activity({ agentId: agent.id, limit: RECENT_ACTIVITY }),
    });
  }
  return {
    hosts,
    moreHosts: listed.length > MAX_HOSTS_SHOWN,
    agents,
    total,
    page,
    pages,
  };
}

/** The user revokes one of their agents, exactly as a host or the operator would (§5.7). */
export async function revokeOwnAgent(
  ctx: ProtocolContext,
  userId: string,
  agentId: string,
): Promise<AgentRecord> {
  await revokeAgent(ctx, agentId, { userId, by: userId });
  return (await ctx.store.agent(agentId)) as AgentRecord;
}

export interface RevokedHost {
  readonly host: HostRecord;
  /** Agents the cascade revoked (§5.10); 0 when the host was revoked already. */
  readonly agentsRevoked: number;
}

/**
 * §8.8.1: the user revokes one of their hosts, and so every agent under it, as the host itself
 * or the operator would (§5.10). Only a host linked to this user; another user's reads as missing.
 * Repeating it changes nothing.
 */
export function revokeOwnHost(ctx: ProtocolContext, userId: string, hostId: string): Promise<RevokedHost> {
  return ctx.write(async (tx, after) => {
    const host = await tx.host(hostId);
    if (!host || host.userId !== userId) throw new ProtocolError('host_not_found', `No host "${hostId}".`);
    if (host.status === 'revoked') return { host, agentsRevoked: 0 };
    const agentsRevoked = await revokeHostIn(ctx, tx, after, host, userId);
    return { host: { ...host, status: 'revoked' }, agentsRevoked };
  });
}

/** Activity records per page of one agent's full history. */
export const ACTIVITY_PAGE_SIZE = 50;

export interface AgentActivityPage {
  readonly agent: AgentRecord;
  /** Newest first, at most ACTIVITY_PAGE_SIZE. */
  readonly records: readonly ActivityRecord[];
  /** The `before` of the next (older) page; null on the last. */
  readonly olderBefore: number | null;
}

/**
 * §9.2 "the ability to view … agent activity data": all of one of the user's agents' records, a
 * page at a time (keyset, newest first), where the account page shows the last RECENT_ACTIVITY.
 * Any other agent reads as missing.
 */
export async function ownAgentActivity(
  ctx: ProtocolContext,
  userId: string,
  agentId: string,
  beforeId: number | undefined,
): Promise<AgentActivityPage> {
  const agent = await ctx.store.agent(agentId);
  if (!agent || !(await isUsersAgent(ctx.store, userId, agent))) {
    throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
  }
  const rows = await ctx.store.activity({
    agentId,
    limit: ACTIVITY_PAGE_SIZE + 1,
    ...(beforeId !== undefined ? { beforeId } : {}),
  });
  const records = rows.slice(0, ACTIVITY_PAGE_SIZE);
  const last = records[records.length - 1];
  const olderBefore = rows.length > ACTIVITY_PAGE_SIZE && last?.id !== undefined ? last.id : null;
  return { agent: await currentAgent(ctx, agent), records, olderBefore };
}

export interface DeletedActivity {
  readonly agent: AgentRecord;
  readonly deleted: number;
  /** Rows were left for another press (more than ACTIVITY_DELETE_BATCH). */
  readonly more: boolean;
}

/**
 * §9.2: the user deletes an agent's activity records, at most ACTIVITY_DELETE_BATCH per call.
 * One record says that it happened (who, how many; nothing of what was deleted), so the operator
 * can tell a deletion from records that never were.
 */
export function deleteOwnActivity(
  ctx: ProtocolContext,
  userId: string,
  agentId: string,
): Promise<DeletedActivity> {
  return ctx.write(async (tx) => {
    const agent = await tx.agent(agentId);
    if (!agent || !(await isUsersAgent(tx, userId, agent))) {
      throw new ProtocolError('agent_not_found', `No agent "${agentId}".`);
    }
    const deleted = await tx.deleteAgentActivity(agent.id, ACTIVITY_DELETE_BATCH);
    const more = (await tx.activity({ agentId: agent.id, limit: 1 })).length > 0;
    await tx.appendActivity(
      protocolEvent({
        at: ctx.clock.now(),
        type: 'user.activity_deleted',
        // Not tied to the agent: its own records are what the user asked to be rid of.
        agentId: null,
        hostId: agent.hostId,
        userId,
        capability: null,
        outcome: 'deleted',
        detail: { agent_id: agent.id, records: deleted },
      }),
    );
    return { agent, deleted, more };
  });
}
