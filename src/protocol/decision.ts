/**
 * What an approver chose on the decision form, checked against the request exactly as it was
 * shown (the form's content hash matched, src/protocol/device.ts) before anything is granted:
 *
 *  - which capabilities to approve (partial approval; the others are denied, §5.3);
 *  - narrowing per constrained field (§2.13: the approver MAY narrow, the server MUST NOT widen):
 *    a range may get a higher minimum or a lower maximum, a list of allowed values may lose
 *    values. Anything wider than the request — a larger maximum, a value the agent did not list, a
 *    limit on a field the request left open — is refused with a message, and nothing is granted:
 *    a form that asks for more was not produced by the page, so it is not silently trimmed;
 *  - an optional lifetime for the approved grants (GRANT_LIFETIMES; §3.3 grant `expires_at`).
 *
 * The result is the input of approve() (src/protocol/approval-decisions.ts), which intersects the
 * narrowing with the request once more (never wider, whoever calls it).
 */
import { canonicalJson } from '../util/canonical-json.js';
import { intersectConstraints, type Constraints } from './constraints.js';
import type { DeviceRequest } from './device.js';

/** The approver's narrowing of one constrained field. */
export interface FieldChoice {
  readonly min?: number;
  readonly max?: number;
  readonly in?: readonly unknown[];
}

export interface DecisionChoices {
  /** The capabilities to approve. */
  readonly capabilities: readonly string[];
  /** Capability name → field name → narrowing. */
  readonly narrowing: ReadonlyMap<string, ReadonlyMap<string, FieldChoice>>;
  /** A key of GRANT_LIFETIMES, or null: no expiry of their own. */
  readonly grantLifetime: string | null;
}

/** The grant lifetimes an approver may pick: short, a day, a week, a month. */
export const GRANT_LIFETIMES: readonly {
  readonly key: string;
  readonly label: string;
  readonly ms: number;
}[] = [
  { key: '1h', label: '1 hour', ms: 3_600_000 },
  { key: '1d', label: '1 day', ms: 86_400_000 },
  { key: '7d', label: '7 days', ms: 7 * 86_400_000 },
  { key: '30d', label: '30 days', ms: 30 * 86_400_000 },
];

export interface CheckedDecision {
  readonly capabilities: readonly string[];
  /** Per approved capability that was narrowed: its constraints after narrowing. */
  readonly constraints: Readonly<Record<string, Constraints>>;
  readonly grantLifetimeMs?: number;
}

export type DecisionCheck =
  | { readonly ok: true; readonly decision: CheckedDecision }
  | { readonly ok: false; readonly problem: string };

function refuse(problem: string): DecisionCheck {
  return { ok: false, problem };
}

function isOperatorObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function checkDecision(r: DeviceRequest, choices: DecisionChoices): DecisionCheck {
  const requested = new Map(r.capabilities.map((c) => [c.name, c]));
  const chosen = [...new Set(choices.capabilities)];
  const stranger = chosen.find((name) => !requested.has(name));
  if (stranger !== undefined)
    return refuse(`${stranger} is not part of this request; nothing else can be approved.`);
  if (requested.size > 0 && chosen.length === 0) {
    return refuse('No capability was chosen. Choose at least one to approve, or deny the request.');
  }
  const constraints: Record<string, Constraints> = {};
  for (const [capability, fields] of choices.narrowing) {
    const asked = requested.get(capability);
    if (!asked) return refuse(`${capability} is not part of this request.`);
    if (!chosen.includes(capability) || fields.size === 0) continue;
    const narrowed: Record<string, unknown> = {};
    for (const [field, choice] of fields) {
      const result = narrowField(capability, field, asked.constraints?.[field], choice);
      if (typeof result === 'string') return refuse(result);
      if (Object.keys(result).length > 0) narrowed[field] = result;
    }
    if (Object.keys(narrowed).length === 0) continue;
    const { constraints: merged, conflicts } = intersectConstraints(asked.constraints ?? undefined, narrowed);
    if (conflicts.length > 0 || merged === undefined) {
      return refuse(`The limits chosen for ${capability} (${conflicts.join(', ')}) allow no value at all.`);
    }
    constraints[capability] = merged;
  }
  let grantLifetimeMs: number | undefined;
  if (choices.grantLifetime !== null) {
    const lifetime = GRANT_LIFETIMES.find((l) => l.key === choices.grantLifetime);
    if (!lifetime) return refuse('That expiry is not one this page offers.');
    grantLifetimeMs = lifetime.ms;
  }
  return {
    ok: true,
    decision: { capabilities: chosen, constraints, ...(grantLifetimeMs ? { grantLifetimeMs } : {}) },
  };
}

const WIDEN = 'You can only narrow what the agent asked for, never widen it.';

/** The field's narrowed operator object, or why the choice is refused. */
function narrowField(
  capability: string,
  field: string,
  asked: unknown,
  choice: FieldChoice,
): Record<string, unknown> | string {
  const where = `${capability}, ${field}`;
  if (!isOperatorObject(asked)) {
    return asked === undefined
      ? `${WIDEN} The request sets no limit on ${where} that could be narrowed here.`
      : `${WIDEN} ${where} is fixed to one value by the request.`;
  }
  const out: Record<string, unknown> = {};
  const askedMin = typeof asked.min === 'number' ? asked.min : undefined;
  const askedMax = typeof asked.max === 'number' ? asked.max : undefined;
  if (choice.min !== undefined || choice.max !== undefined) {
    if (askedMin === undefined && askedMax === undefined) {
      return `${WIDEN} The request gives ${where} no range to narrow.`;
    }
    for (const bound of [choice.min, choice.max]) {
      if (bound !== undefined && !Number.isFinite(bound)) return `The limit for ${where} must be a number.`;
    }
    if (choice.min !== undefined) {
      if (askedMin !== undefined && choice.min < askedMin) {
        return `${WIDEN} The smallest value the agent asked for on ${where} is ${askedMin}; ${choice.min} would widen it.`;
      }
      out.min = choice.min;
    }
    if (choice.max !== undefined) {
      if (askedMax !== undefined && choice.max > askedMax) {
        return `${WIDEN} The largest value the agent asked for on ${where} is ${askedMax}; ${choice.max} would widen it.`;
      }
      out.max = choice.max;
    }
    const min = choice.min ?? askedMin;
    const max = choice.max ?? askedMax;
    if (min !== undefined && max !== undefined && min > max) {
      return `The limits chosen for ${where} allow no value: the smallest (${min}) is above the largest (${max}).`;
    }
  }
  if (choice.in !== undefined) {
    if (!Array.isArray(asked.in)) return `${WIDEN} The request lists no allowed values for ${where}.`;
    const listed = new Set(asked.in.map(canonicalJson));
    const extra = choice.in.find((value) => !listed.has(canonicalJson(value)));
    if (extra !== undefined) {
      return `${WIDEN} ${canonicalJson(extra).slice(0, 80)} is not one of the values the agent asked for on ${where}.`;
    }
    if (choice.in.length === 0) {
      return `No value is allowed for ${where}. Keep at least one, or leave ${capability} unchecked.`;
    }
    out.in = [...choice.in];
  }
  return out;
}
