/**
 * Issue 10, class 11: `not_in` (§2.13) refuses a value that equals a forbidden one after Unicode
 * NFKC, case folding and removal of invisible characters (src/lookalike.ts documents exactly what
 * is folded). Every attack below is a real lookalike an agent could send to slip past an exact
 * comparison; each is checked on the arguments and on the values as sent upstream.
 */
import { describe, expect, it } from 'vitest';
import { fold, lookalikeKey } from '../../../src/lookalike.js';
import {
  intersectConstraints,
  parseConstraints,
  type Constraints,
} from '../../../src/protocol/constraints.js';
import {
  checkConstraints,
  checkSentConstraints,
  type SentField,
} from '../../../src/protocol/constraint-checks.js';

function parsed(raw: unknown): Constraints {
  const result = parseConstraints(raw, undefined);
  if (!result.ok) throw new Error(result.problem.message);
  return result.constraints;
}

const FORBID = parsed({ account: { not_in: ['admin', 'root', 'Straße', 'café'] } });

/** [why it looks alike, the value an agent sends] — each must be refused as a forbidden value. */
const LOOKALIKES: readonly (readonly [string, string])[] = [
  ['upper case', 'ADMIN'],
  ['mixed case', 'aDmIn'],
  ['fullwidth letters', 'ａｄｍｉｎ'],
  ['fullwidth upper case', 'ＲＯＯＴ'],
  ['mathematical bold letters', '𝐚𝐝𝐦𝐢𝐧'],
  ['circled letters', 'ⓐⓓⓜⓘⓝ'],
  ['long s (ſ) for s', 'ſtraße'],
  ['sharp s spelled ss', 'STRASSE'],
  ['capital sharp s', 'STRAẞE'],
  ['ligature ﬅ for st', 'ﬅraße'],
  ['zero-width space inside', 'ad\u200bmin'],
  ['zero-width joiner inside', 'ad\u200dmin'],
  ['zero-width non-joiner inside', 'r\u200coot'],
  ['word joiner', 'adm\u2060in'],
  ['soft hyphen', 'ad\u00admin'],
  ['right-to-left override before it', '\u202eadmin'],
  ['left-to-right mark after it', 'admin\u200e'],
  ['bidi isolate around it', '\u2066admin\u2069'],
  ['variation selector after a letter', 'ad\ufe0fmin'],
  ['byte order mark in front', '\ufeffroot'],
  ['tag characters appended', 'root\u{e0041}\u{e007f}'],
  ['combining grapheme joiner', 'ro\u034fot'],
  ['decomposed é (e + combining acute)', 'cafe\u0301'],
  ['decomposed É in upper case', 'CAFE\u0301'],
  ['no-break space around it', '\u00a0admin\u00a0'],
  ['ideographic space and tab around it', '\u3000admin\t'],
];

describe('not_in refuses lookalikes of a forbidden value (class 11)', () => {
  for (const [why, value] of LOOKALIKES) {
    it(`refuses ${why}: ${JSON.stringify(value)}`, () => {
      expect(checkConstraints(FORBID, { account: value })).toEqual([
        { field: 'account', constraint: FORBID.account, actual: value },
      ]);
    });
  }

  it('still allows values that only share letters with a forbidden one', () => {
    for (const value of ['admins', 'adm in', 'administrator', 'roots', 'cafe', 'strase', 'acc_1']) {
      expect(checkConstraints(FORBID, { account: value })).toEqual([]);
    }
  });

  it('refuses number lookalikes of a forbidden number: "5", "05", "5.0", "５" and "+5" for 5', () => {
    const c = parsed({ count: { not_in: [5] } });
    for (const value of ['5', '05', '5.0', '５', '+5', ' 5 ', 5, 5.0]) {
      expect(checkConstraints(c, { count: value })).toHaveLength(1);
    }
    for (const value of ['50', '0.5', 6, '5a']) expect(checkConstraints(c, { count: value })).toEqual([]);
  });

  it('refuses "TRUE" for a forbidden true and "Null" for a forbidden null', () => {
    expect(checkConstraints(parsed({ flag: { not_in: [true] } }), { flag: 'TRUE' })).toHaveLength(1);
    expect(checkConstraints(parsed({ note: { not_in: [null] } }), { note: 'Null' })).toHaveLength(1);
  });

  it('refuses a lookalike inside a forbidden list or object value', () => {
    const c = parsed({ tags: { not_in: [['admin', 'x'], { role: 'root' }] } });
    expect(checkConstraints(c, { tags: ['ＡＤＭＩＮ', 'X'] })).toHaveLength(1);
    expect(checkConstraints(c, { tags: { ROLE: 'r\u200boot' } })).toHaveLength(1);
    expect(checkConstraints(c, { tags: ['admin'] })).toEqual([]);
  });

  it('a forbidden lookalike written into the constraint also catches the plain spelling', () => {
    const c = parsed({ account: { not_in: ['ＡＤＭＩＮ'] } });
    expect(checkConstraints(c, { account: 'admin' })).toHaveLength(1);
  });

  it('intersecting with a not_in drops lookalike in-entries and conflicts with a lookalike exact value', () => {
    expect(
      intersectConstraints({ account: { in: ['ADMIN', 'acc_1'] } }, { account: { not_in: ['admin'] } })
        .constraints,
    ).toEqual({ account: { in: ['acc_1'], not_in: ['admin'] } });
    expect(intersectConstraints({ account: 'Ａdmin' }, { account: { not_in: ['admin'] } }).conflicts).toEqual(
      ['account'],
    );
  });

  it('refuses a lookalike that reaches the upstream only as a piece of a sent value', () => {
    const sent = (text: string, separators: string[]): SentField => ({
      own: [{ in: 'query', name: 'account', text, separators }],
      named: true,
      foreign: [],
    });
    expect(checkSentConstraints(FORBID, () => sent('acc_1,ＡＤＭＩＮ', [',']))).toHaveLength(1);
    expect(checkSentConstraints(FORBID, () => sent('acc_1|ro\u200bot', [',', '|']))).toHaveLength(1);
    expect(checkSentConstraints(FORBID, () => sent('acc_1|admin', [',']))).toEqual([]);
  });
});

describe('fold: exactly what is normalized (src/lookalike.ts)', () => {
  it('applies NFKC, drops invisible and control characters, folds case, trims White_Space', () => {
    expect(fold('ﬁ')).toBe('fi');
    expect(fold('Ａ①')).toBe('a1');
    expect(fold('\u212a')).toBe('k'); // Kelvin sign
    expect(fold('ſ')).toBe('s'); // long s
    expect(fold('ΟΔΟΣ')).toBe(fold('οδοσ'));
    expect(fold('a\u0000b\u0007c')).toBe('abc');
    expect(fold('\u2003x\u2003')).toBe('x');
  });

  it('keeps accents and other scripts distinct: é is not e, Cyrillic а is not Latin a', () => {
    expect(fold('café')).not.toBe(fold('cafe'));
    expect(fold('\u0430dmin')).not.toBe(fold('admin'));
    expect(lookalikeKey('\u0430dmin')).not.toBe(lookalikeKey('admin'));
  });

  it('stays bounded on a hostile, deeply nested value', () => {
    let deep: unknown = 'admin';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const c = parsed({ tags: { not_in: ['admin'] } });
    expect(checkConstraints(c, { tags: deep })).toEqual([]);
  });
});
