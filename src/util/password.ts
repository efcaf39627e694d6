/**
 * Local-account passwords (issue 11, `sign_in.local`): scrypt (RFC 7914) through node:crypto, in a
 * self-describing string `scrypt$N$r$p$salt$hash` (salt and hash base64url) so that the cost can be
 * raised later without breaking stored hashes. Verification is constant-time, and an unknown user
 * costs the same as a wrong password (no user enumeration by timing).
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
}

/** OWASP's scrypt baseline (2^15, 8, 1): ~32 MiB and tens of milliseconds per attempt. */
export const DEFAULT_SCRYPT: ScryptParams = { N: 2 ** 15, r: 8, p: 1 };
const SALT_BYTES = 16;
const HASH_BYTES = 32;

export interface PasswordHash extends ScryptParams {
  readonly salt: Buffer;
  readonly hash: Buffer;
}

/**
 * Parses and bounds a stored hash; throws a RangeError saying what is wrong. The bounds keep a
 * config typo from costing gigabytes per sign-in (N ≤ 2^20, r ≤ 32, p ≤ 16) or being trivially weak.
 */
export function parsePasswordHash(text: string): PasswordHash {
  const parts = text.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') {
    throw new RangeError('expected scrypt$N$r$p$salt$hash (printed by agent-auth-proxy hash-password)');
  }
  const [N, r, p] = parts.slice(1, 4).map((v) => (/^\d{1,8}$/.test(v ?? '') ? Number(v) : NaN)) as [
    number,
    number,
    number,
  ];
  if (!(N >= 2 ** 14 && N <= 2 ** 20 && (N & (N - 1)) === 0)) {
    throw new RangeError('scrypt N must be a power of two from 16384 to 1048576');
  }
  if (!(r >= 1 && r <= 32) || !(p >= 1 && p <= 16))
    throw new RangeError('scrypt r must be 1..32 and p 1..16');
  const salt = decode(parts[4] ?? '');
  const hash = decode(parts[5] ?? '');
  if (salt.length < 16 || hash.length < 16)
    throw new RangeError('scrypt salt and hash must be at least 16 bytes');
  return { N, r, p, salt, hash };
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, params, HASH_BYTES);
  return [
    'scrypt',
    params.N,
    params.r,
    params.p,
    salt.toString('base64url'),
    hash.toString('base64url'),
  ].join('$');
}

/** Whether `password` matches `stored`; compared in constant time. */
export async function verifyPassword(password: string, stored: PasswordHash): Promise<boolean> {
  const actual = await derive(password, stored.salt, stored, stored.hash.length);
  return timingSafeEqual(actual, stored.hash);
}

/** A hash no password matches, verified for unknown users so they take as long as known ones. */
export const DECOY_HASH: PasswordHash = {
  ...DEFAULT_SCRYPT,
  salt: Buffer.alloc(SALT_BYTES, 1),
  hash: Buffer.alloc(HASH_BYTES, 0),
};

/**
 * A decoy as costly as the accounts' hashes: the scrypt parameters most of them use (the first
 * such in a tie). With the fixed default, accounts hashed at another cost answered in another time
 * than unknown names (53 ms against 132 ms at N = 2^14), telling which accounts exist.
 */
export function decoyFor(hashes: readonly PasswordHash[]): PasswordHash {
  const counts = new Map<string, { hash: PasswordHash; n: number }>();
  for (const hash of hashes) {
    const key = `${hash.N}:${hash.r}:${hash.p}:${hash.hash.length}`;
    const seen = counts.get(key);
    if (seen) seen.n += 1;
    else counts.set(key, { hash, n: 1 });
  }
  let most: { hash: PasswordHash; n: number } | undefined;
  for (const entry of counts.values()) if (!most || entry.n > most.n) most = entry;
  if (!most) return DECOY_HASH;
  const { N, r, p } = most.hash;
  return { ...DECOY_HASH, N, r, p, hash: Buffer.alloc(most.hash.hash.length, 0) };
}

function derive(password: string, salt: Buffer, params: ScryptParams, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // maxmem: scrypt needs 128·N·r bytes; node's 32 MiB default is just short of the baseline.
    const maxmem = 256 * params.N * params.r + 1024 * 1024;
    scrypt(password.normalize('NFC'), salt, length, { ...params, maxmem }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

function decode(text: string): Buffer {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) throw new RangeError('scrypt salt and hash must be base64url');
  return Buffer.from(text, 'base64url');
}
