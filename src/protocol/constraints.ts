/**
 * Scoped grants (§2.13): validating a constraints object as received, intersecting the agent's
 * proposal with the approver's and the policy's, and checking execution arguments against the
 * result (§5.11). Pure and dependency-free.
 *
 * Everything here fails closed: a constraint this module cannot interpret is never read as "no
 * constraint", because ignoring a constraint could grant broader access than intended (§2.13).
 *
 * Two checks use the same constraints: checkConstraints on the agent's arguments (JSON values), and
 * checkSentConstraints on the request as it will be serialized upstream (src/upstream/sent-values.ts
 * extracts those values), so that no repeated key, alias or nested shape carries a value the first
 * check never saw. `not_in` compares lookalikes as equal (src/lookalike.ts).
 */
import { lookalikeKey } from '../lookalike.js';
import { canonicalJson } from '../util/canonical-json.js';

/** Field name → exact value, or operator object. Keys are top-level input field names (§2.13). */
export type Constraints = Readonly<Record<string, unknown>>;

export const CONSTRAINT_OPERATORS = ['min', 'max', 'in', 'not_in'] as const;

export type ConstraintProblem =
  { kind: 'unknown_operator'; operators: string[]; message: string } | { kind: 'invalid'; message: string };

export interface Violation {
  field: string;
  constraint: unknown;
  actual: unknown;
  /**
   * Set when the violation was found in the serialized request rather than in the arguments: where
   * the value was sent, and, for a value sent under the field's name by another argument, which.
   */
  sent?: { in: string; name: string; by?: string };
}

/**
 * One value as the upstream receives it, decoded (built by src/upstream/sent-values.ts). `json` is
 * set where the location carries JSON; otherwise `text` is all there is, and an upstream that reads
 * a list splits it on `separators`.
 */
export interface SentValue {
  readonly in: string;
  readonly name: string;
  readonly text: string;
  readonly json?: { readonly value: unknown };
  readonly separators: readonly string[];
}

/**
 * What the upstream receives for one constrained field: `own`, every value its own argument puts
 * into the request; `foreign`, values sent under its name (or a name a server may read as it) by
 * another argument, with `by` naming that argument ('' when it cannot be told).
 */
export interface SentField {
  readonly own: readonly SentValue[];
  /** Whether some own value is sent under the field's own name (not only under an object's keys). */
  readonly named: boolean;
  readonly foreign: readonly (SentValue & { readonly by: string })[];
}

type Operator = (typeof CONSTRAINT_OPERATORS)[number];

interface Operators {
  min?: number;
  max?: number;
  in?: readonly unknown[];
  not_in?: readonly unknown[];
}

const KNOWN_OPERATORS: ReadonlySet<string> = new Set(CONSTRAINT_OPERATORS);

// Bounds the recursion of every walk over a constraint value (validation, cloning, equality), so a
// hostile, deeply nested proposal cannot exhaust the stack. Real constraint values are flat.
const MAX_DEPTH = 32;

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

/**
 * Checks execution arguments against constraints (§5.11); [] when all are satisfied. A missing
 * argument for a constrained field is one violation carrying the whole constraint (actual: null);
 * otherwise each failing operator is one violation, e.g. `{ field, constraint: { max: 1000 }, actual }`.
 */
export function checkConstraints(
  constraints: Constraints | undefined,
  args: Readonly<Record<string, unknown>>,
): Violation[] {
  if (constraints === undefined) return [];
  const violations: Violation[] = [];
  for (const [field, constraint] of Object.entries(constraints)) {
    // hasOwn: an argument named "constructor" must not be found on Object.prototype.
    const actual = Object.hasOwn(args, field) ? args[field] : undefined;
    if (actual === undefined) {
      violations.push({ field, constraint, actual: null });
      continue;
    }
    if (!isPlainObject(constraint)) {
      if (!jsonEqual(constraint, actual)) violations.push({ field, constraint, actual });
      continue;
    }
    const ops = readOperators(constraint);
    if (ops === undefined) {
      violations.push({ field, constraint, actual });
      continue;
    }
    for (const op of failingOperators(ops, actual)) {
      violations.push({ field, constraint: { [op]: ops[op] }, actual });
    }
  }
  return violations;
}

/**
 * Checks the request as it will be serialized upstream against constraints (§2.13, §5.11); [] when
 * nothing the upstream would receive lies outside the grant. For each constrained field:
 *  - a field that sends nothing under its own name (an empty list or object, null, an object
 *    exploded into keys) is a violation, as a missing argument is, unless an `in` entry of the
 *    constraint is itself an object;
 *  - any value another argument sends under the field's name is a violation, whatever its value:
 *    only the field's own argument may speak for it (a repeated query key from an exploded object,
 *    a form field, a JSON body key, a header or cookie alias);
 *  - every value the field's own argument sends must satisfy each operator: min/max need a number
 *    literal within the bounds; an exact value or `in` list of scalars needs the value's own text;
 *    `not_in` refuses the value when it, or any piece of it split on the style's separators, or any
 *    element of a JSON array, is a lookalike of a listed value. Exact values and `in` entries that
 *    are arrays or objects are compared on the arguments only (checkConstraints).
 * `sentField(field)` is called once per constrained field.
 */
export function checkSentConstraints(
  constraints: Constraints | undefined,
  sentField: (field: string) => SentField,
): Violation[] {
  if (constraints === undefined) return [];
  const violations: Violation[] = [];
  for (const [field, constraint] of Object.entries(constraints)) {
    const { own, named, foreign } = sentField(field);
    for (const value of foreign) {
      violations.push({
        field,
        constraint,
        actual: actualOf(value),
        sent: { in: value.in, name: value.name, by: value.by },
      });
    }
    if (own.length === 0 || (!named && !allowsObjects(constraint))) {
      // An argument that serializes to nothing ([] or {} exploded, null), or only to other names
      // (an object exploded into its keys), leaves the field missing upstream, and a missing value
      // satisfies no constraint (as in checkConstraints).
      violations.push({ field, constraint, actual: null });
      continue;
    }
    const ops = isPlainObject(constraint) ? readOperators(constraint) : undefined;
    for (const value of own) {
      const sent = { in: value.in, name: value.name };
      if (!isPlainObject(constraint)) {
        if (!sentEquals(constraint, value))
          violations.push({ field, constraint, actual: actualOf(value), sent });
        continue;
      }
      if (ops === undefined) {
        violations.push({ field, constraint, actual: actualOf(value), sent });
        continue;
      }
      for (const op of failingSentOperators(ops, value)) {
        violations.push({ field, constraint: { [op]: ops[op] }, actual: actualOf(value), sent });
      }
    }
  }
  return violations;
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
// Interpretation, shared by checking and intersecting

/**
 * The operators of an operator object, or undefined when it cannot be interpreted (unknown or
 * ill-typed operator, empty object, non-JSON list entries): callers treat that as unsatisfiable.
 */
function readOperators(value: Record<string, unknown>): Operators | undefined {
  const keys = Object.keys(value);
  if (keys.length === 0 || keys.some((key) => !KNOWN_OPERATORS.has(key))) return undefined;
  const ops: Operators = {};
  for (const op of ['min', 'max'] as const) {
    if (!Object.hasOwn(value, op)) continue;
    const bound = value[op];
    if (typeof bound !== 'number' || !Number.isFinite(bound)) return undefined;
    ops[op] = bound;
  }
  for (const op of ['in', 'not_in'] as const) {
    if (!Object.hasOwn(value, op)) continue;
    const list = value[op];
    if (!Array.isArray(list) || !list.every((item) => isJsonValue(item, 1))) return undefined;
    ops[op] = list;
  }
  return ops;
}

/** The operators `actual` fails. min/max accept only finite numbers: no coercion of "5" (§2.13). */
function failingOperators(ops: Operators, actual: unknown): Operator[] {
  const failing: Operator[] = [];
  const isNumber = typeof actual === 'number' && Number.isFinite(actual);
  if (ops.min !== undefined && !(isNumber && actual >= ops.min)) failing.push('min');
  if (ops.max !== undefined && !(isNumber && actual <= ops.max)) failing.push('max');
  if (ops.in !== undefined && !ops.in.some((item) => jsonEqual(item, actual))) failing.push('in');
  if (ops.not_in !== undefined && forbiddenKeys(ops.not_in).has(lookalikeKey(actual))) failing.push('not_in');
  return failing;
}

// Folded once per list: parsed constraints are cached per grant, so the same list object recurs.
const forbiddenByList = new WeakMap<readonly unknown[], ReadonlySet<string>>();

/** The lookalike keys of a not_in list (src/lookalike.ts): a value with one of them is refused. */
function forbiddenKeys(list: readonly unknown[]): ReadonlySet<string> {
  let keys = forbiddenByList.get(list);
  if (!keys) {
    keys = new Set(list.map((item) => lookalikeKey(item)));
    forbiddenByList.set(list, keys);
  }
  return keys;
}

// ---------------------------------------------------------------------------------------------
// Values as sent

/** JSON number grammar (as String(number) writes finite numbers): no hex, spaces or trailing text. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

function actualOf(value: SentValue): unknown {
  return value.json ? value.json.value : value.text;
}

function isScalar(value: unknown): value is string | number | boolean | null {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

/** A sent text is the text of a scalar exactly as the serializer writes it (numbers by value). */
function textIs(expected: unknown, text: string): boolean {
  if (typeof expected === 'string') return text === expected;
  if (typeof expected === 'number') return JSON_NUMBER.test(text) && Number(text) === expected;
  if (typeof expected === 'boolean') return text === String(expected);
  return false;
}

function sentEquals(expected: unknown, value: SentValue): boolean {
  if (value.json) return jsonEqual(expected, value.json.value);
  // An array or object exact value is compared on the arguments (checkConstraints) only.
  return isScalar(expected) ? textIs(expected, value.text) : true;
}

function failingSentOperators(ops: Operators, value: SentValue): Operator[] {
  if (value.json) {
    const failing = failingOperators(ops, value.json.value);
    // A JSON array carries each element as a value of its own to an upstream that reads a list.
    if (
      ops.not_in !== undefined &&
      !failing.includes('not_in') &&
      hasForbiddenElement(ops.not_in, value.json.value, 0)
    ) {
      failing.push('not_in');
    }
    return failing;
  }
  const { text } = value;
  const failing: Operator[] = [];
  const number = JSON_NUMBER.test(text) ? Number(text) : undefined;
  if (ops.min !== undefined && !(number !== undefined && number >= ops.min)) failing.push('min');
  if (ops.max !== undefined && !(number !== undefined && number <= ops.max)) failing.push('max');
  if (ops.in !== undefined && ops.in.every(isScalar) && !ops.in.some((item) => textIs(item, text))) {
    failing.push('in');
  }
  if (ops.not_in !== undefined) {
    const forbidden = forbiddenKeys(ops.not_in);
    if (pieces(text, value.separators).some((piece) => forbidden.has(lookalikeKey(piece))))
      failing.push('not_in');
  }
  return failing;
}

/** An approved object value is sent as its keys when exploded: then the field's name is absent. */
function allowsObjects(constraint: unknown): boolean {
  if (!isPlainObject(constraint)) return false;
  const list = constraint.in;
  return Array.isArray(list) && list.some(isPlainObject);
}

function hasForbiddenElement(list: readonly unknown[], value: unknown, depth: number): boolean {
  if (!Array.isArray(value) || depth >= MAX_DEPTH) return false;
  const forbidden = forbiddenKeys(list);
  return value.some(
    (item) => forbidden.has(lookalikeKey(item)) || hasForbiddenElement(list, item, depth + 1),
  );
}

/** The text itself and every piece of it between separators: what a list-reading upstream sees. */
function pieces(text: string, separators: readonly string[]): string[] {
  let parts = [text];
  for (const separator of separators) parts = parts.flatMap((part) => part.split(separator));
  return parts.length > 1 ? [text, ...parts] : parts;
}

/** Operator keys in canonical order, so equal constraints serialize identically. */
function operatorObject(ops: Operators): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const op of CONSTRAINT_OPERATORS) if (ops[op] !== undefined) out[op] = ops[op];
  return out;
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

// ---------------------------------------------------------------------------------------------
// JSON values

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isJsonValue(value: unknown, depth: number): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(value)) return value.every((item) => isJsonValue(item, depth + 1));
  if (isPlainObject(value)) return Object.values(value).every((item) => isJsonValue(item, depth + 1));
  return false;
}

/**
 * Deep JSON equality without coercion: "5" ≠ 5, 1 ≠ true, object key order ignored. Anything that
 * is not a JSON value equals nothing but itself. Recursion stops at the shallower side, and
 * constraint values are depth-limited, so comparing against a deep argument stays bounded.
 */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]))
    );
  }
  return false;
}

/** Linear-time de-duplication by JSON equality, keeping first occurrences in order. */
function dedupe(list: readonly unknown[]): unknown[] {
  const seen = new Set<string>();
  return list.filter((item) => {
    const key = canonicalJson(item);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A fresh copy, so later changes to the caller's objects cannot alter stored constraints. */
function cloneJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(cloneJson);
  if (isPlainObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, cloneJson(item)]));
  }
  return value;
}
