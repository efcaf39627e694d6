/**
 * Client-supplied public keys: validation of inline JWKs (§4.1), their RFC 7638 thumbprints
 * (the host identifier, §4.2) and the keys signatures are verified with (ed25519.ts).
 */
import { createHash } from 'node:crypto';
import { Ed25519PublicKey } from './ed25519.js';

export interface Ed25519PublicJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
  readonly kid?: string;
}

export type ParsePublicJwkResult =
  | { ok: true; jwk: Ed25519PublicJwk }
  | { ok: false; code: 'invalid_request' | 'unsupported_algorithm'; message: string };

/** Ed25519 public keys are exactly 32 bytes (RFC 8032 §5.1.5). */
const ED25519_PUBLIC_KEY_BYTES = 32;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** JWK `alg` values that still mean "Ed25519 signatures": RFC 8037's EdDSA and RFC 9864's Ed25519. */
const ED25519_JWK_ALGS: ReadonlySet<string> = new Set(['EdDSA', 'Ed25519']);

export function parsePublicJwk(raw: unknown): ParsePublicJwkResult {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return invalid('The public key must be a JWK object.');
  }
  const jwk = raw as Readonly<Record<string, unknown>>;
  // Checked before anything else, whatever the key type: a private key reaching the server is a
  // protocol violation in itself (§4.1, §8.1), not merely an unsupported key.
  if ('d' in jwk || 'p' in jwk || 'q' in jwk || 'k' in jwk) {
    return invalid('The JWK contains private key material; send only the public key (§8.1).');
  }
  if (typeof jwk.kty !== 'string') return invalid('The JWK is missing "kty".');
  if (jwk.kty !== 'OKP') return unsupported(`Key type "${jwk.kty}" is not supported; use OKP/Ed25519.`);
  if (typeof jwk.crv !== 'string') return invalid('The JWK is missing "crv".');
  if (jwk.crv !== 'Ed25519') return unsupported(`Curve "${jwk.crv}" is not supported; use Ed25519.`);
  if (jwk.alg !== undefined && !(typeof jwk.alg === 'string' && ED25519_JWK_ALGS.has(jwk.alg))) {
    return unsupported('The JWK "alg" must be EdDSA when present.');
  }
  if (jwk.use !== undefined && jwk.use !== 'sig') {
    return invalid('The JWK "use" must be "sig" when present.');
  }
  if (typeof jwk.x !== 'string') return invalid('The JWK is missing "x".');
  if (!isCanonicalBase64url(jwk.x, ED25519_PUBLIC_KEY_BYTES)) {
    return invalid('The JWK "x" must be the base64url encoding of exactly 32 bytes.');
  }
  const weak = weakPointProblem(Buffer.from(jwk.x, 'base64url'));
  if (weak !== undefined) return invalid(`The JWK "x" ${weak}; generate a new Ed25519 key pair.`);
  // Only the required members survive: anything else (kid, alg, extensions) is client-chosen
  // metadata that must not leak into storage or thumbprints.
  return { ok: true, jwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x } };
}

/**
 * Rejects padding, the standard alphabet, and non-zero trailing bits, so that one key has exactly
 * one spelling: otherwise two `x` strings could name the same key yet have different thumbprints.
 */
function isCanonicalBase64url(value: string, byteLength: number): boolean {
  if (!BASE64URL.test(value)) return false;
  const bytes = Buffer.from(value, 'base64url');
  return bytes.length === byteLength && bytes.toString('base64url') === value;
}

/** p = 2^255 - 19, little-endian, the field prime of edwards25519 (RFC 8032 §5.1). */
const FIELD_PRIME_LE = Buffer.from('edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', 'hex');

/**
 * The y coordinates (sign bit cleared, little-endian) of the 8 points of small order: y = 1 (the
 * identity, order 1), y = p - 1 (order 2), y = 0 (order 4, two points) and y = ±y8 (order 8, four
 * points). Any signature check against such a key degenerates: a signature valid for every message
 * can be forged for it, so "who signed" no longer identifies anyone. The unit test recomputes each
 * point's order from these values.
 */
const SMALL_ORDER_Y: readonly Buffer[] = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
].map((hex) => Buffer.from(hex, 'hex'));

/**
 * Refuses encodings that are not one key, one spelling (§4.1: the thumbprint is the identity):
 * y >= p (a second spelling of y - p, RFC 8032 §5.1.3 step 1 says decoding fails) and the
 * small-order points in every spelling (sign bit either way, or y >= p). Byte comparisons only:
 * this runs on every host JWT that presents its key, so no field arithmetic here.
 */
function weakPointProblem(encoded: Buffer): string | undefined {
  const y = Buffer.from(encoded);
  y[31] = (y[31] as number) & 0x7f;
  if (compareLittleEndian(y, FIELD_PRIME_LE) >= 0) {
    return 'is a non-canonical Ed25519 point encoding (y >= 2^255 - 19)';
  }
  if (SMALL_ORDER_Y.some((small) => small.equals(y))) {
    return 'is a small-order Ed25519 point, which cannot identify a signer';
  }
  return undefined;
}

/** Compares two equal-length unsigned little-endian integers. */
function compareLittleEndian(a: Buffer, b: Buffer): number {
  for (let i = a.length - 1; i >= 0; i--) {
    const diff = (a[i] as number) - (b[i] as number);
    if (diff !== 0) return diff;
  }
  return 0;
}

function invalid(message: string): ParsePublicJwkResult {
  return { ok: false, code: 'invalid_request', message };
}

function unsupported(message: string): ParsePublicJwkResult {
  return { ok: false, code: 'unsupported_algorithm', message };
}

/**
 * RFC 7638 thumbprint: SHA-256 over the required members in lexicographic order with no
 * whitespace (RFC 8037 §2 names crv, kty, x for OKP). This is the host `iss` (§4.2). Async so
 * callers do not depend on the hash being computed synchronously.
 */
export function thumbprint(jwk: Ed25519PublicJwk): Promise<string> {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x });
  return Promise.resolve(createHash('sha256').update(canonical).digest('base64url'));
}

/** Enough for every active key of a busy deployment; evicting only costs a re-import. */
export const PUBLIC_KEY_CACHE_LIMIT = 1024;

// Bounded by second-chance eviction, as the §10.2 cache (util/ttl-cache.ts): a hit only marks its
// entry, where moving the key to the end on every verification kept V8 rehashing the Map.
const keyCache = new Map<string, { readonly key: Ed25519PublicKey; used: boolean }>();

/**
 * The key that verifies signatures for a validated JWK (parsePublicJwk). The same few keys sign
 * every request, hence the cache: a hit costs no decoding and no allocation. Keyed by `x` alone
 * because kty and crv are fixed for Ed25519PublicJwk.
 */
export function verificationKey(jwk: Ed25519PublicJwk): Ed25519PublicKey {
  const cached = keyCache.get(jwk.x);
  if (cached !== undefined) {
    cached.used = true;
    return cached.key;
  }
  const key = new Ed25519PublicKey(Buffer.from(jwk.x, 'base64url'));
  // Room first: the oldest entry not used since it was added (or last spared) goes; a used one
  // is spared once, moved to the end unmarked, so this ends within two passes.
  for (const [x, entry] of keyCache) {
    if (keyCache.size < PUBLIC_KEY_CACHE_LIMIT) break;
    keyCache.delete(x);
    if (entry.used) keyCache.set(x, { key: entry.key, used: false });
  }
  keyCache.set(jwk.x, { key, used: false });
  return key;
}
