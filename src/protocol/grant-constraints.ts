/**
 * The constraints a grant is executed under (§2.13): its own, as stored (parsed once per record,
 * failing closed on anything unreadable), intersected with the server's as the policy says now.
 */
import { ProtocolError } from '../errors.js';
import type { GrantRecord } from '../storage/types.js';
import { intersectConstraints, parseConstraints, type Constraints } from './constraints.js';
import type { ProtocolContext } from './context.js';

/**
 * Grants are validated when made; re-checking here keeps a stored unknown operator from ever
 * being read as "no constraint" (§2.13 fails closed).
 */
export function usableConstraints(grant: GrantRecord): Constraints {
  const parsed = parsedConstraints(grant);
  if (!parsed.ok) {
    if (parsed.problem.kind === 'unknown_operator') {
      throw new ProtocolError('unknown_constraint_operator', parsed.problem.message, {
        fields: { unknown_operators: parsed.problem.operators },
      });
    }
    throw new ProtocolError(
      'constraint_violated',
      `The grant's constraints cannot be applied: ${parsed.problem.message}`,
    );
  }
  return parsed.constraints;
}

// Parsed once per grant record: the hot cache hands out the same record objects until a change,
// and a changed grant is a new object, so nothing stale is ever reused.
const parsedByGrant = new WeakMap<GrantRecord, ReturnType<typeof parseConstraints>>();

function parsedConstraints(grant: GrantRecord): ReturnType<typeof parseConstraints> {
  let parsed = parsedByGrant.get(grant);
  if (!parsed) {
    parsed = parseConstraints(grant.constraints, undefined);
    parsedByGrant.set(grant, parsed);
  }
  return parsed;
}

/**
 * `grant` with the policy's current `capabilities.constraints` for its capability folded in: a
 * reload that tightens them (an incident, a new limit) binds grants made before it too, not only
 * new ones. The same grant when the policy constrains nothing there (the hot path's case); else a
 * copy, made once per grant record and policy (the hot cache hands out the same records).
 */
export function withServerConstraints(ctx: ProtocolContext, grant: GrantRecord): GrantRecord {
  const server = ctx.policy.constraints.get(grant.capability);
  if (server === undefined) return grant;
  const cached = tightenedByGrant.get(grant);
  if (cached?.server === server) return cached.grant;
  const { constraints } = intersectConstraints(
    grant.constraints === null ? undefined : usableConstraints(grant),
    server,
  );
  const tightened: GrantRecord = { ...grant, constraints: constraints ?? null };
  tightenedByGrant.set(grant, { server, grant: tightened });
  return tightened;
}

const tightenedByGrant = new WeakMap<GrantRecord, { server: Constraints; grant: GrantRecord }>();
