import { describe, expect, it } from 'vitest';

import {
  CONSTRAINT_OPERATORS,
  intersectConstraints,
  parseConstraints,
} from '../../../src/protocol/constraints.js';
import { checkConstraints } from '../../../src/protocol/constraint-checks.js';
import type { Constraints } from '../../../src/protocol/constraints.js';

const FIELDS: ReadonlySet<string> = new Set(['amount', 'currency', 'destination_account', 'tags', 'note']);

/** Parses or fails the test, for the many cases that need valid constraints. null: no schema. */
function parsed(raw: unknown, fields: ReadonlySet<string> | null = FIELDS): Constraints {
  const result = parseConstraints(raw, fields ?? undefined);
  if (!result.ok) throw new Error(`unexpected problem: ${result.problem.message}`);
  return result.constraints;
}

function problemOf(raw: unknown, fields: ReadonlySet<string> | null = FIELDS) {
  const result = parseConstraints(raw, fields ?? undefined);
  if (result.ok) throw new Error(`expected a problem for ${JSON.stringify(raw)}`);
  return result.problem;
}

describe('CONSTRAINT_OPERATORS', () => {
  it('lists exactly the four operators of §2.13', () => {
    expect([...CONSTRAINT_OPERATORS]).toEqual(['min', 'max', 'in', 'not_in']);
  });
});

describe('parseConstraints: accepted input', () => {
  it('accepts the §2.13 example', () => {
    const raw = {
      destination_account: 'acc_456',
      amount: { min: 0, max: 1000 },
      currency: { in: ['USD', 'EUR'] },
    };
    expect(parseConstraints(raw, FIELDS)).toEqual({ ok: true, constraints: raw });
  });

  it('accepts every kind of exact value', () => {
    const raw = { amount: 5, currency: 'USD', destination_account: null, tags: ['a', { b: 1 }], note: false };
    expect(parsed(raw)).toEqual(raw);
  });

  it('accepts an empty constraints object', () => {
    expect(parsed({})).toEqual({});
  });

  it('accepts min equal to max, and an empty not_in', () => {
    expect(parsed({ amount: { min: 5, max: 5 }, currency: { not_in: [] } })).toEqual({
      amount: { min: 5, max: 5 },
      currency: { not_in: [] },
    });
  });

  it('skips the field check when no schema is known', () => {
    expect(parsed({ anything: 1, 'a.b': 2 }, null)).toEqual({ anything: 1, 'a.b': 2 });
  });

  it('accepts a top-level field whose name contains a dot when the schema has it', () => {
    expect(parsed({ 'a.b': 1 }, new Set(['a.b']))).toEqual({ 'a.b': 1 });
  });

  it('normalizes operator key order and removes duplicate list entries by deep equality', () => {
    const result = parsed({
      amount: { not_in: [3, 3], in: [1, 2, 1], max: 9, min: 0 },
      tags: { in: [{ x: 1, y: 2 }, { y: 2, x: 1 }, [1], [1]] },
    });
    expect(Object.keys(result.amount as object)).toEqual(['min', 'max', 'in', 'not_in']);
    expect(result.amount).toEqual({ min: 0, max: 9, in: [1, 2], not_in: [3] });
    expect(result.tags).toEqual({ in: [{ x: 1, y: 2 }, [1]] });
  });

  it('keeps "5", 5 and true apart when de-duplicating', () => {
    expect(parsed({ amount: { in: ['5', 5, true, 1] } })).toEqual({ amount: { in: ['5', 5, true, 1] } });
  });

  it('returns copies: mutating the input afterwards changes nothing', () => {
    const raw = { amount: { in: [1, 2] }, tags: ['a'] };
    const result = parsed(raw);
    raw.amount.in.push(3);
    raw.tags.push('b');
    expect(result).toEqual({ amount: { in: [1, 2] }, tags: ['a'] });
  });

  it('keeps a field named __proto__ as data, not as a prototype', () => {
    const raw: unknown = JSON.parse('{"__proto__": {"max": 1}}');
    const result = parsed(raw, null);
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.keys(result)).toEqual(['__proto__']);
    expect(checkConstraints(result, JSON.parse('{"__proto__": 2}'))).toEqual([
      { field: '__proto__', constraint: { max: 1 }, actual: 2 },
    ]);
  });
});

describe('parseConstraints: unknown operators', () => {
  it('rejects an unknown operator with kind unknown_operator', () => {
    const problem = problemOf({ amount: { max: 10, regex: '^1' } });
    expect(problem).toMatchObject({ kind: 'unknown_operator', operators: ['regex'] });
    expect(problem.message).toContain('"regex"');
  });

  it('lists every unknown operator across all fields, each once', () => {
    const problem = problemOf({
      amount: { gt: 1, lt: 5 },
      currency: { regex: 'x' },
      note: { gt: 2 },
    });
    expect(problem).toMatchObject({ kind: 'unknown_operator', operators: ['gt', 'lt', 'regex'] });
  });

  it('treats an exact value mixed into an operator object as an unknown operator', () => {
    expect(problemOf({ amount: { max: 10, value: 5 } })).toMatchObject({
      kind: 'unknown_operator',
      operators: ['value'],
    });
  });

  it('reports unknown operators before other problems, as §2.13 requires that error code', () => {
    expect(problemOf({ nope: 1, amount: { min: 'x', eq: 1 } })).toMatchObject({
      kind: 'unknown_operator',
      operators: ['eq'],
    });
  });

  it('does not mistake Object.prototype names or __proto__ for operators', () => {
    expect(problemOf({ amount: { constructor: 1 } })).toMatchObject({ operators: ['constructor'] });
    const raw: unknown = JSON.parse('{"amount": {"__proto__": {"max": 1}}}');
    expect(problemOf(raw)).toMatchObject({ kind: 'unknown_operator', operators: ['__proto__'] });
  });
});

describe('parseConstraints: invalid input', () => {
  it.each([
    ['null', null],
    ['an array', [{ amount: 1 }]],
    ['a string', 'amount<=5'],
    ['a number', 5],
    ['undefined', undefined],
    ['a Map', new Map([['amount', 1]])],
  ])('rejects constraints that are %s', (_label, raw) => {
    expect(problemOf(raw)).toMatchObject({ kind: 'invalid' });
  });

  it('rejects an empty field name', () => {
    expect(problemOf({ '': 1 }, null)).toMatchObject({ kind: 'invalid' });
  });

  it('rejects a field the capability does not have, naming it', () => {
    const problem = problemOf({ amount: 1, colour: 'red' });
    expect(problem.kind).toBe('invalid');
    expect(problem.message).toContain('"colour"');
  });

  it('rejects nested paths, naming the field', () => {
    const problem = problemOf({ 'amount.value': 1 });
    expect(problem.kind).toBe('invalid');
    expect(problem.message).toContain('"amount.value"');
    expect(problem.message).toMatch(/nested/);
  });

  it('rejects an empty operator object', () => {
    expect(problemOf({ amount: {} })).toMatchObject({ kind: 'invalid' });
  });

  it.each([
    ['a string min', { min: '5' }],
    ['a string max', { max: '1000' }],
    ['a boolean max', { max: true }],
    ['a null min', { min: null }],
    ['an infinite max', { max: Infinity }],
    ['a NaN min', { min: NaN }],
    ['an array max', { max: [1] }],
  ])('rejects %s', (_label, value) => {
    const problem = problemOf({ amount: value });
    expect(problem.kind).toBe('invalid');
    expect(problem.message).toContain('"amount"');
  });

  it('rejects min greater than max', () => {
    expect(problemOf({ amount: { min: 10, max: 5 } })).toMatchObject({ kind: 'invalid' });
  });

  it.each([
    ['an empty in', { in: [] }],
    ['a non-array in', { in: 'USD' }],
    ['a non-array not_in', { not_in: { a: 1 } }],
    ['an in entry that is not JSON', { in: [undefined] }],
    ['a not_in entry that is NaN', { not_in: [NaN] }],
    ['an in entry holding a Date', { in: [{ at: new Date(0) }] }],
  ])('rejects %s', (_label, value) => {
    expect(problemOf({ currency: value })).toMatchObject({ kind: 'invalid' });
  });

  it.each([
    ['undefined', undefined],
    ['NaN', NaN],
    ['Infinity', -Infinity],
    ['a function', () => 1],
    ['a bigint', 1n],
    ['a Date', new Date(0)],
    ['an array holding undefined', [undefined]],
  ])('rejects an exact value that is %s', (_label, value) => {
    expect(problemOf({ amount: value })).toMatchObject({ kind: 'invalid' });
  });

  it('rejects values nested too deeply instead of recursing without bound', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(problemOf({ tags: deep })).toMatchObject({ kind: 'invalid' });
    expect(problemOf({ tags: { in: [deep] } })).toMatchObject({ kind: 'invalid' });
    let shallow: unknown = 1;
    for (let i = 0; i < 20; i++) shallow = [shallow];
    expect(parsed({ tags: shallow })).toEqual({ tags: shallow });
  });

  it('handles a long in-list quickly (no quadratic de-duplication)', () => {
    const list = Array.from({ length: 50_000 }, (_, i) => ({ id: i % 25_000 }));
    const started = performance.now();
    const result = parsed({ tags: { in: list } });
    expect(performance.now() - started).toBeLessThan(2000);
    expect((result.tags as { in: unknown[] }).in).toHaveLength(25_000);
  });
});

describe('checkConstraints', () => {
  const constraints = parsed({
    destination_account: 'acc_456',
    amount: { min: 0, max: 1000 },
    currency: { in: ['USD', 'EUR'] },
  });

  it('returns [] when there are no constraints', () => {
    expect(checkConstraints(undefined, { anything: 1 })).toEqual([]);
    expect(checkConstraints({}, {})).toEqual([]);
  });

  it('returns [] when every constraint is satisfied, including bounds themselves', () => {
    expect(
      checkConstraints(constraints, { destination_account: 'acc_456', amount: 0, currency: 'USD' }),
    ).toEqual([]);
    expect(
      checkConstraints(constraints, { destination_account: 'acc_456', amount: 1000, currency: 'EUR' }),
    ).toEqual([]);
  });

  it('ignores arguments that are not constrained', () => {
    expect(
      checkConstraints(constraints, {
        destination_account: 'acc_456',
        amount: 1,
        currency: 'USD',
        memo: 'x',
      }),
    ).toEqual([]);
  });

  it('reports the §5.11 example violations', () => {
    expect(
      checkConstraints(constraints, { destination_account: 'acc_456', amount: 5000, currency: 'GBP' }),
    ).toEqual([
      { field: 'amount', constraint: { max: 1000 }, actual: 5000 },
      { field: 'currency', constraint: { in: ['USD', 'EUR'] }, actual: 'GBP' },
    ]);
  });

  it('reports a violated minimum', () => {
    expect(checkConstraints({ amount: { min: 0, max: 10 } }, { amount: -1 })).toEqual([
      { field: 'amount', constraint: { min: 0 }, actual: -1 },
    ]);
  });

  it('reports a missing argument once, with the whole constraint and actual null', () => {
    expect(checkConstraints(constraints, { destination_account: 'acc_456', currency: 'USD' })).toEqual([
      { field: 'amount', constraint: { min: 0, max: 1000 }, actual: null },
    ]);
    expect(checkConstraints({ currency: { not_in: ['GBP'] } }, {})).toEqual([
      { field: 'currency', constraint: { not_in: ['GBP'] }, actual: null },
    ]);
    expect(checkConstraints({ note: 'x' }, { note: undefined })).toEqual([
      { field: 'note', constraint: 'x', actual: null },
    ]);
  });

  it('does not find a missing argument on Object.prototype', () => {
    expect(checkConstraints({ constructor: { not_in: [] } }, {})).toEqual([
      { field: 'constructor', constraint: { not_in: [] }, actual: null },
    ]);
  });

  it('treats a numeric string as a violation of min and max (no type coercion)', () => {
    expect(checkConstraints({ amount: { min: 0, max: 1000 } }, { amount: '5' })).toEqual([
      { field: 'amount', constraint: { min: 0 }, actual: '5' },
      { field: 'amount', constraint: { max: 1000 }, actual: '5' },
    ]);
  });

  it.each([[true], [null], [[5]], [{ valueOf: 5 }], [NaN], [Infinity]])(
    'rejects %j against a numeric bound',
    (actual) => {
      expect(checkConstraints({ amount: { max: 1000 } }, { amount: actual })).toHaveLength(1);
    },
  );

  it('compares exact values by deep JSON equality without coercion', () => {
    expect(checkConstraints({ amount: 5 }, { amount: 5 })).toEqual([]);
    expect(checkConstraints({ amount: 5 }, { amount: '5' })).toEqual([
      { field: 'amount', constraint: 5, actual: '5' },
    ]);
    expect(checkConstraints({ note: 1 }, { note: true })).toHaveLength(1);
    expect(checkConstraints({ note: 0 }, { note: false })).toHaveLength(1);
    expect(checkConstraints({ note: null }, { note: null })).toEqual([]);
    expect(checkConstraints({ note: '' }, { note: null })).toHaveLength(1);
    expect(checkConstraints({ tags: ['a', 'b'] }, { tags: ['a', 'b'] })).toEqual([]);
    expect(checkConstraints({ tags: ['a', 'b'] }, { tags: ['b', 'a'] })).toHaveLength(1);
    expect(checkConstraints({ tags: ['a'] }, { tags: ['a', 'a'] })).toHaveLength(1);
    expect(checkConstraints({ tags: [{ x: 1, y: [2] }] }, { tags: [{ y: [2], x: 1 }] })).toEqual([]);
    expect(checkConstraints({ tags: [{ x: 1 }] }, { tags: [{ x: 1, y: 2 }] })).toHaveLength(1);
    expect(checkConstraints({ tags: [{ x: 1, z: 2 }] }, { tags: [{ x: 1, y: 2 }] })).toHaveLength(1);
  });

  it('applies in by deep equality and not_in by lookalike equality', () => {
    const c = parsed({ tags: { in: [['a'], { k: 1 }] }, currency: { not_in: ['GBP', 5] } });
    expect(checkConstraints(c, { tags: { k: 1 }, currency: 'USD' })).toEqual([]);
    expect(checkConstraints(c, { tags: ['a'], currency: '6' })).toEqual([]);
    // An upstream reading a number from text sees "5" as 5: not_in refuses it (src/lookalike.ts).
    expect(checkConstraints(c, { tags: ['a'], currency: '5' })).toEqual([
      { field: 'currency', constraint: { not_in: ['GBP', 5] }, actual: '5' },
    ]);
    expect(checkConstraints(c, { tags: 'a', currency: 5 })).toEqual([
      { field: 'tags', constraint: { in: [['a'], { k: 1 }] }, actual: 'a' },
      { field: 'currency', constraint: { not_in: ['GBP', 5] }, actual: 5 },
    ]);
  });

  it('yields one violation per failing operator on the same field', () => {
    const c = parsed({ amount: { min: 10, in: [1, 20], not_in: [1] } });
    expect(checkConstraints(c, { amount: 1 })).toEqual([
      { field: 'amount', constraint: { min: 10 }, actual: 1 },
      { field: 'amount', constraint: { not_in: [1] }, actual: 1 },
    ]);
  });

  it('fails closed on constraints it cannot interpret', () => {
    for (const constraint of [
      { regex: '.*' },
      { max: 10, eq: 5 },
      {},
      { max: '10' },
      { in: 'USD' },
      { in: [undefined] },
    ]) {
      expect(checkConstraints({ amount: constraint }, { amount: 5 })).toEqual([
        { field: 'amount', constraint, actual: 5 },
      ]);
    }
  });

  it('rejects everything against the conflict marker { in: [] }', () => {
    expect(checkConstraints({ amount: { in: [] } }, { amount: 1 })).toEqual([
      { field: 'amount', constraint: { in: [] }, actual: 1 },
    ]);
  });

  it('compares against deeply nested arguments without unbounded recursion', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(checkConstraints({ tags: [[[1]]] }, { tags: deep })).toHaveLength(1);
    expect(checkConstraints({ tags: { in: [[[1]]] } }, { tags: deep })).toHaveLength(1);
  });
});

describe('intersectConstraints', () => {
  it('returns undefined when neither side constrains anything', () => {
    expect(intersectConstraints(undefined, undefined)).toEqual({ constraints: undefined, conflicts: [] });
    expect(intersectConstraints({}, undefined)).toEqual({ constraints: undefined, conflicts: [] });
    expect(intersectConstraints({}, {})).toEqual({ constraints: undefined, conflicts: [] });
  });

  it('keeps a side when the other is absent, as a copy', () => {
    const a = parsed({ amount: { max: 5 }, tags: ['x'] });
    const result = intersectConstraints(a, undefined);
    expect(result).toEqual({ constraints: a, conflicts: [] });
    expect(result.constraints?.amount).not.toBe(a.amount);
    expect(intersectConstraints(undefined, a)).toEqual({ constraints: a, conflicts: [] });
  });

  it('keeps fields constrained on one side only', () => {
    expect(intersectConstraints({ amount: { max: 5 } }, { currency: 'USD' })).toEqual({
      constraints: { amount: { max: 5 }, currency: 'USD' },
      conflicts: [],
    });
  });

  it('keeps equal exact values and reports different ones as conflicts', () => {
    expect(intersectConstraints({ tags: [{ b: 1, a: [2] }] }, { tags: [{ a: [2], b: 1 }] })).toEqual({
      constraints: { tags: [{ b: 1, a: [2] }] },
      conflicts: [],
    });
    expect(intersectConstraints({ currency: 'USD' }, { currency: 'USD' })).toEqual({
      constraints: { currency: 'USD' },
      conflicts: [],
    });
    const result = intersectConstraints({ currency: 'USD', amount: 5 }, { currency: 'EUR', amount: '5' });
    expect(result.conflicts).toEqual(['currency', 'amount']);
    expect(result.constraints).toEqual({ currency: { in: [] }, amount: { in: [] } });
  });

  it('keeps an exact value that satisfies the other side’s operators', () => {
    expect(intersectConstraints({ amount: 500 }, { amount: { min: 0, max: 1000 } })).toEqual({
      constraints: { amount: 500 },
      conflicts: [],
    });
    expect(intersectConstraints({ currency: { in: ['USD', 'EUR'] } }, { currency: 'EUR' })).toEqual({
      constraints: { currency: 'EUR' },
      conflicts: [],
    });
  });

  it('reports an exact value outside the other side’s operators as a conflict', () => {
    expect(intersectConstraints({ amount: 5000 }, { amount: { max: 1000 } }).conflicts).toEqual(['amount']);
    expect(intersectConstraints({ amount: { min: 0 } }, { amount: '5' }).conflicts).toEqual(['amount']);
    expect(intersectConstraints({ currency: { not_in: ['GBP'] } }, { currency: 'GBP' }).conflicts).toEqual([
      'currency',
    ]);
  });

  it('takes the larger min and the smaller max (§2.13 policy cap example)', () => {
    expect(
      intersectConstraints({ amount: { min: 0, max: 50_000 } }, { amount: { min: -5, max: 10_000 } }),
    ).toEqual({ constraints: { amount: { min: 0, max: 10_000 } }, conflicts: [] });
    expect(intersectConstraints({ amount: { min: 3 } }, { amount: { max: 7 } })).toEqual({
      constraints: { amount: { min: 3, max: 7 } },
      conflicts: [],
    });
  });

  it('reports disjoint ranges as a conflict', () => {
    const result = intersectConstraints({ amount: { min: 10 } }, { amount: { max: 5 } });
    expect(result).toEqual({ constraints: { amount: { in: [] } }, conflicts: ['amount'] });
  });

  it('intersects in-lists by deep equality', () => {
    expect(
      intersectConstraints(
        { currency: { in: ['USD', 'EUR', { c: 1, d: 2 }] } },
        { currency: { in: [{ d: 2, c: 1 }, 'EUR', 'GBP'] } },
      ),
    ).toEqual({ constraints: { currency: { in: ['EUR', { c: 1, d: 2 }] } }, conflicts: [] });
  });

  it('filters an in-list by the other side’s bounds and not_in', () => {
    expect(
      intersectConstraints({ amount: { in: [1, 5, 50, '7', 500] } }, { amount: { max: 100, not_in: [5] } }),
    ).toEqual({ constraints: { amount: { max: 100, in: [1, 50], not_in: [5] } }, conflicts: [] });
  });

  it('reports an empty in-list as a conflict', () => {
    expect(
      intersectConstraints({ currency: { in: ['USD'] } }, { currency: { in: ['EUR'] } }).conflicts,
    ).toEqual(['currency']);
    expect(
      intersectConstraints({ currency: { in: ['USD'] } }, { currency: { not_in: ['USD'] } }).conflicts,
    ).toEqual(['currency']);
  });

  it('unions not_in lists', () => {
    expect(
      intersectConstraints(
        { currency: { not_in: ['GBP', 'JPY'] } },
        { currency: { not_in: ['JPY', 'CHF'] } },
      ),
    ).toEqual({ constraints: { currency: { not_in: ['GBP', 'JPY', 'CHF'] } }, conflicts: [] });
  });

  it('treats constraints it cannot interpret as conflicts (fails closed)', () => {
    expect(intersectConstraints({ amount: { regex: 'x' } }, { amount: { max: 5 } }).conflicts).toEqual([
      'amount',
    ]);
    expect(intersectConstraints({ amount: 5 }, { amount: { max: 'x' } }).conflicts).toEqual(['amount']);
    expect(intersectConstraints({ amount: {} }, { amount: {} }).conflicts).toEqual(['amount']);
  });

  it('is symmetric in what it allows', () => {
    const a = parsed({ amount: { min: 1, in: [1, 2, 3] }, currency: 'USD' });
    const b = parsed({ amount: { max: 2 }, currency: { in: ['USD'] }, note: { not_in: [null] } });
    const ab = intersectConstraints(a, b).constraints;
    const ba = intersectConstraints(b, a).constraints;
    for (const amount of [0, 1, 2, 3]) {
      for (const note of [null, 'x']) {
        const args = { amount, currency: 'USD', note };
        expect(checkConstraints(ab, args).length === 0).toBe(checkConstraints(ba, args).length === 0);
      }
    }
  });
});

// -------------------------------------------------------------------------------------------
// Property test: the intersection allows exactly what both sides allow.

/** mulberry32: a tiny deterministic PRNG, so failures reproduce. */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const UNIVERSE: readonly unknown[] = [
  -3,
  -1,
  0,
  0.5,
  1,
  2,
  3,
  7,
  '1',
  '2',
  'a',
  'b',
  true,
  false,
  null,
  [1],
  [1, 2],
  { k: 1 },
  { k: 2 },
];
const EXACT_VALUES = UNIVERSE.filter(
  (value) => typeof value !== 'object' || value === null || Array.isArray(value),
);
const NUMBERS = [-3, -1, 0, 0.5, 1, 2, 3, 7];
const PROPERTY_FIELDS = ['f0', 'f1', 'f2'];

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

function subset(random: () => number, max: number): unknown[] {
  const length = Math.floor(random() * (max + 1));
  return Array.from({ length }, () => pick(random, UNIVERSE));
}

function randomConstraintValue(random: () => number): unknown {
  // A plain object would be read as an operator object, so exact values come from the rest.
  if (random() < 0.3) return pick(random, EXACT_VALUES);
  const ops: Record<string, unknown> = {};
  while (Object.keys(ops).length === 0) {
    if (random() < 0.4) ops.min = pick(random, NUMBERS);
    if (random() < 0.4) ops.max = pick(random, NUMBERS);
    if (random() < 0.4) ops.in = [pick(random, UNIVERSE), ...subset(random, 4)];
    if (random() < 0.3) ops.not_in = subset(random, 3);
  }
  if (typeof ops.min === 'number' && typeof ops.max === 'number' && ops.min > ops.max) {
    [ops.min, ops.max] = [ops.max, ops.min];
  }
  return ops;
}

function randomConstraints(random: () => number): Constraints | undefined {
  if (random() < 0.1) return undefined;
  const raw: Record<string, unknown> = {};
  for (const field of PROPERTY_FIELDS) if (random() < 0.6) raw[field] = randomConstraintValue(random);
  return parsed(raw, new Set(PROPERTY_FIELDS));
}

function randomArgs(random: () => number): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const field of PROPERTY_FIELDS) if (random() < 0.92) args[field] = pick(random, UNIVERSE);
  return args;
}

const passes = (c: Constraints | undefined, args: Record<string, unknown>): boolean =>
  checkConstraints(c, args).length === 0;

describe('intersectConstraints: properties', () => {
  it('check(a ∩ b, x) passes ⇔ check(a, x) and check(b, x) pass (generated cases)', () => {
    const random = rng(0x5eed_2013);
    let bothPassed = 0;
    let intersectionRejected = 0;
    for (let round = 0; round < 3000; round++) {
      const a = randomConstraints(random);
      const b = randomConstraints(random);
      const { constraints, conflicts } = intersectConstraints(a, b);
      for (let sample = 0; sample < 25; sample++) {
        const args = randomArgs(random);
        const viaIntersection = passes(constraints, args);
        const viaBoth = passes(a, args) && passes(b, args);
        // Soundness (never wider) is the security property; completeness shows it is not too tight.
        if (viaIntersection && !viaBoth) {
          throw new Error(`wider: a=${JSON.stringify(a)} b=${JSON.stringify(b)} x=${JSON.stringify(args)}`);
        }
        if (!viaIntersection && viaBoth) {
          throw new Error(`tighter: a=${JSON.stringify(a)} b=${JSON.stringify(b)} x=${JSON.stringify(args)}`);
        }
        if (viaBoth) bothPassed++;
        if (!viaIntersection) intersectionRejected++;
        // A field reported as a conflict can never be satisfied.
        if (conflicts.length > 0) expect(viaIntersection).toBe(false);
      }
    }
    // The generator must exercise both outcomes, or the property would hold vacuously.
    expect(bothPassed).toBeGreaterThan(1000);
    expect(intersectionRejected).toBeGreaterThan(1000);
  });

  it('reports a conflict only when no value from the universe satisfies both sides', () => {
    const random = rng(42);
    let conflictsSeen = 0;
    for (let round = 0; round < 3000; round++) {
      const a = randomConstraints(random);
      const b = randomConstraints(random);
      const { conflicts } = intersectConstraints(a, b);
      for (const field of conflicts) {
        conflictsSeen++;
        for (const value of UNIVERSE) {
          const args = { [field]: value };
          const single = (c: Constraints | undefined) =>
            passes(c?.[field] === undefined ? {} : { [field]: c[field] }, args);
          expect(single(a) && single(b)).toBe(false);
        }
      }
    }
    expect(conflictsSeen).toBeGreaterThan(100);
  });

  it('produces constraints that parse back unchanged when there is no conflict', () => {
    const random = rng(7);
    let checked = 0;
    for (let round = 0; round < 2000; round++) {
      const { constraints, conflicts } = intersectConstraints(
        randomConstraints(random),
        randomConstraints(random),
      );
      if (conflicts.length > 0 || constraints === undefined) continue;
      checked++;
      expect(parseConstraints(constraints, new Set(PROPERTY_FIELDS))).toEqual({ ok: true, constraints });
    }
    expect(checked).toBeGreaterThan(500);
  });
});
