/**
 * Client-supplied public keys: validation of inline JWKs (§4.1), their RFC 7638 thumbprints
 * (the host identifier, §4.2) and the node KeyObjects used to verify signatures.
 */
import { createHash, createPublicKey, type KeyObject } from 'node:crypto';

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

// Insertion-ordered Map used as an LRU: a hit is moved to the end, the oldest entry is evicted.
const keyCache = new Map<string, KeyObject>();

/**
 * The node KeyObject for a validated JWK. Importing costs more than verifying a short JWT, and the
 * same few keys sign every request, hence the cache. Keyed by `x` alone because kty and crv are
 * fixed for Ed25519PublicJwk.
 */
export function publicKeyObject(jwk: Ed25519PublicJwk): KeyObject {
  const cached = keyCache.get(jwk.x);
  if (cached !== undefined) {
    keyCache.delete(jwk.x);
    keyCache.set(jwk.x, cached);
    return cached;
  }
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
  keyCache.set(jwk.x, key);
  if (keyCache.size > PUBLIC_KEY_CACHE_LIMIT) {
    const oldest = keyCache.keys().next();
    if (oldest.done !== true) keyCache.delete(oldest.value);
  }
  return key;
}
