/**
 * §8.12 JWKS content validation. Decisions: the whole set is refused when it holds a symmetric
 * (`oct`) key, any private member, a duplicate `kid`, more than MAX_JWKS_KEYS keys, or no usable
 * key; other asymmetric keys (RSA, EC, other curves) and Ed25519 keys without a `kid` are ignored,
 * since a shared JWKS may serve other verifiers, and a key we cannot address by `kid` (§4.2) is
 * never used.
 */
import { parsePublicJwk, type Ed25519PublicJwk } from '../keys.js';

/** §8.12: "Servers SHOULD limit the number of keys in a JWKS response (e.g. 20 keys)". */
export const MAX_JWKS_KEYS = 20;

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'] as const;
const ASYMMETRIC = new Set(['RSA', 'EC', 'OKP']);

export class JwksContentError extends Error {}

/** The usable keys by `kid`; throws JwksContentError saying what is wrong with the set. */
export function parseJwks(raw: unknown): ReadonlyMap<string, Ed25519PublicJwk> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new JwksContentError('the document is not a JWK Set object (RFC 7517 §5)');
  }
  const keys = (raw as Record<string, unknown>).keys;
  if (!Array.isArray(keys)) throw new JwksContentError('the JWK Set has no "keys" array');
  if (keys.length === 0) throw new JwksContentError('the JWK Set is empty');
  if (keys.length > MAX_JWKS_KEYS) {
    throw new JwksContentError(`the JWK Set holds ${keys.length} keys, more than ${MAX_JWKS_KEYS}`);
  }
  const seen = new Set<string>();
  const usable = new Map<string, Ed25519PublicJwk>();
  for (const [index, key] of keys.entries()) {
    if (typeof key !== 'object' || key === null || Array.isArray(key)) {
      throw new JwksContentError(`keys[${index}] is not a JWK object`);
    }
    const jwk = key as Record<string, unknown>;
    if (PRIVATE_MEMBERS.some((member) => member in jwk)) {
      throw new JwksContentError(`keys[${index}] contains private key material (§8.1)`);
    }
    if (typeof jwk.kty !== 'string') throw new JwksContentError(`keys[${index}] has no "kty"`);
    if (!ASYMMETRIC.has(jwk.kty)) {
      throw new JwksContentError(
        `keys[${index}] has key type "${jwk.kty}"; only RSA, EC and OKP are allowed`,
      );
    }
    if (jwk.kid !== undefined) {
      if (typeof jwk.kid !== 'string' || jwk.kid === '') {
        throw new JwksContentError(`keys[${index}] has a "kid" that is not a non-empty string`);
      }
      if (seen.has(jwk.kid)) throw new JwksContentError(`the "kid" ${JSON.stringify(jwk.kid)} appears twice`);
      seen.add(jwk.kid);
    }
    if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.kid !== 'string') continue;
    const parsed = parsePublicJwk(jwk);
    if (!parsed.ok) throw new JwksContentError(`keys[${index}]: ${parsed.message}`);
    usable.set(jwk.kid, parsed.jwk);
  }
  if (usable.size === 0) throw new JwksContentError('the JWK Set has no Ed25519 key with a "kid"');
  return usable;
}
