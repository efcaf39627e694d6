import { describe, expect, it } from 'vitest';
import { JwksContentError, MAX_JWKS_KEYS, parseJwks } from '../../../../src/protocol/jwks/parse.js';
import { generateTestKey } from '../../../helpers/keys.js';

async function ed(kid: string): Promise<Record<string, unknown>> {
  return { ...(await generateTestKey()).publicJwk, kid };
}

describe('JWKS content validation (§8.12)', () => {
  it('keeps Ed25519 keys by kid and ignores other asymmetric keys and kid-less keys', async () => {
    const a = await ed('a');
    const keys = parseJwks({
      keys: [
        a,
        { kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'ec' },
        { kty: 'RSA', n: 'n', e: 'AQAB', kid: 'rsa' },
        { kty: 'OKP', crv: 'X25519', x: 'x', kid: 'x25519' },
        { ...(await generateTestKey()).publicJwk },
      ],
    });
    expect([...keys.keys()]).toEqual(['a']);
    expect(keys.get('a')).toEqual({ kty: 'OKP', crv: 'Ed25519', x: a.x });
  });

  it.each([
    ['not an object', [], /not a JWK Set/],
    ['no keys array', {}, /no "keys"/],
    ['an empty set', { keys: [] }, /empty/],
    ['a symmetric key', { keys: [{ kty: 'oct', k: 'c2VjcmV0', kid: 's' }] }, /private key material|oct/],
    ['an unknown key type', { keys: [{ kty: 'oct', kid: 's' }] }, /only RSA, EC and OKP/],
    ['a key without kty', { keys: [{ kid: 'x' }] }, /no "kty"/],
    [
      'only non-Ed25519 keys',
      { keys: [{ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'e' }] },
      /no Ed25519/,
    ],
  ])('refuses %s', (_name, document, message) => {
    expect(() => parseJwks(document)).toThrow(JwksContentError);
    expect(() => parseJwks(document)).toThrow(message);
  });

  it('refuses a set carrying a private key member (d)', async () => {
    const key = { ...(await ed('a')), d: 'secret' };
    expect(() => parseJwks({ keys: [key] })).toThrow(/private key material/);
  });

  it('refuses a duplicate kid, even across key types', async () => {
    const a = await ed('a');
    const again = await ed('a');
    expect(() => parseJwks({ keys: [a, again] })).toThrow(/appears twice/);
    expect(() => parseJwks({ keys: [a, { kty: 'RSA', n: 'n', e: 'AQAB', kid: 'a' }] })).toThrow(
      /appears twice/,
    );
  });

  it(`refuses more than ${MAX_JWKS_KEYS} keys`, async () => {
    const many = await Promise.all(Array.from({ length: MAX_JWKS_KEYS + 1 }, (_, i) => ed(`k${i}`)));
    expect(() => parseJwks({ keys: many })).toThrow(/more than 20/);
    expect(parseJwks({ keys: many.slice(0, MAX_JWKS_KEYS) }).size).toBe(MAX_JWKS_KEYS);
  });

  it('refuses an invalid Ed25519 key', () => {
    expect(() => parseJwks({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'short', kid: 'a' }] })).toThrow(
      /keys\[0\]/,
    );
  });
});
