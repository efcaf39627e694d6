/**
 * newKeyPair: pairs of every type the tests and `agent init` use, as KeyObjects made from the
 * generation's own JWKs (src/util/key-pair.ts says why: exporting a generated KeyObject as a JWK
 * can deadlock Node 20).
 */
import { createPublicKey, sign, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newKeyPair, type KeyPairType } from '../../../src/util/key-pair.js';

const TYPES: readonly [KeyPairType, { namedCurve?: string; modulusLength?: number }][] = [
  ['ed25519', {}],
  ['ed448', {}],
  ['x25519', {}],
  ['ec', { namedCurve: 'P-256' }],
  ['rsa', { modulusLength: 1024 }],
];

describe('newKeyPair', () => {
  it.each(TYPES)('gives a %s public key that belongs to its private key', (type, options) => {
    const { publicKey, privateKey } = newKeyPair(type, options);
    expect([publicKey.type, privateKey.type]).toEqual(['public', 'private']);
    expect(publicKey.asymmetricKeyType).toBe(type);
    expect(createPublicKey(privateKey).export({ format: 'jwk' })).toEqual(
      publicKey.export({ format: 'jwk' }),
    );
  });

  it('gives a new pair each time, with the options applied', () => {
    const a = newKeyPair('ed25519').publicKey.export({ format: 'jwk' });
    const b = newKeyPair('ed25519').publicKey.export({ format: 'jwk' });
    expect(a.x).not.toBe(b.x);
    expect(newKeyPair('ec', { namedCurve: 'P-384' }).publicKey.asymmetricKeyDetails?.namedCurve).toBe(
      'secp384r1',
    );
    expect(newKeyPair('rsa', { modulusLength: 2048 }).publicKey.asymmetricKeyDetails?.modulusLength).toBe(
      2048,
    );
  });

  it('signs with the private key what the public key verifies (Ed25519)', () => {
    const { publicKey, privateKey } = newKeyPair('ed25519');
    const data = Buffer.from('agent-auth');
    expect(verify(null, data, publicKey, sign(null, data, privateKey))).toBe(true);
    expect(verify(null, data, newKeyPair('ed25519').publicKey, sign(null, data, privateKey))).toBe(false);
  });
});
