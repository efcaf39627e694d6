/**
 * §2.13 constraint operators and the JSON values they hold, as read for checking and for
 * intersecting (constraint-checks.ts, constraints.ts). Anything that cannot be interpreted reads
 * as undefined, which callers treat as unsatisfiable: a constraint is never read as "none".
 */
import { lookalikeKey } from '../lookalike.js';
import { canonicalJson } from '../util/canonical-json.js';

export const CONSTRAINT_OPERATORS = ['min', 'max', 'in', 'not_in'] as const;

export type Operator = (typeof CONSTRAINT_OPERATORS)[number];

export interface Operators {
  min?: number;
  max?: number;
  in?: readonly unknown[];
  not_in?: readonly unknown[];
}

export const KNOWN_OPERATORS: ReadonlySet<string> = new Set(CONSTRAINT_OPERATORS);

// Bounds the recursion of every walk over a constraint value (validation, cloning, equality), so a
// hostile, deeply nested proposal cannot exhaust the stack. Real constraint values are flat.
export const MAX_DEPTH = 32;

/**
 * The operators of an operator object, or undefined when it cannot be interpreted (unknown or
 * ill-typed operator, empty object, non-JSON list entries): callers treat that as unsatisfiable.
 */
export function readOperators(value: Record<string, unknown>): Operators | undefined {
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
export function failingOperators(ops: Operators, actual: unknown): Operator[] {
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
export function forbiddenKeys(list: readonly unknown[]): ReadonlySet<string> {
  let keys = forbiddenByList.get(list);
  if (!keys) {
    keys = new Set(list.map((item) => lookalikeKey(item)));
    forbiddenByList.set(list, keys);
  }
  return keys;
}

/** Operator keys in canonical order, so equal constraints serialize identically. */
export function operatorObject(ops: Operators): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const op of CONSTRAINT_OPERATORS) if (ops[op] !== undefined) out[op] = ops[op];
  return out;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

export function isJsonValue(value: unknown, depth: number): boolean {
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
export function jsonEqual(a: unknown, b: unknown): boolean {
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
export function dedupe(list: readonly unknown[]): unknown[] {
  const seen = new Set<string>();
  return list.filter((item) => {
    const key = canonicalJson(item);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A fresh copy, so later changes to the caller's objects cannot alter stored constraints. */
export function cloneJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(cloneJson);
  if (isPlainObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, cloneJson(item)]));
  }
  return value;
}
