/** scrypt password hashes (issue 11, local accounts): the format, the bounds, constant-time verify. */
import { describe, expect, it } from 'vitest';
import {
  DECOY_HASH,
  decoyFor,
  hashPassword,
  parsePasswordHash,
  verifyPassword,
} from '../../../src/util/password.js';

// The cheapest parameters the parser accepts keep these tests fast; the format is the same.
const FAST = { N: 2 ** 14, r: 8, p: 1 };

describe('password hashes', () => {
  it('hashes into scrypt$N$r$p$salt$hash and verifies the right password only', async () => {
    const stored = await hashPassword('correct horse', FAST);
    expect(stored).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    const parsed = parsePasswordHash(stored);
    expect(await verifyPassword('correct horse', parsed)).toBe(true);
    expect(await verifyPassword('correct hors', parsed)).toBe(false);
    expect(await verifyPassword('Correct horse', parsed)).toBe(false);
    expect(await verifyPassword('', parsed)).toBe(false);
  });

  it('salts every hash: the same password never hashes the same twice', async () => {
    const a = await hashPassword('same', FAST);
    const b = await hashPassword('same', FAST);
    expect(a).not.toBe(b);
  });

  it('the decoy hash used for unknown users matches no password', async () => {
    expect(await verifyPassword('', DECOY_HASH)).toBe(false);
    expect(await verifyPassword('password', DECOY_HASH)).toBe(false);
  });

  it("the decoy costs what most accounts' hashes cost, so an unknown name answers in the same time", async () => {
    const cheap = parsePasswordHash(await hashPassword('a', FAST));
    const dear = parsePasswordHash(await hashPassword('b', { N: 2 ** 15, r: 8, p: 1 }));
    const decoy = decoyFor([cheap, dear, parsePasswordHash(await hashPassword('c', FAST))]);
    expect({ N: decoy.N, r: decoy.r, p: decoy.p }).toEqual(FAST);
    expect(await verifyPassword('a', decoy)).toBe(false);
    expect(decoyFor([])).toBe(DECOY_HASH);
  });

  it.each([
    ['plain text', 'hunter2'],
    ['another algorithm', 'argon2$1$2$3$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa'],
    ['a cost too low to resist guessing', 'scrypt$1024$8$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa'],
    [
      'a cost that would take gigabytes per sign-in',
      'scrypt$4194304$8$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa',
    ],
    ['N not a power of two', 'scrypt$20000$8$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa'],
    ['r out of range', 'scrypt$16384$64$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa'],
    ['a short salt', 'scrypt$16384$8$1$aaaa$aaaaaaaaaaaaaaaaaaaaaa'],
    ['a salt that is not base64url', 'scrypt$16384$8$1$aaaaaaaaaaaaaaaa+aaaaa$aaaaaaaaaaaaaaaaaaaaaa'],
  ])('refuses a stored hash with %s', (_what, text) => {
    expect(() => parsePasswordHash(text)).toThrow(RangeError);
  });
});
