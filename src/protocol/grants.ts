/**
 * Capability requests and grants: validating what an agent asks for (§5.3, §5.4, §8.6),
 * computing effective constraints (§2.13: agent proposal ∩ policy, never wider), deciding what
 * policy may grant without a human (§2.9, §8.10), and rendering grants for responses (§5.3).
 */
import { ProtocolError } from '../errors.js';
import { advertisedSchemas } from '../openapi/advertised-schemas.js';
import type { Capability } from '../openapi/types.js';
import type { AgentMode, GrantRecord, HostRecord, RequestedCapability } from '../storage/types.js';
import { intersectConstraints, parseConstraints, type Constraints } from './constraints.js';
import type { ProtocolContext } from './context.js';
import { withServerConstraints } from './grant-constraints.js';
import { isGrantEffective } from './lifecycle.js';
import { checkCapabilityList } from './request-limits.js';

export function inputFields(capability: Capability): ReadonlySet<string> {
  const props = capability.input?.properties;
  return new Set(props && typeof props === 'object' ? Object.keys(props) : []);
}

/**
 * Parses a `capabilities` request array: within the request bounds (policy capability_requests),
 * names must exist and not be blocked (one `invalid_capabilities` error lists every bad name),
 * constraints must be valid for the capability's input, and the policy's constraints are folded in.
 */
export function parseCapabilityRequest(
  ctx: ProtocolContext,
  raw: unknown,
  field = 'capabilities',
): RequestedCapability[] {
  if (!Array.isArray(raw)) throw new ProtocolError('invalid_request', `${field} must be an array.`);
  checkCapabilityList(raw, field, ctx.policy.capabilityRequests);
  const invalidNames: string[] = [];
  const seen = new Set<string>();
  const out: RequestedCapability[] = [];
  raw.forEach((entry: unknown, i) => {
    let name: unknown;
    let proposed: unknown;
    if (typeof entry === 'string') name = entry;
    else if (entry !== null && typeof entry === 'object' && !Array.isArray(entry)) {
      const unknownKeys = Object.keys(entry).filter((k) => k !== 'name' && k !== 'constraints');
      if (unknownKeys.length) {
        throw new ProtocolError(
          'invalid_request',
          `${field}[${i}] has unknown keys: ${unknownKeys.join(', ')}.`,
        );
      }
      name = (entry as { name?: unknown }).name;
      proposed = (entry as { constraints?: unknown }).constraints;
    }
    if (typeof name !== 'string' || name === '') {
      throw new ProtocolError(
        'invalid_request',
        `${field}[${i}] must be a capability name or an object with a name and optional constraints.`,
      );
    }
    const capability = ctx.catalog.get(name);
    if (!capability || ctx.policy.blocked.has(name)) {
      invalidNames.push(name);
      return;
    }
    if (seen.has(name)) throw new ProtocolError('invalid_request', `${field} lists "${name}" twice.`);
    seen.add(name);
    const terms = constrainedRequest(ctx, capability, proposed, `${field}[${i}].constraints`);
    out.push({
      name,
      ...(terms.effective ? { constraints: terms.effective } : {}),
      ...(terms.proposed ? { proposed: terms.proposed } : {}),
    });
  });
  if (invalidNames.length) {
    // Echoed in the answer and in the log's reason: bounded, whatever names were sent.
    const shown = invalidNames
      .slice(0, MAX_ECHOED_NAMES)
      .map((n) => (n.length > MAX_ECHOED_NAME_CHARS ? `${n.slice(0, MAX_ECHOED_NAME_CHARS)}…` : n));
    const more = invalidNames.length - shown.length;
    throw new ProtocolError(
      'invalid_capabilities',
      `Unknown or blocked capabilities: ${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}.`,
      { fields: { invalid_capabilities: shown } },
    );
  }
  return out;
}

/** Agent proposal (validated) ∩ server policy (§2.13). `undefined` when unconstrained. */
export function effectiveConstraints(
  ctx: ProtocolContext,
  capability: Capability,
  proposed: unknown,
  where: string,
): Constraints | undefined {
  return constrainedRequest(ctx, capability, proposed, where).effective;
}

/**
 * The agent's proposal as validated, and its intersection with policy (§2.13): both are kept,
 * so what was proposed stays apart from what is in effect (issue 16).
 */
function constrainedRequest(
  ctx: ProtocolContext,
  capability: Capability,
  proposed: unknown,
  where: string,
): { readonly proposed?: Constraints; readonly effective?: Constraints } {
  let agentSide: Constraints | undefined;
  if (proposed !== undefined) {
    const parsed = parseConstraints(proposed, inputFields(capability));
    if (!parsed.ok) {
      if (parsed.problem.kind === 'unknown_operator') {
        throw new ProtocolError('unknown_constraint_operator', `${where}: ${parsed.problem.message}`, {
          fields: { unknown_operators: parsed.problem.operators },
        });
      }
      throw new ProtocolError('invalid_request', `${where}: ${parsed.problem.message}`);
    }
    agentSide = Object.keys(parsed.constraints).length ? parsed.constraints : undefined;
  }
  const { constraints, conflicts } = intersectConstraints(
    agentSide,
    ctx.policy.constraints.get(capability.name),
  );
  if (conflicts.length) {
    throw new ProtocolError(
      'invalid_request',
      `${where}: the proposed constraints on ${conflicts.join(', ')} fall outside what this server allows for ${capability.name}.`,
    );
  }
  return {
    ...(agentSide ? { proposed: agentSide } : {}),
    ...(constraints && Object.keys(constraints).length ? { effective: constraints } : {}),
  };
}

// How many unknown names an invalid_capabilities error echoes, and how much of each.
const MAX_ECHOED_NAMES = 20;
const MAX_ECHOED_NAME_CHARS = 128;

/** `grantedBy` of a grant policy made without asking anyone. */
export const POLICY_ACTOR = 'policy';
/** `deniedBy` of a grant whose approval request expired undecided. */
export const SYSTEM_ACTOR = 'system';

/**
 * What policy grants without asking anyone (§2.9, §8.10): for a delegated agent of a linked
 * host, the host's defaults and the policy's defaults; for an autonomous agent, the policy's
 * autonomous grants. High-risk capabilities never qualify.
 */
export function autoGrantable(ctx: ProtocolContext, host: HostRecord, mode: AgentMode): ReadonlySet<string> {
  if (host.status !== 'active') return new Set();
  const trusted = mode === 'delegated' ? host.userId !== null : host.userId === null;
  return new Set(trusted ? policyGrantable(ctx, host, mode) : []);
}

/**
 * What the policy in force grants an agent of `host` in `mode`, whatever the host's state: the
 * names autoGrantable draws from. Drift (drift.ts) holds each policy-made grant to it after a
 * reload: what the policy no longer grants (now high-risk, or out of the defaults) goes to a person.
 */
export function policyGrantable(ctx: ProtocolContext, host: HostRecord, mode: AgentMode): string[] {
  return mode === 'delegated'
    ? linkedDefaults(ctx, host)
    : grantableByPolicy(ctx, [...ctx.policy.autonomousGrants]);
}

/**
 * What the delegated agents of `host` get without asking once it is linked (§2.9): its defaults
 * and the policy's, never high-risk or blocked ones, in that order, each once.
 */
export function linkedDefaults(ctx: ProtocolContext, host: HostRecord): string[] {
  return grantableByPolicy(ctx, [...new Set([...host.defaultCapabilities, ...ctx.policy.defaults])]);
}

function grantableByPolicy(ctx: ProtocolContext, names: readonly string[]): string[] {
  const { policy } = ctx;
  return names.filter((n) => !policy.highRisk.has(n) && !policy.blocked.has(n) && ctx.catalog.get(n));
}

/** §5.6 step 4: the baseline a reactivated agent returns to. */
export function baselineCapabilities(ctx: ProtocolContext, host: HostRecord, mode: AgentMode): string[] {
  const names =
    mode === 'autonomous'
      ? [...ctx.policy.autonomousGrants]
      : [...host.defaultCapabilities, ...ctx.policy.defaults];
  return [...new Set(names)].filter((n) => ctx.catalog.get(n) && !ctx.policy.blocked.has(n)).sort();
}

export type GrantView = Record<string, unknown>;

/**
 * §2.12: why a grant for `name` cannot be used now (the capability was removed from the catalog,
 * or the policy in force blocks it); undefined when it can. The grant itself is kept: a reload that
 * brings the capability back makes it usable again.
 */
export function inoperativeReason(
  ctx: ProtocolContext,
  name: string,
  /** The catalog's entry for `name`, when the caller has looked it up already. */
  capability: Capability | undefined = ctx.catalog.get(name),
): string | undefined {
  if (!capability) {
    return `Capability ${name} was removed from this server; its grant can no longer be used (§2.12).`;
  }
  if (ctx.policy.blocked.has(name)) return `Capability ${name} is blocked by the server's policy.`;
  return undefined;
}

/**
 * The constraints execution applies to `grant` now (§5.3: "the effective ones the agent must
 * operate within"), server constraints a reload added included; the stored ones if they cannot
 * be read, which execution refuses anyway (grant-constraints.ts fails closed).
 */
function constraintsInForce(ctx: ProtocolContext, grant: GrantRecord): GrantRecord['constraints'] {
  try {
    return withServerConstraints(ctx, grant).constraints;
  } catch {
    return grant.constraints;
  }
}

/**
 * §5.3 grant objects: active grants carry the capability's description, schemas and effective
 * constraints, pending ones only name and status, denied ones their reason. A grant for a removed
 * or blocked capability is shown denied with the reason (§2.12, §5.5: status reflects the server's
 * current capability state), as execute refuses it. `withAudit` adds granted_by (status, §5.5).
 */
export function grantView(ctx: ProtocolContext, grant: GrantRecord, withAudit = false): GrantView {
  const now = ctx.clock.now();
  if (grant.status === 'pending') return { capability: grant.capability, status: 'pending' };
  if (grant.status === 'denied' || !isGrantEffective(grant, now)) {
    return {
      capability: grant.capability,
      status: 'denied',
      ...(grant.reason ? { reason: grant.reason } : {}),
    };
  }
  const capability = ctx.catalog.get(grant.capability);
  const inoperative = inoperativeReason(ctx, grant.capability, capability);
  if (inoperative !== undefined || !capability) {
    return { capability: grant.capability, status: 'denied', reason: inoperative };
  }
  const constraints = constraintsInForce(ctx, grant);
  return {
    capability: grant.capability,
    status: 'active',
    ...(withAudit && grant.grantedBy ? { granted_by: grant.grantedBy } : {}),
    description: capability.description,
    ...advertisedSchemas(capability),
    ...(constraints ? { constraints } : {}),
    ...(grant.expiresAt ? { expires_at: new Date(grant.expiresAt).toISOString() } : {}),
  };
}

/** A pending grant as the request it came from: effective and proposed constraints (§2.13). */
export function requestedFromGrant(g: GrantRecord): RequestedCapability {
  return {
    name: g.capability,
    ...(g.constraints ? { constraints: g.constraints } : {}),
    ...(g.proposedConstraints ? { proposed: g.proposedConstraints } : {}),
  };
}

/** The agent's current grant set as the protocol shows it: `revoked` rows are history only. */
export function currentGrants(grants: readonly GrantRecord[]): GrantRecord[] {
  return grants.filter((g) => g.status !== 'revoked');
}

/**
 * An agent's grants from the hot cache (§10.2): at once on a hit, undefined on a miss, when
 * `loadGrants` reads them. Callers write `cachedGrants(ctx, id) ?? (await loadGrants(ctx, id))`,
 * so that a hit costs no promise.
 */
export function cachedGrants(ctx: ProtocolContext, agentId: string): readonly GrantRecord[] | undefined {
  return ctx.cache.grants.get(agentId);
}

/** An agent's grants from the store, kept in the hot cache (see HotCache.generation). */
export async function loadGrants(ctx: ProtocolContext, agentId: string): Promise<readonly GrantRecord[]> {
  const generation = ctx.cache.generation;
  const grants = await ctx.store.grants(agentId);
  if (ctx.cache.keeps(generation)) ctx.cache.grants.set(agentId, grants);
  return grants;
}
