/** What a per-call passkey confirms (issue 16 §1): one canonical spelling per call, and its hash. */
import { describe, expect, it } from 'vitest';
import { isPerCallId, shownHash } from '../../../src/protocol/per-call.js';
import { canonicalJson } from '../../../src/util/canonical-json.js';

const CALL = {
  id: 'call_abc',
  capability: 'send_transfer',
  arguments: { to: 'acct-1', amount: 5, meta: { b: [1, { y: 2, x: 1 }], a: null } },
  expiresAt: 1_700_000_000_000,
};

describe('canonicalJson', () => {
  it('sorts object keys at every depth and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { f: 1, e: 2 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"e":2,"f":1}]},"b":1}',
    );
  });

  it('escapes strings as JSON does (no way to forge a key boundary)', () => {
    expect(canonicalJson({ 'a":1,"b': '"\u202e' })).toBe(JSON.stringify({ 'a":1,"b': '"\u202e' }));
  });
});

describe('shownHash', () => {
  it('is the same whatever order the agent sent the keys in', () => {
    const reordered = {
      ...CALL,
      arguments: { meta: { a: null, b: [1, { x: 1, y: 2 }] }, amount: 5, to: 'acct-1' },
    };
    expect(shownHash(reordered)).toBe(shownHash(CALL));
    expect(shownHash(CALL)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('changes with the id, the capability, any argument or the deadline', () => {
    const base = shownHash(CALL);
    expect(shownHash({ ...CALL, id: 'call_abd' })).not.toBe(base);
    expect(shownHash({ ...CALL, capability: 'send_transfers' })).not.toBe(base);
    expect(shownHash({ ...CALL, arguments: { ...CALL.arguments, amount: 50 } })).not.toBe(base);
    expect(shownHash({ ...CALL, expiresAt: CALL.expiresAt + 1 })).not.toBe(base);
  });
});

it('per-call ids are told apart from async job ids by their prefix', () => {
  expect(isPerCallId('call_x')).toBe(true);
  expect(isPerCallId('job_x')).toBe(false);
});
