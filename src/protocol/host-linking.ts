/**
 * §2.9 linking a host to its user, with §2.10 claiming of its autonomous agents. Approving a
 * registration may link the agent's host (approval-decisions.ts), and so may the operator
 * (hosts.ts).
 */
import { ProtocolError } from '../errors.js';
import type { AgentStatus, HostRecord, StoreWriter } from '../storage/types.js';
import { agentEvent, protocolEvent } from './activity.js';
import type { ProtocolContext } from './context.js';
import { closePendingApprovals, revokeGrants } from './lifecycle.js';

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
    await closePendingApprovals(tx, agent.id, now, 'agent_claimed');
    await tx.updateAgent(agent.id, { status: 'claimed', userId, updatedAt: now });
    await tx.appendActivity(
      agentEvent(
        { ...agent, userId },
        { at: now, type: 'agent.claimed', outcome: 'claimed', detail: { user_id: userId } },
      ),
    );
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

export const CLAIMABLE: ReadonlySet<AgentStatus> = new Set(['active', 'expired', 'pending']);
