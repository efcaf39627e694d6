/**
 * The proxy verifies Ed25519 signatures with libsodium (src/protocol/ed25519.ts), where it once
 * used node:crypto (OpenSSL). These tests hold it to RFC 8032's vectors and to node:crypto's
 * verdicts on random keys, messages and alterations; the one place it is meant to differ (it is
 * stricter: a small-order key or R) is pinned too.
 */
import { sign, verify, type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Ed25519PublicKey } from '../../../src/protocol/ed25519.js';
import { IDENTITY_X, UNIVERSAL_SIGNATURE } from '../../helpers/weak-keys.js';
import { newKeyPair } from '../../../src/util/key-pair.js';

const hex = (value: string) => Buffer.from(value, 'hex');

/** RFC 8032 §7.1, TEST 1 to 3: public key, message, signature. */
const RFC8032_VECTORS = [
  [
    'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    '',
    'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  ],
  [
    '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    '72',
    '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  ],
  [
    'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    'af82',
    '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  ],
] as const;

function keyPair(): { publicKey: KeyObject; privateKey: KeyObject; key: Ed25519PublicKey } {
  const { publicKey, privateKey } = newKeyPair('ed25519');
  const { x } = publicKey.export({ format: 'jwk' });
  return { publicKey, privateKey, key: new Ed25519PublicKey(Buffer.from(x as string, 'base64url')) };
}

describe('Ed25519PublicKey.verify', () => {
  it.each(RFC8032_VECTORS)('accepts RFC 8032 §7.1 vector with key %s', (publicKey, message, signature) => {
    const key = new Ed25519PublicKey(hex(publicKey));
    expect(key.verify(hex(message), hex(signature))).toBe(true);
    expect(key.verify(Buffer.from('other'), hex(signature))).toBe(false);
  });

  it('gives node:crypto’s verdict on random messages, signed or altered in one bit', () => {
    const pairs = [keyPair(), keyPair(), keyPair()];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: pairs.length - 1 }),
        fc.uint8Array({ maxLength: 600 }),
        fc.nat(),
        fc.constantFrom('signature', 'message', 'key', 'none'),
        (which, bytes, bit, altered) => {
          const signer = pairs[which]!;
          const message = Buffer.from(bytes);
          const signature = sign(null, message, signer.privateKey);
          const other = pairs[(which + 1) % pairs.length]!;
          if (altered === 'signature') signature[(bit >> 3) % 64]! ^= 1 << (bit & 7);
          if (altered === 'message' && message.length > 0)
            message[(bit >> 3) % message.length]! ^= 1 << (bit & 7);
          const [nodeKey, key] =
            altered === 'key' ? [other.publicKey, other.key] : [signer.publicKey, signer.key];
          const expected = verify(null, message, nodeKey, signature);
          expect(key.verify(message, signature)).toBe(expected);
          if (altered === 'none' || (altered === 'message' && bytes.length === 0))
            expect(expected).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses random 64-byte signatures, as node:crypto does', () => {
    const { publicKey, key } = keyPair();
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        fc.uint8Array({ maxLength: 64 }),
        (sig, msg) => {
          expect(key.verify(msg, sig)).toBe(false);
          expect(verify(null, msg, publicKey, sig)).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a signature of any length but 64 bytes, even one that starts with a valid signature', () => {
    const { privateKey, key } = keyPair();
    const message = Buffer.from('message');
    const signature = sign(null, message, privateKey);
    expect(key.verify(message, signature)).toBe(true);
    expect(key.verify(message, Buffer.concat([signature, Buffer.from([0])]))).toBe(false);
    expect(key.verify(message, signature.subarray(0, 63))).toBe(false);
    expect(key.verify(message, Buffer.alloc(0))).toBe(false);
  });

  it('is stricter than node:crypto on a small-order key: no universal forgery (keys.ts also refuses such keys)', () => {
    // The identity point as the key, R = B and S = 1: [S]B = R + [k]·identity for every message.
    const identity = Buffer.from(IDENTITY_X, 'base64url');
    const forged = UNIVERSAL_SIGNATURE;
    const nodeKey = { key: { kty: 'OKP', crv: 'Ed25519', x: IDENTITY_X }, format: 'jwk' } as const;
    for (const message of [Buffer.from('any message'), Buffer.from('another one')]) {
      expect(verify(null, message, nodeKey, forged)).toBe(true);
      expect(new Ed25519PublicKey(identity).verify(message, forged)).toBe(false);
    }
  });
});

describe('Ed25519PublicKey', () => {
  it('is made of exactly 32 bytes, copied', () => {
    expect(() => new Ed25519PublicKey(Buffer.alloc(31))).toThrow(/32 bytes/);
    expect(() => new Ed25519PublicKey(Buffer.alloc(33))).toThrow(/32 bytes/);
    const [publicKey, message, signature] = RFC8032_VECTORS[1];
    const bytes = hex(publicKey);
    const key = new Ed25519PublicKey(bytes);
    bytes.fill(0);
    expect(key.verify(hex(message), hex(signature))).toBe(true);
  });

  it('isOne knows its own instances from look-alikes, and equals compares the bytes', () => {
    const key = new Ed25519PublicKey(hex(RFC8032_VECTORS[0][0]));
    expect(Ed25519PublicKey.isOne(key)).toBe(true);
    for (const notKey of [null, undefined, {}, { verify: () => true }, Object.create(key)]) {
      expect(Ed25519PublicKey.isOne(notKey)).toBe(false);
    }
    expect(key.equals(new Ed25519PublicKey(hex(RFC8032_VECTORS[0][0])))).toBe(true);
    expect(key.equals(new Ed25519PublicKey(hex(RFC8032_VECTORS[1][0])))).toBe(false);
    expect(Object.isFrozen(key)).toBe(true);
  });
});
