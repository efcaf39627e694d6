import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../../src/errors.js';
import { checkCapabilityList, deeperThan } from '../../../src/protocol/request-limits.js';

const LIMITS = { maxEntries: 3, maxConstraintBytes: 100, maxConstraintDepth: 2 };

function refusal(raw: unknown[]): ProtocolError {
  try {
    checkCapabilityList(raw, 'capabilities', LIMITS);
  } catch (err) {
    if (err instanceof ProtocolError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('deeperThan', () => {
  it.each([
    [1, 0, false],
    ['s', 0, false],
    [null, 0, false],
    [[], 0, true],
    [[], 1, false],
    [{ a: 1 }, 1, false],
    [{ a: [1] }, 1, true],
    [{ a: [1] }, 2, false],
    [[[[]]], 2, true],
    [[1, [2, [3]]], 3, false],
    [[1, [2, [3]]], 2, true],
  ])('%j deeper than %d → %s', (value, max, expected) => {
    expect(deeperThan(value, max)).toBe(expected);
  });

  it('walks no further than the bound, whatever the depth of the input (no stack overflow)', () => {
    let value: unknown = 1;
    for (let i = 0; i < 200_000; i++) value = [value];
    expect(deeperThan(value, 8)).toBe(true);
  });
});

describe('checkCapabilityList', () => {
  it('accepts lists within every bound', () => {
    expect(() =>
      checkCapabilityList(
        ['a', { name: 'b', constraints: { x: { in: [1, 2] } } }, { name: 'c' }],
        'capabilities',
        LIMITS,
      ),
    ).not.toThrow();
  });

  it('refuses more entries than max_entries, naming the policy key', () => {
    const err = refusal(['a', 'b', 'c', 'd']);
    expect(err.code).toBe('invalid_request');
    expect(err.message).toMatch(/4 entries.*capability_requests\.max_entries = 3/);
    expect(err.fields).toEqual({ limit: 'capability_requests.max_entries', maximum: 3 });
  });

  it('refuses a constraint value nested deeper than max_constraint_depth, naming the entry', () => {
    const err = refusal(['a', { name: 'b', constraints: { x: { in: [[1]] } } }]);
    expect(err.message).toMatch(/capabilities\[1\]\.constraints.*max_constraint_depth = 2/);
  });

  it('counts the bytes of all constraints in the request together (UTF-8)', () => {
    const fifty = 'é'.repeat(25); // 50 bytes as UTF-8, 25 characters; 58 with {"x":…}
    expect(() => checkCapabilityList([{ name: 'a', constraints: { x: fifty } }], 'c', LIMITS)).not.toThrow();
    const err = refusal([
      { name: 'a', constraints: { x: fifty } },
      { name: 'b', constraints: { x: fifty } },
    ]);
    expect(err.message).toMatch(/exceed 100 bytes.*max_constraint_bytes = 100/);
  });
});
