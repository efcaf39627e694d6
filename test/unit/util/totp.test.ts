/** TOTP (RFC 6238) against the RFC's own test vectors, truncated to the 6 digits the proxy uses. */
import { describe, expect, it } from 'vitest';
import { decodeBase32, hotp, matchTotp, totpStep } from '../../../src/util/totp.js';

// RFC 6238 Appendix B: the SHA-1 seed is the ASCII string "12345678901234567890".
const SEED = Buffer.from('12345678901234567890', 'ascii');

describe('TOTP', () => {
  it.each([
    [59, '94287082'],
    [1111111109, '07081804'],
    [1111111111, '14050471'],
    [1234567890, '89005924'],
    [2000000000, '69279037'],
    [20000000000, '65353130'],
  ])('RFC 6238 vector at T=%i', (seconds, eight) => {
    const step = totpStep(seconds * 1000);
    expect(hotp(SEED, step, 8)).toBe(eight);
    expect(hotp(SEED, step)).toBe(eight.slice(2));
  });

  it('RFC 4226 Appendix D HOTP vectors (counter 0..2)', () => {
    expect([0, 1, 2].map((c) => hotp(SEED, c))).toEqual(['755224', '287082', '359152']);
  });

  it('accepts one step of drift either way and nothing further', () => {
    const now = 1_111_111_111_000;
    const step = totpStep(now);
    expect(matchTotp(SEED, hotp(SEED, step), now)).toBe(step);
    expect(matchTotp(SEED, hotp(SEED, step - 1), now)).toBe(step - 1);
    expect(matchTotp(SEED, hotp(SEED, step + 1), now)).toBe(step + 1);
    expect(matchTotp(SEED, hotp(SEED, step - 2), now)).toBeUndefined();
    expect(matchTotp(SEED, hotp(SEED, step + 2), now)).toBeUndefined();
    expect(matchTotp(SEED, '', now)).toBeUndefined();
    expect(matchTotp(SEED, `${hotp(SEED, step)}0`, now)).toBeUndefined();
  });

  it('decodes base32 secrets as authenticator apps show them', () => {
    // "12345678901234567890" in base32 (RFC 4648), lower case with spaces and padding.
    expect(decodeBase32('gezd gnbv gy3t qojq gezd gnbv gy3t qojq')).toEqual(SEED);
    expect(() => decodeBase32('not base32!')).toThrow(RangeError);
  });
});
