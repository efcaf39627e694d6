/** First-passkey enrolment codes (sign_in.first_passkey: operator_code): their shape and reading. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { enrolmentCodeHash, newEnrolmentCode } from '../../../src/protocol/enrolment-codes.js';

describe('enrolment codes', () => {
  it('are four groups of four letters without look-alikes, and differ each time', () => {
    const codes = Array.from({ length: 200 }, newEnrolmentCode);
    for (const code of codes) expect(code).toMatch(/^([A-HJKMNP-TV-Z2-9]{4}-){3}[A-HJKMNP-TV-Z2-9]{4}$/);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('read the same typed in lower case, with spaces, or without the dashes', () => {
    const code = newEnrolmentCode();
    const hash = enrolmentCodeHash(code);
    expect(hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(enrolmentCodeHash(code.toLowerCase())).toBe(hash);
    expect(enrolmentCodeHash(code.replace(/-/g, ''))).toBe(hash);
    expect(enrolmentCodeHash(` ${code.replace(/-/g, ' ')} `)).toBe(hash);
    expect(enrolmentCodeHash(newEnrolmentCode())).not.toBe(hash);
  });

  it('refuse what cannot be a code: wrong length, a look-alike letter, other characters', () => {
    for (const typed of [
      '',
      'ABCD-EFGH-JKMN-PQR',
      'ABCD-EFGH-JKMN-PQRST',
      'ABCD-EFGH-JKMN-PQR0',
      'ABCD-EFGH-JKMN-PQRI',
      'ABCD_EFGH_JKMN_PQRS',
      'ÄBCD-EFGH-JKMN-PQRS',
    ])
      expect(enrolmentCodeHash(typed), typed).toBeUndefined();
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (typed) => {
        const hash = enrolmentCodeHash(typed);
        return hash === undefined || typed.toUpperCase().replace(/[\s-]/g, '').length === 16;
      }),
    );
  });
});
