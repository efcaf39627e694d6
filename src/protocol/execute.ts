/**
 * §4.5 + §5.11: everything that must hold before an execution may leave the proxy. The agent JWT
 * (audience: the execute location), the JWT's `capabilities` claim, the capability, the grant,
 * the arguments against the input schema, and the grant's constraints (§2.13). Nothing here
 * talks to the upstream; a request that fails any check never reaches it.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { ProtocolError } from '../errors.js';
import type { Capability } from '../openapi/types.js';
import type { GrantRecord } from '../storage/types.js';
import { agentStatusError, hostStatusError, type AgentAuth } from './authenticate.js';
import { checkConstraints, checkSentConstraints, type SentField } from './constraint-checks.js';
import type { ProtocolContext } from './context.js';
import { capabilityVersion } from './capability-version.js';
import { checkTokenCovers } from './capability-claim.js';
import { usableConstraints, withServerConstraints } from './grant-constraints.js';
import { cachedGrants, inoperativeReason, loadGrants } from './grants.js';
import { currentAgent, isGrantEffective } from './lifecycle.js';

export interface AuthorizedExecution {
  readonly auth: AgentAuth;
  readonly capability: Capability;
  readonly grant: GrantRecord;
  /** The arguments as sent by the agent (validated; pinned arguments not yet added). */
  readonly args: Readonly<Record<string, unknown>>;
}

export interface ArgumentValidators {
  /** The capability's validator, or (a large schema not compiled yet) the compilation it awaits. */
  get(capability: Capability): ValidateFunction | Promise<ValidateFunction>;
}

// Bounds the `errors` list of a 400, so a huge invalid object cannot produce a huge answer.
const MAX_REPORTED_ERRORS = 50;

/** Parses the §5.11 request body: `capability` (required string), `arguments` (optional object). */
export function readExecuteBody(body: Readonly<Record<string, unknown>>): {
  name: string;
  args: Readonly<Record<string, unknown>>;
} {
  const name = body.capability;
  if (typeof name !== 'string' || name === '') {
    throw new ProtocolError('invalid_request', 'capability must be a non-empty string (§5.11).');
  }
  const args = body.arguments ?? {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new ProtocolError('invalid_request', 'arguments must be a JSON object (§5.11).');
  }
  return { name, args: args as Record<string, unknown> };
}

/**
 * §4.5 from "resolve the agent's granted capabilities" on, and §5.11's checks, for an
 * authenticated agent: the three steps below in their order.
 */
export async function authorizeExecution(
  ctx: ProtocolContext,
  auth: AgentAuth,
  request: { name: string; args: Readonly<Record<string, unknown>> },
  validators: ArgumentValidators,
): Promise<AuthorizedExecution> {
  const grants = cachedGrants(ctx, auth.agent.id) ?? (await loadGrants(ctx, auth.agent.id));
  const { capability, grant } = authorizeCapability(ctx, auth, request.name, grants);
  await validateArguments(validators, capability, request.args);
  checkArgumentConstraints(grant, request.args);
  return { auth, capability, grant, args: request.args };
}

/**
 * The capability and the grant that allows it: the JWT's `capabilities` claim names it (§4.3),
 * a DPoP proof came with the JWT if the policy's `capabilities.dpop` lists it (§4.4), it exists
 * (§2.12), the policy does not block it, and the agent holds an effective grant among
 * `grants`, the agent's (from the hot cache: cachedGrants / loadGrants).
 */
export function authorizeCapability(
  ctx: ProtocolContext,
  auth: AgentAuth,
  name: string,
  grants: readonly GrantRecord[],
): { capability: Capability; grant: GrantRecord } {
  checkTokenCovers(ctx, auth, name);

  const grant = effectiveGrant(ctx, grants, name);
  const capability = ctx.catalog.get(name);
  // §2.12: a name nobody holds is unknown; a removed or blocked capability fails with
  // capability_not_granted for its holders, as status and introspection show it (grantView).
  if (!capability && !grant) throw new ProtocolError('capability_not_found', `No capability named ${name}.`);
  const inoperative = inoperativeReason(ctx, name, capability);
  if (inoperative !== undefined || !capability) {
    throw new ProtocolError('capability_not_granted', inoperative);
  }
  if (!grant) {
    // drift.ts: a pending grant that carries a version was approved once, for another version.
    const suspended = grants.some(
      (g) => g.capability === name && g.status === 'pending' && g.capabilityVersion,
    );
    if (suspended) throw changedSinceApproved(name);
    throw new ProtocolError('capability_not_granted', `The agent has no active grant for ${name} (§5.11).`);
  }
  checkApprovedVersion(grant, capability);
  return { capability, grant: withServerConstraints(ctx, grant) };
}

/**
 * The arguments against the capability's input schema (§5.11); every failing path is listed. At
 * once, or once a large schema's validator is compiled (off the event loop).
 */
export function validateArguments(
  validators: ArgumentValidators,
  capability: Capability,
  args: Readonly<Record<string, unknown>>,
): void | Promise<void> {
  const validate = validators.get(capability);
  if (typeof validate !== 'function') return validate.then((fn) => checkArguments(fn, capability, args));
  checkArguments(validate, capability, args);
  return undefined;
}

function checkArguments(
  validate: ValidateFunction,
  capability: Capability,
  args: Readonly<Record<string, unknown>>,
): void {
  if (!validate(args)) {
    const errors = (validate.errors ?? []).slice(0, MAX_REPORTED_ERRORS).map(describeError);
    throw new ProtocolError(
      'invalid_request',
      `The arguments do not match the input schema of ${capability.name}: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`,
      { fields: { errors } },
    );
  }
}

/** §2.13: the grant's constraints hold for the arguments. */
export function checkArgumentConstraints(grant: GrantRecord, args: Readonly<Record<string, unknown>>): void {
  if (grant.constraints) {
    const violations = checkConstraints(usableConstraints(grant), args);
    if (violations.length > 0) {
      throw new ProtocolError(
        'constraint_violated',
        'Execution arguments violate grant constraints (§5.11).',
        {
          fields: { violations },
        },
      );
    }
  }
}

/**
 * §2.13 on the request as it will be serialized upstream (after pinned arguments, styles, explode,
 * free-form objects): nothing the upstream receives under a constrained field's name may lie
 * outside the grant, and only the field's own argument may send under that name. `sent` comes
 * from the executor (src/upstream/sent-values.ts), right before anything leaves the proxy.
 */
export function checkSentRequest(grant: GrantRecord, sent: { field(name: string): SentField }): void {
  if (!grant.constraints) return;
  const violations = checkSentConstraints(usableConstraints(grant), (field) => sent.field(field));
  if (violations.length > 0) {
    throw new ProtocolError(
      'constraint_violated',
      'The request as it would be sent upstream violates grant constraints (§2.13, §5.11).',
      { fields: { violations } },
    );
  }
}

function effectiveGrant(
  ctx: ProtocolContext,
  grants: readonly GrantRecord[],
  capability: string,
): GrantRecord | undefined {
  const now = ctx.clock.now();
  return grants.find((g) => g.capability === capability && isGrantEffective(g, now));
}

/**
 * §5.11: a long stream re-checks, from the database rather than the cache, that its capability,
 * agent, host and grant still stand; the first problem found ends the stream.
 */
export async function streamStillAuthorized(
  ctx: ProtocolContext,
  agentId: string,
  capability: string,
): Promise<ProtocolError | undefined> {
  // A reload may have removed or blocked the capability since the stream began (§2.12).
  const inoperative = inoperativeReason(ctx, capability);
  if (inoperative !== undefined) return new ProtocolError('capability_not_granted', inoperative);
  const stored = await ctx.store.agent(agentId);
  const host = stored ? await ctx.store.host(stored.hostId) : undefined;
  if (!stored || !host) return new ProtocolError('agent_revoked', 'The agent no longer exists.');
  const hostError = hostStatusError(host);
  if (hostError) return hostError;
  const agentError = agentStatusError(await currentAgent(ctx, stored));
  if (agentError) return agentError;
  const now = ctx.clock.now();
  const grants = await ctx.store.grants(agentId);
  if (!grants.some((g) => g.capability === capability && isGrantEffective(g, now))) {
    return new ProtocolError('capability_not_granted', `The grant for ${capability} was revoked.`);
  }
  return undefined;
}

/**
 * §5.5, §5.11: nothing goes upstream for a request whose agent, host or grant was revoked, or whose
 * capability a reload blocked or removed, once it was checked. A request waits between its checks
 * and its call (a PostgreSQL rate-limit row, an OAuth token fetch), and "revoked" answers 200 the
 * moment it commits. So before sending, if anything was written since `generation` (ctx.cache's,
 * noted when the request began: every write and every other replica's notice moves it), the
 * checks run again from the store and the current policy. Nothing written: nothing to wait for.
 */
export function recheckIfChanged(
  ctx: ProtocolContext,
  generation: number,
  agentId: string,
  capability: string,
): Promise<void> | undefined {
  if (ctx.cache.generation === generation) return undefined;
  return streamStillAuthorized(ctx, agentId, capability).then((problem) => {
    if (problem) throw problem;
  });
}

function describeError(e: ErrorObject): { path: string; message: string } {
  const base = e.instancePath === '' ? '/' : e.instancePath;
  if (e.keyword === 'additionalProperties') {
    const extra = (e.params as { additionalProperty?: string }).additionalProperty ?? '';
    return { path: `${base === '/' ? '' : base}/${extra}`, message: 'is not an input of this capability' };
  }
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty?: string }).missingProperty ?? '';
    return { path: `${base === '/' ? '' : base}/${missing}`, message: 'is required' };
  }
  return { path: base, message: e.message ?? e.keyword };
}

/**
 * §2.12: a grant approved at another version of its capability does not run it. drift.ts
 * suspends such grants after a reload; until it has (on PostgreSQL, executions do not wait for its
 * transaction) they are refused here, and so is a per-call approval's run (per-call-run.ts).
 */
export function checkApprovedVersion(grant: GrantRecord, capability: Capability): void {
  if (grant.capabilityVersion && grant.capabilityVersion !== capabilityVersion(capability)) {
    throw changedSinceApproved(capability.name);
  }
}

function changedSinceApproved(name: string): ProtocolError {
  return new ProtocolError(
    'capability_not_granted',
    `Capability ${name} changed since its grant was approved; re-approval is needed (§2.12).`,
  );
}
