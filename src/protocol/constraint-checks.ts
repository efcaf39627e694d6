/**
 * §2.13 and §5.11: checking an execution against its grant's constraints, twice. checkConstraints
 * on the agent's arguments (JSON values); checkSentConstraints on the request as it will be
 * serialized upstream (src/upstream/sent-values.ts extracts those values), so that no repeated
 * key, alias or nested shape carries a value the first check never saw. `not_in` compares
 * lookalikes as equal (src/lookalike.ts). Anything that cannot be interpreted fails.
 */
import { lookalikeKey } from '../lookalike.js';
import { ownValue } from '../util/own-keys.js';
import type { Constraints } from './constraints.js';
import {
  MAX_DEPTH,
  failingOperators,
  forbiddenKeys,
  isPlainObject,
  jsonEqual,
  readOperators,
  type Operator,
  type Operators,
} from './constraint-operators.js';

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
    const actual = ownValue(args, field);
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
