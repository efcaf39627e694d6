/**
 * §2.12 capability drift, applied at start-up and after every reload: an active grant approved
 * at another version of its capability (capability-version.ts) no longer covers what the
 * capability does now. It becomes pending under a fresh approval request, keeping its old version
 * so execution can say re-approval is needed; approving it stamps the new version. Removed
 * capabilities need nothing here: execution refuses them (§2.12, execute.ts). Grants stored
 * before migration 13 have no version and are adopted at the current one.
 */
import { ProtocolError } from '../errors.js';
import type { Logger } from '../log.js';
import type { AgentRecord, GrantRecord, StoreWriter } from '../storage/types.js';
import { capabilityVersion } from './capability-version.js';
import type { AfterCommit, ProtocolContext } from './context.js';
import { createApproval } from './approvals.js';
import { requestedFromGrant } from './grants.js';

export interface DriftOutcome {
  /** Grants suspended until re-approved, by capability. */
  readonly suspended: ReadonlyMap<string, number>;
  /** Grants without a version (stored before migration 13) stamped with the current one. */
  readonly adopted: number;
}

export function applyDrift(ctx: ProtocolContext): Promise<DriftOutcome> {
  // The counts are the transaction's result, not variables it changes: it may run more than once.
  return ctx.write(async (tx, after) => {
    const suspended = new Map<string, number>();
    let adopted = 0;
    const now = ctx.clock.now();
    const byAgent = new Map<string, GrantRecord[]>();
    // Hashing a capability costs as much as its schemas are large: only the held ones are hashed.
    const held = await tx.grantedCapabilities(ctx.catalog.capabilities.map((c) => c.name));
    for (const capability of ctx.catalog.capabilities) {
      if (!held.has(capability.name)) continue;
      const version = capabilityVersion(capability);
      for (const grant of await tx.grantsOffVersion(capability.name, version)) {
        if (grant.capabilityVersion === null || grant.capabilityVersion === undefined) {
          await tx.updateGrant(grant.id, { capabilityVersion: version });
          adopted++;
          continue;
        }
        byAgent.set(grant.agentId, [...(byAgent.get(grant.agentId) ?? []), grant]);
        suspended.set(capability.name, (suspended.get(capability.name) ?? 0) + 1);
      }
    }
    for (const [agentId, grants] of byAgent) {
      const agent = await tx.agent(agentId);
      if (!agent) continue;
      await suspend(ctx, tx, after, agent, grants, now);
    }
    return { suspended, adopted };
  });
}

/** One approval request per agent for all its changed capabilities (pending grants, §3.3). */
async function suspend(
  ctx: ProtocolContext,
  tx: StoreWriter,
  after: AfterCommit,
  agent: AgentRecord,
  grants: readonly GrantRecord[],
  now: number,
): Promise<void> {
  for (const g of grants) {
    await tx.updateGrant(g.id, { status: 'pending', approvalId: null, updatedAt: now });
  }
  if (agent.status !== 'active') return;
  const names = grants.map((g) => g.capability).join(', ');
  try {
    const approval = await createApproval(
      ctx,
      tx,
      after,
      'capability_request',
      agent,
      grants.map(requestedFromGrant),
      { reason: `Changed since approved, re-approval needed: ${names} (§2.12).` },
    );
    for (const g of grants) await tx.updateGrant(g.id, { approvalId: approval.id, updatedAt: now });
  } catch (err) {
    // The approver's rate limit (approval-limits.ts) must not stop a start-up: the grants stay
    // pending without a request; the agent asks again (§5.4). Anything else (a database error)
    // ends the transaction.
    if (!(err instanceof ProtocolError)) throw err;
    after(() => {
      ctx.logger.warn('drift: no approval request created', {
        agent: agent.id,
        capabilities: names,
        error: err.message,
      });
    });
  }
}

/** What drift did, for the operator: suspended grants are a warning (users must re-approve). */
export function logDrift(logger: Logger, outcome: DriftOutcome): void {
  if (outcome.adopted > 0)
    logger.info('grants stamped with their capability version', { grants: outcome.adopted });
  for (const [capability, grants] of outcome.suspended) {
    logger.warn('capability changed since approved: grants wait for re-approval (§2.12)', {
      capability,
      grants,
    });
  }
}
