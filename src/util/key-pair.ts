/**
 * New key pairs whose KeyObjects can be exported as JWKs without hanging the process.
 *
 * Node 20 (measured on 20.20.2) can deadlock when a KeyObject that `generateKeyPairSync` returned
 * is exported as a JWK: the export holds the key's mutex while it allocates strings, a garbage
 * collection there may run the destructor of the generation job (garbage once it has returned),
 * and that destructor takes the same mutex. A loop of `generateKeyPairSync('ed25519')` and
 * `export({ format: 'jwk' })` hung after about 45,000 keys; a test worker of this suite hung
 * there once, stuck in a futex for good. Here the job encodes its keys as JWKs itself, while it
 * is alive, and the KeyObjects are made from those JWKs: they share no mutex with a job (the same
 * loop through newKeyPair made 200,000 keys in each of three runs, where two of three hung).
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
} from 'node:crypto';

export interface KeyPair {
  readonly publicKey: KeyObject;
  readonly privateKey: KeyObject;
}

export type KeyPairType = 'ed25519' | 'ed448' | 'x25519' | 'ec' | 'rsa';

/**
 * generateKeyPairSync asked for JWKs, which it gives as objects: Node has taken `format: 'jwk'`
 * for key generation since 15.9, for every type alike, but its typings declare no such overload.
 */
const generateJwkPair = generateKeyPairSync as unknown as (
  type: KeyPairType,
  options: object,
) => { readonly publicKey: JsonWebKey; readonly privateKey: JsonWebKey };

/** A new key pair of `type` (`namedCurve` for `ec`, `modulusLength` for `rsa`). */
export function newKeyPair(
  type: KeyPairType,
  options: { readonly namedCurve?: string; readonly modulusLength?: number } = {},
): KeyPair {
  // JWKs rather than DER: made from DER, a pair cost 0.5 ms (OpenSSL's decoders), 17 times what
  // generating one takes; from JWKs, about twice.
  const jwks = generateJwkPair(type, {
    ...options,
    publicKeyEncoding: { format: 'jwk' },
    privateKeyEncoding: { format: 'jwk' },
  });
  return {
    publicKey: createPublicKey({ key: jwks.publicKey, format: 'jwk' }),
    privateKey: createPrivateKey({ key: jwks.privateKey, format: 'jwk' }),
  };
}
