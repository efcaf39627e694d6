import { describe, expect, it } from 'vitest';

import { generateUserCode, normalizeUserCode } from '../../../src/protocol/user-code.js';

const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const CODE_FORMAT = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

describe('generateUserCode', () => {
  it('returns XXXX-XXXX from the RFC 8628 §6.1 alphabet', () => {
    for (let i = 0; i < 1000; i++) expect(generateUserCode()).toMatch(CODE_FORMAT);
  });

  it('draws each character with crypto.randomInt over the whole alphabet', () => {
    const draws = [0, 1, 2, 3, 16, 17, 18, 19];
    const asked: number[] = [];
    const code = generateUserCode((below) => {
      asked.push(below);
      return draws[asked.length - 1] ?? 0;
    });
    expect(code).toBe('BCDF-VWXZ');
    expect(asked).toEqual(Array.from({ length: 8 }, () => ALPHABET.length));
  });

  it('uses every letter of the alphabet and only those', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 500; i++) for (const char of generateUserCode().replace('-', '')) seen.add(char);
    expect([...seen].sort().join('')).toBe(ALPHABET);
  });

  it('does not repeat codes in practice', () => {
    const codes = new Set(Array.from({ length: 5000 }, () => generateUserCode()));
    expect(codes.size).toBe(5000);
  });
});

describe('normalizeUserCode', () => {
  it.each([
    ['WDJB-MJHT', 'WDJB-MJHT'],
    ['WDJBMJHT', 'WDJB-MJHT'],
    ['wdjb-mjht', 'WDJB-MJHT'],
    ['wDjB mJhT', 'WDJB-MJHT'],
    ['  WD-JB MJ-HT  ', 'WDJB-MJHT'],
    ['W-D-J-B-M-J-H-T', 'WDJB-MJHT'],
    ['WDJB\tMJHT\n', 'WDJB-MJHT'],
  ])('normalizes %j to %j', (input, expected) => {
    expect(normalizeUserCode(input)).toBe(expected);
  });

  it.each([
    ['empty', ''],
    ['too short', 'WDJB-MJH'],
    ['too long', 'WDJB-MJHTB'],
    ['a vowel', 'WDJA-MJHT'],
    ['a vowel (Y)', 'WDJY-MJHT'],
    ['a digit', 'WDJ0-MJHT'],
    ['another separator', 'WDJB_MJHT'],
    ['a dot', 'WDJB.MJHT'],
    ['a non-ASCII letter', 'WDJB-MJHŤ'],
    ['ß, which uppercases to SS', 'ßßßß'],
    ['a long input', `${'-'.repeat(100)}WDJBMJHT`],
  ])('rejects a code with %s', (_label, input) => {
    expect(normalizeUserCode(input)).toBeUndefined();
  });

  it('accepts every generated code unchanged', () => {
    for (let i = 0; i < 200; i++) {
      const code = generateUserCode();
      expect(normalizeUserCode(code)).toBe(code);
      expect(normalizeUserCode(code.toLowerCase().replace('-', ' '))).toBe(code);
    }
  });
});
