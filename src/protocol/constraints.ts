/**
 * Scoped grants (§2.13): validating a constraints object as received (from an agent, an approver
 * or the policy), and intersecting the agent's proposal with the approver's and the policy's.
 * Checking an execution against the result is constraint-checks.ts (§5.11). Pure and
 * dependency-free.
 *
 * Everything here fails closed: a constraint this module cannot interpret is never read as "no
 * constraint", because ignoring a constraint could grant broader access than intended (§2.13).
 */
import { canonicalJson } from '../util/canonical-json.js';
import {
  CONSTRAINT_OPERATORS,
  KNOWN_OPERATORS,
  MAX_DEPTH,
  cloneJson,
  dedupe,
  failingOperators,
  isJsonValue,
  isPlainObject,
  jsonEqual,
  operatorObject,
  readOperators,
  type Operators,
} from './constraint-operators.js';

export { CONSTRAINT_OPERATORS };

/** Field name → exact value, or operator object. Keys are top-level input field names (§2.13). */
export type Constraints = Readonly<Record<string, unknown>>;

export type ConstraintProblem =
  { kind: 'unknown_operator'; operators: string[]; message: string } | { kind: 'invalid'; message: string };

/**
 * Validates a constraints object as received (from an agent, an approver or the policy).
 * `inputFields`: the capability's top-level input property names (undefined = no schema known →
 * skip the field check). Returns the normalized constraints (fresh copies, operator keys in
 * canonical order, duplicate list entries removed) or a problem.
 */
export function parseConstraints(
  raw: unknown,
  inputFields: ReadonlySet<string> | undefined,
): { ok: true; constraints: Constraints } | { ok: false; problem: ConstraintProblem } {
  if (!isPlainObject(raw)) {
    return invalid('Constraints must be a JSON object mapping input field names to constraint values.');
  }
  // §2.13 requires unknown_constraint_operator (not a generic 400) for any unrecognized operator,
  // so that check runs over every field before anything else can reject the object.
  const unknown = unknownOperators(raw);
  if (unknown.length > 0) {
    return {
      ok: false,
      problem: {
        kind: 'unknown_operator',
        operators: unknown,
        message: `Unrecognized constraint operator(s): ${unknown.map((op) => JSON.stringify(op)).join(', ')}. Supported operators: ${CONSTRAINT_OPERATORS.join(', ')}.`,
      },
    };
  }
  const entries: [string, unknown][] = [];
  for (const [field, value] of Object.entries(raw)) {
    const fieldProblem = checkFieldName(field, inputFields);
    if (fieldProblem !== undefined) return invalid(fieldProblem);
    const parsed = parseValue(field, value);
    if (!parsed.ok) return invalid(parsed.message);
    entries.push([field, parsed.value]);
  }
  // fromEntries defines own properties, so a field named "__proto__" stays data, not a prototype.
  return { ok: true, constraints: Object.fromEntries(entries) };
}

/**
 * Intersection (§2.13 "Combined"): the tightest constraint from either side wins, and the result is
 * never wider than either side. A field constrained on one side only is kept. `conflicts` lists the
 * fields where no value can satisfy both sides; such a field is kept as `{ in: [] }`, which no value
 * satisfies, so a caller that ignores `conflicts` still fails closed. `constraints` is undefined
 * when no field is constrained (an unconstrained grant has no constraints field, §2.13).
 */
export function intersectConstraints(
  a: Constraints | undefined,
  b: Constraints | undefined,
): { constraints: Constraints | undefined; conflicts: string[] } {
  const entries: [string, unknown][] = [];
  const conflicts: string[] = [];
  const fields = new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})]);
  for (const field of fields) {
    const inA = a !== undefined && Object.hasOwn(a, field);
    const inB = b !== undefined && Object.hasOwn(b, field);
    if (inA && inB) {
      const merged = intersectField(a[field], b[field]);
      if (merged === CONFLICT) {
        conflicts.push(field);
        entries.push([field, { in: [] }]);
      } else {
        entries.push([field, merged.value]);
      }
    } else {
      entries.push([field, cloneJson(inA ? a?.[field] : b?.[field])]);
    }
  }
  return { constraints: entries.length > 0 ? Object.fromEntries(entries) : undefined, conflicts };
}

// ---------------------------------------------------------------------------------------------
// Parsing

function invalid(message: string): { ok: false; problem: ConstraintProblem } {
  return { ok: false, problem: { kind: 'invalid', message } };
}

/** Every unrecognized operator name across all fields, each once, in order of appearance. */
function unknownOperators(raw: Record<string, unknown>): string[] {
  const unknown = new Set<string>();
  for (const value of Object.values(raw)) {
    if (!isPlainObject(value)) continue;
    for (const key of Object.keys(value)) if (!KNOWN_OPERATORS.has(key)) unknown.add(key);
  }
  return [...unknown];
}

function checkFieldName(field: string, inputFields: ReadonlySet<string> | undefined): string | undefined {
  if (field === '') return 'Constraint field names must not be empty.';
  if (inputFields === undefined || inputFields.has(field)) return undefined;
  if (/[.[\]/]/.test(field)) {
    return `Constraint field ${JSON.stringify(field)} is a nested path; constraints apply to top-level input fields only.`;
  }
  return `Constraint field ${JSON.stringify(field)} is not an input field of this capability.`;
}

function parseValue(
  field: string,
  value: unknown,
): { ok: true; value: unknown } | { ok: false; message: string } {
  const where = `Constraint on ${JSON.stringify(field)}`;
  if (!isPlainObject(value)) {
    return isJsonValue(value, 0)
      ? { ok: true, value: cloneJson(value) }
      : {
          ok: false,
          message: `${where} must be a JSON value or an operator object (nested at most ${MAX_DEPTH} levels).`,
        };
  }
  if (Object.keys(value).length === 0) {
    return {
      ok: false,
      message: `${where} is an empty operator object; give at least one of ${CONSTRAINT_OPERATORS.join(', ')}.`,
    };
  }
  const ops: Operators = {};
  for (const op of ['min', 'max'] as const) {
    if (!Object.hasOwn(value, op)) continue;
    const bound = value[op];
    if (typeof bound !== 'number' || !Number.isFinite(bound)) {
      return { ok: false, message: `${where}: ${op} must be a finite number.` };
    }
    ops[op] = bound;
  }
  if (ops.min !== undefined && ops.max !== undefined && ops.min > ops.max) {
    return { ok: false, message: `${where}: min (${ops.min}) is greater than max (${ops.max}).` };
  }
  for (const op of ['in', 'not_in'] as const) {
    if (!Object.hasOwn(value, op)) continue;
    const list = value[op];
    if (!Array.isArray(list) || !list.every((item) => isJsonValue(item, 1))) {
      return {
        ok: false,
        message: `${where}: ${op} must be an array of JSON values (nested at most ${MAX_DEPTH} levels).`,
      };
    }
    if (op === 'in' && list.length === 0) {
      return { ok: false, message: `${where}: in must list at least one value.` };
    }
    ops[op] = dedupe(list).map(cloneJson);
  }
  return { ok: true, value: operatorObject(ops) };
}

// ---------------------------------------------------------------------------------------------
// Intersection

const CONFLICT = Symbol('conflict');

function intersectField(x: unknown, y: unknown): { value: unknown } | typeof CONFLICT {
  const xIsOps = isPlainObject(x);
  const yIsOps = isPlainObject(y);
  if (!xIsOps && !yIsOps) return jsonEqual(x, y) ? { value: cloneJson(x) } : CONFLICT;
  if (!xIsOps) return exactWithin(x, y);
  if (!yIsOps) return exactWithin(y, x);
  const ox = readOperators(x);
  const oy = readOperators(y);
  if (ox === undefined || oy === undefined) return CONFLICT;
  return mergeOperators(ox, oy);
}

/** Exact value vs operator object: the exact value survives only if it satisfies the operators. */
function exactWithin(exact: unknown, opsValue: unknown): { value: unknown } | typeof CONFLICT {
  const ops = isPlainObject(opsValue) ? readOperators(opsValue) : undefined;
  if (ops === undefined || failingOperators(ops, exact).length > 0) return CONFLICT;
  return { value: cloneJson(exact) };
}

function mergeOperators(x: Operators, y: Operators): { value: unknown } | typeof CONFLICT {
  const merged: Operators = {};
  const mins = [x.min, y.min].filter((n) => n !== undefined);
  const maxes = [x.max, y.max].filter((n) => n !== undefined);
  if (mins.length > 0) merged.min = Math.max(...mins);
  if (maxes.length > 0) merged.max = Math.min(...maxes);
  if (merged.min !== undefined && merged.max !== undefined && merged.min > merged.max) return CONFLICT;
  if (x.not_in !== undefined || y.not_in !== undefined) {
    merged.not_in = dedupe([...(x.not_in ?? []), ...(y.not_in ?? [])]);
  }
  let candidates: readonly unknown[] | undefined;
  if (x.in !== undefined && y.in !== undefined) {
    const inY = new Set(y.in.map(canonicalJson));
    candidates = x.in.filter((item) => inY.has(canonicalJson(item)));
  } else {
    candidates = x.in ?? y.in;
  }
  if (candidates !== undefined) {
    // An `in` entry the other operators exclude could never be supplied, so it is dropped; if none
    // is left, no value satisfies both sides.
    const bounds: Operators = { min: merged.min, max: merged.max, not_in: merged.not_in };
    merged.in = dedupe(candidates).filter((item) => failingOperators(bounds, item).length === 0);
    if (merged.in.length === 0) return CONFLICT;
  }
  const out = operatorObject(merged);
  return { value: cloneJson(out) };
}
