/**
 * Grants held to what is in force now, at start-up and after every reload (both run this):
 *
 * - §2.12 capability drift: an active grant approved at another version of its capability
 *   (capability-version.ts) no longer covers what the capability does now. It becomes pending
 *   under a fresh approval request, keeping its old version so execution can say re-approval is
 *   needed; approving it stamps the new version.
 * - Policy that no longer grants, after a reload or a restart with another policy than the last
 *   drift's (stored: PolicyGrants): a grant policy made (granted_by "policy",
 *   nobody was asked) for a capability the new policy would not give that agent (high-risk now,
 *   or out of the defaults, the autonomous grants or its host's defaults) was only ever as good as
 *   the policy. It becomes pending under an approval request too, for a person: high-risk
 *   capabilities are never auto-approved. A person's grant stays: their decision is not policy's
 *   to take back. Only capabilities the policy stopped granting are read (stoppedGranting): the
 *   store has no query by granted_by, and reading every grant would hold the write transaction
 *   for seconds on a large database (about 5 s for 300,000 grants, where drift takes 50 ms).
 *
 * A grant past its own expiry (§3.3 `expires_at`) has ended and is left alone: asking to
 * re-approve it would bring back what the person let lapse. Removed capabilities need nothing
 * here: execution refuses them (§2.12, execute.ts), as it does blocked ones, whose grants stay
 * as they are until unblocked. Grants stored before migration 13 have no version and are adopted
 * at the current one.
 */
import { ProtocolError } from '../errors.js';
import type { Logger } from '../log.js';
import type { AgentRecord, GrantRecord, StoreWriter } from '../storage/types.js';
import { capabilityVersion } from './capability-version.js';
import type { AfterCommit, ProtocolContext } from './context.js';
import { createApproval } from './approvals.js';
import { policyGrantable, POLICY_ACTOR, requestedFromGrant } from './grants.js';
import { isGrantEffective } from './lifecycle.js';
import {
  policyGrants,
  storedForm,
  storedPolicyGrants,
  withAbsent,
  type PolicyGrants,
} from './stored-policy.js';

export interface DriftOutcome {
  /** Grants suspended until re-approved because their capability changed, by capability. */
  readonly suspended: ReadonlyMap<string, number>;
  /** Policy-made grants the policy in force no longer makes, suspended for a person, by capability. */
  readonly ungranted: ReadonlyMap<string, number>;
  /** Grants without a version (stored before migration 13) stamped with the current one. */
  readonly adopted: number;
}

/** One agent's grants to suspend, by why. */
interface Suspension {
  readonly changed: GrantRecord[];
  readonly ungranted: GrantRecord[];
}

/** What one pass found; built inside the transaction, which may run more than once. */
interface Tally {
  readonly suspended: Map<string, number>;
  readonly ungranted: Map<string, number>;
  readonly byAgent: Map<string, Suspension>;
  adopted: number;
}

export function applyDrift(ctx: ProtocolContext): Promise<DriftOutcome> {
  return driftWrite(ctx, policyGrants(ctx.policy));
}

/**
 * The capabilities some agent had from policy before and may not now: out of the defaults, the
 * autonomous grants or a policy host's defaults, or high-risk now (which takes them out of any
 * host's defaults, grants.ts linkedDefaults), or unblocked now (policy may have granted them
 * before they were blocked). Blocked ones are left out: their grants stay as they are,
 * inoperative, until a reload unblocks them (grants.ts inoperativeReason).
 */
function stoppedGranting(before: PolicyGrants, now: PolicyGrants): Set<string> {
  const stopped = new Set<string>();
  const dropped = (was: ReadonlySet<string>, is: ReadonlySet<string> | undefined): void => {
    for (const name of was) if (!is?.has(name)) stopped.add(name);
  };
  dropped(before.defaults, now.defaults);
  dropped(before.autonomous, now.autonomous);
  for (const [key, names] of before.hostDefaults) dropped(names, now.hostDefaults.get(key));
  for (const name of now.highRisk) if (!before.highRisk.has(name)) stopped.add(name);
  for (const name of before.blocked) if (!now.blocked.has(name)) stopped.add(name);
  for (const name of now.blocked) stopped.delete(name);
  return stopped;
}

/** Drift, and the policy's grants compared with those stored, in one transaction. */
function driftWrite(ctx: ProtocolContext, granting: PolicyGrants): Promise<DriftOutcome> {
  // The counts are the transaction's result, not variables it changes: it may run more than once.
  return ctx.write(async (tx, after) => {
    const before = await storedPolicyGrants(tx);
    const stopped = before === undefined ? new Set<string>() : stoppedGranting(before, granting);
    const stored = storedForm(before === undefined ? granting : withAbsent(granting, before, ctx));
    if (before === undefined || storedForm(before) !== stored) await tx.putAppliedPolicyGrants(stored);
    const tally: Tally = { suspended: new Map(), ungranted: new Map(), byAgent: new Map(), adopted: 0 };
    const now = ctx.clock.now();
    const stillGrants = policyStillGrants(ctx, tx);
    // Hashing a capability costs as much as its schemas are large: only the held ones are hashed.
    const held = await tx.grantedCapabilities(ctx.catalog.capabilities.map((c) => c.name));
    for (const capability of ctx.catalog.capabilities) {
      if (!held.has(capability.name)) continue;
      const version = capabilityVersion(capability);
      const checkPolicy = stopped.has(capability.name);
      // An empty version is no capability's (they are SHA-256 digests): grantsOffVersion then lists
      // every active grant of the capability, which is what the policy check must see.
      for (const grant of await tx.grantsOffVersion(capability.name, checkPolicy ? '' : version)) {
        // §3.3: a grant past its own expiry has ended; re-approving it would revive what lapsed.
        if (!isGrantEffective(grant, now)) continue;
        if (!(await sortGrant(tx, tally, grant, version))) continue;
        if (checkPolicy && grant.grantedBy === POLICY_ACTOR && !(await stillGrants(grant))) {
          suspensionOf(tally, grant.agentId).ungranted.push(grant);
          count(tally.ungranted, grant.capability);
        }
      }
    }
    for (const [agentId, suspension] of tally.byAgent) {
      const agent = await tx.agent(agentId);
      if (!agent) continue;
      await suspend(ctx, tx, after, agent, suspension, now);
    }
    return { suspended: tally.suspended, ungranted: tally.ungranted, adopted: tally.adopted };
  });
}

/**
 * Stamps a grant without a version (adopted) or sets a changed one aside for re-approval (§2.12).
 * True when the grant is at the current version now, and so still for the policy check.
 */
async function sortGrant(
  tx: StoreWriter,
  tally: Tally,
  grant: GrantRecord,
  version: string,
): Promise<boolean> {
  if (grant.capabilityVersion === null || grant.capabilityVersion === undefined) {
    await tx.updateGrant(grant.id, { capabilityVersion: version });
    tally.adopted++;
    return true;
  }
  if (grant.capabilityVersion === version) return true;
  suspensionOf(tally, grant.agentId).changed.push(grant);
  count(tally.suspended, grant.capability);
  return false;
}

function suspensionOf(tally: Tally, agentId: string): Suspension {
  let suspension = tally.byAgent.get(agentId);
  if (suspension === undefined) {
    suspension = { changed: [], ungranted: [] };
    tally.byAgent.set(agentId, suspension);
  }
  return suspension;
}

function count(counts: Map<string, number>, capability: string): void {
  counts.set(capability, (counts.get(capability) ?? 0) + 1);
}

/**
 * Whether the policy in force still makes a policy-made grant: its agent's host and mode decide
 * (grants.ts policyGrantable). An agent or host no longer stored leaves the grant as it is. Each
 * host's answer is computed once per mode within the transaction.
 */
function policyStillGrants(ctx: ProtocolContext, tx: StoreWriter): (grant: GrantRecord) => Promise<boolean> {
  const agents = new Map<string, AgentRecord | undefined>();
  const grantable = new Map<string, ReadonlySet<string> | undefined>();
  return async (grant) => {
    if (!agents.has(grant.agentId)) agents.set(grant.agentId, await tx.agent(grant.agentId));
    const agent = agents.get(grant.agentId);
    if (agent === undefined) return true;
    const key = `${agent.mode} ${agent.hostId}`;
    if (!grantable.has(key)) {
      const host = await tx.host(agent.hostId);
      grantable.set(key, host && new Set(policyGrantable(ctx, host, agent.mode)));
    }
    return grantable.get(key)?.has(grant.capability) ?? true;
  };
}

/** One approval request per agent for all its suspended grants (pending grants, §3.3). */
async function suspend(
  ctx: ProtocolContext,
  tx: StoreWriter,
  after: AfterCommit,
  agent: AgentRecord,
  suspension: Suspension,
  now: number,
): Promise<void> {
  // A changed grant keeps its old version, grantedBy and expiresAt: execution says re-approval is
  // needed (execute.ts), decidedByPerson (agents.ts) still sees whose it was, and approval keeps
  // the person's expiry (approval-decisions.ts). One policy no longer makes has no version left:
  // nothing of it was approved by anyone, and execution says there is no active grant.
  for (const g of suspension.changed) {
    await tx.updateGrant(g.id, { status: 'pending', approvalId: null, updatedAt: now });
  }
  for (const g of suspension.ungranted) {
    await tx.updateGrant(g.id, {
      status: 'pending',
      approvalId: null,
      capabilityVersion: null,
      updatedAt: now,
    });
  }
  if (agent.status !== 'active') return;
  const grants = [...suspension.changed, ...suspension.ungranted];
  const reason = suspensionReason(suspension);
  try {
    const approval = await createApproval(
      ctx,
      tx,
      after,
      'capability_request',
      agent,
      grants.map(requestedFromGrant),
      { reason },
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
        capabilities: grants.map((g) => g.capability).join(', '),
        error: err.message,
      });
    });
  }
}

/** What the approver is told: which grants changed (§2.12), which policy no longer grants. */
function suspensionReason(suspension: Suspension): string {
  const names = (grants: readonly GrantRecord[]): string => grants.map((g) => g.capability).join(', ');
  const parts: string[] = [];
  if (suspension.changed.length > 0) {
    parts.push(`Changed since approved, re-approval needed: ${names(suspension.changed)} (§2.12).`);
  }
  if (suspension.ungranted.length > 0) {
    parts.push(`No longer granted by the server's policy, approval needed: ${names(suspension.ungranted)}.`);
  }
  return parts.join(' ');
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
  for (const [capability, grants] of outcome.ungranted) {
    logger.warn('policy no longer grants this capability: its policy grants wait for a person', {
      capability,
      grants,
    });
  }
}
