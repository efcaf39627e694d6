import { createHash, sign } from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  PUBLIC_KEY_CACHE_LIMIT,
  parsePublicJwk,
  verificationKey,
  thumbprint,
  type Ed25519PublicJwk,
} from '../../../src/protocol/keys.js';
import { generateTestKey } from '../../helpers/keys.js';
import { newKeyPair } from '../../../src/util/key-pair.js';
import {
  NON_CANONICAL_KEYS,
  SMALL_ORDER_KEYS,
  decodeLenient,
  encodePoint,
  hasSmallOrder,
  P,
} from '../../helpers/weak-keys.js';

// RFC 8037 Appendix A.1/A.2 key pair.
const RFC8037_X = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo';
const RFC8037_D = 'nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A';

function rejected(raw: unknown): { code: string; message: string } {
  const result = parsePublicJwk(raw);
  if (result.ok) throw new Error(`expected rejection of ${JSON.stringify(raw)}`);
  return result;
}

describe('parsePublicJwk', () => {
  it('accepts an Ed25519 public JWK and returns only kty, crv and x', () => {
    const result = parsePublicJwk({
      kty: 'OKP',
      crv: 'Ed25519',
      x: RFC8037_X,
      kid: 'k1',
      use: 'sig',
      alg: 'EdDSA',
      ext: true,
    });
    expect(result).toEqual({ ok: true, jwk: { kty: 'OKP', crv: 'Ed25519', x: RFC8037_X } });
  });

  it('accepts keys produced by node', async () => {
    const key = await generateTestKey();
    expect(parsePublicJwk(key.publicJwk)).toEqual({ ok: true, jwk: key.publicJwk });
  });

  it.each([null, undefined, 'OKP', 42, true, [], [{ kty: 'OKP', crv: 'Ed25519', x: RFC8037_X }]])(
    'rejects a non-object JWK %j',
    (raw) => {
      expect(rejected(raw).code).toBe('invalid_request');
    },
  );

  it('rejects a private Ed25519 JWK (d member, §8.1)', () => {
    const result = rejected({ kty: 'OKP', crv: 'Ed25519', x: RFC8037_X, d: RFC8037_D });
    expect(result.code).toBe('invalid_request');
    expect(result.message).toMatch(/private/);
  });

  it('rejects private material before looking at the key type', () => {
    const { privateKey } = newKeyPair('rsa', { modulusLength: 1024 });
    expect(rejected(privateKey.export({ format: 'jwk' })).code).toBe('invalid_request');
    expect(rejected({ kty: 'oct', k: 'c2VjcmV0' }).code).toBe('invalid_request');
    expect(rejected({ kty: 'OKP', crv: 'Ed25519', x: RFC8037_X, d: '' }).code).toBe('invalid_request');
  });

  it.each([
    ['X25519', newKeyPair('x25519').publicKey.export({ format: 'jwk' })],
    ['Ed448', newKeyPair('ed448').publicKey.export({ format: 'jwk' })],
    ['P-256', newKeyPair('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' })],
    ['RSA', newKeyPair('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' })],
    ['OKP with an EC curve', { kty: 'OKP', crv: 'P-256', x: RFC8037_X }],
    ['EC claiming Ed25519', { kty: 'EC', crv: 'Ed25519', x: RFC8037_X }],
    ['lower-case crv', { kty: 'OKP', crv: 'ed25519', x: RFC8037_X }],
    ['alg RS256', { kty: 'OKP', crv: 'Ed25519', x: RFC8037_X, alg: 'RS256' }],
    ['alg none', { kty: 'OKP', crv: 'Ed25519', x: RFC8037_X, alg: 'none' }],
  ])('rejects %s as unsupported_algorithm', (_name, raw) => {
    expect(rejected(raw).code).toBe('unsupported_algorithm');
  });

  it.each([
    ['missing kty', { crv: 'Ed25519', x: RFC8037_X }],
    ['non-string kty', { kty: 1, crv: 'Ed25519', x: RFC8037_X }],
    ['missing crv', { kty: 'OKP', x: RFC8037_X }],
    ['missing x', { kty: 'OKP', crv: 'Ed25519' }],
    ['non-string x', { kty: 'OKP', crv: 'Ed25519', x: 12345 }],
    ['empty x', { kty: 'OKP', crv: 'Ed25519', x: '' }],
    ['31-byte x', { kty: 'OKP', crv: 'Ed25519', x: Buffer.alloc(31, 7).toString('base64url') }],
    ['33-byte x', { kty: 'OKP', crv: 'Ed25519', x: Buffer.alloc(33, 7).toString('base64url') }],
    ['64-byte x', { kty: 'OKP', crv: 'Ed25519', x: Buffer.alloc(64, 7).toString('base64url') }],
    ['padded x', { kty: 'OKP', crv: 'Ed25519', x: `${RFC8037_X}=` }],
    ['standard-alphabet x', { kty: 'OKP', crv: 'Ed25519', x: Buffer.alloc(32, 0xfb).toString('base64') }],
    [
      'x with whitespace',
      { kty: 'OKP', crv: 'Ed25519', x: `${RFC8037_X.slice(0, 20)} ${RFC8037_X.slice(20)}` },
    ],
    ['x with invalid characters', { kty: 'OKP', crv: 'Ed25519', x: `${RFC8037_X.slice(0, 42)}!` }],
    // The last character carries 2 unused bits; "p" (…01) decodes to the same bytes as "o" (…00).
    ['non-canonical x', { kty: 'OKP', crv: 'Ed25519', x: `${RFC8037_X.slice(0, 42)}p` }],
    ['use enc', { kty: 'OKP', crv: 'Ed25519', x: RFC8037_X, use: 'enc' }],
  ])('rejects %s as invalid_request', (_name, raw) => {
    expect(rejected(raw).code).toBe('invalid_request');
  });
});

describe('parsePublicJwk: weak Ed25519 points (§4.1: a key must identify one signer)', () => {
  const jwk = (x: string) => ({ kty: 'OKP', crv: 'Ed25519', x });

  it('the small-order list covers exactly the 8 points of order dividing 8', () => {
    const points = SMALL_ORDER_KEYS.map(([, x]) => decodeLenient(x));
    for (const point of points) {
      expect(point).toBeDefined();
      expect(hasSmallOrder(point as NonNullable<typeof point>)).toBe(true);
    }
    const distinct = new Set(points.map((pt) => `${pt?.x},${pt?.y}`));
    expect(distinct.size).toBe(8);
  });

  it.each(SMALL_ORDER_KEYS)('refuses a small-order key: %s', (_name, x) => {
    const result = rejected(jwk(x));
    expect(result.code).toBe('invalid_request');
    expect(result.message).toMatch(/small-order|non-canonical/);
  });

  it.each(NON_CANONICAL_KEYS)('refuses a non-canonical encoding: %s', (_name, x) => {
    const result = rejected(jwk(x));
    expect(result.code).toBe('invalid_request');
    expect(result.message).toMatch(/non-canonical Ed25519 point encoding \(y >= 2\^255 - 19\)/);
  });

  it('accepts canonical neighbours of the weak values (y = 2, y = p - 2) and keys node generates', async () => {
    // Canonical and not small-order (possibly off the curve, which no signature can then match).
    for (const y of [2n, P - 2n]) {
      const point = decodeLenient(encodePoint(y, 0));
      if (point !== undefined) expect(hasSmallOrder(point)).toBe(false);
      expect(parsePublicJwk(jwk(encodePoint(y, 0))).ok).toBe(true);
    }
    for (let i = 0; i < 20; i++) {
      const key = await generateTestKey();
      expect(parsePublicJwk(key.publicJwk).ok).toBe(true);
    }
  });
});

describe('thumbprint', () => {
  it('matches the RFC 8037 Appendix A.3 example', async () => {
    const jwk: Ed25519PublicJwk = { kty: 'OKP', crv: 'Ed25519', x: RFC8037_X };
    expect(await thumbprint(jwk)).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
  });

  it('is SHA-256 over the RFC 7638 canonical JSON, independent of extra members', async () => {
    const key = await generateTestKey();
    const canonical = `{"crv":"Ed25519","kty":"OKP","x":"${key.publicJwk.x}"}`;
    const expected = createHash('sha256').update(canonical).digest('base64url');
    expect(await thumbprint(key.publicJwk)).toBe(expected);
    expect(await thumbprint({ ...key.publicJwk, kid: 'ignored' })).toBe(expected);
    expect(await calculateJwkThumbprint(key.publicJwk, 'sha256')).toBe(expected);
    expect(key.thumbprint).toBe(expected);
  });
});

describe('verificationKey', () => {
  it('makes the key that verifies what the matching private key signed, and nothing else', async () => {
    const key = await generateTestKey();
    const verifier = verificationKey(key.publicJwk);
    const data = Buffer.from('message');
    const signature = sign(null, data, key.privateKey);
    expect(verifier.verify(data, signature)).toBe(true);
    expect(verifier.verify(Buffer.from('massage'), signature)).toBe(false);
    const other = await generateTestKey();
    expect(verificationKey(other.publicJwk).verify(data, signature)).toBe(false);
  });

  it('returns the cached key for the same x', async () => {
    const key = await generateTestKey();
    expect(verificationKey({ ...key.publicJwk })).toBe(verificationKey({ ...key.publicJwk, kid: 'x' }));
  });

  it('evicts beyond the limit a key not used since it was cached, sparing one in use', async () => {
    const first = await generateTestKey();
    const second = await generateTestKey();
    const firstKey = verificationKey(first.publicJwk);
    const secondKey = verificationKey(second.publicJwk);
    // Use `first` again, so that eviction spares it and takes `second`, cached and not used since.
    verificationKey(first.publicJwk);
    for (let i = 0; i < PUBLIC_KEY_CACHE_LIMIT - 1; i++) {
      const { publicKey } = newKeyPair('ed25519');
      const { x } = publicKey.export({ format: 'jwk' });
      verificationKey({ kty: 'OKP', crv: 'Ed25519', x: x! });
    }
    expect(verificationKey(first.publicJwk)).toBe(firstKey);
    const reimported = verificationKey(second.publicJwk);
    expect(reimported).not.toBe(secondKey);
    expect(reimported.equals(secondKey)).toBe(true);
  });
});
