/**
 * Ed25519 keys and JWTs for tests, including forged tokens for attack tests. Signing is done by
 * hand (not with jose) so headers and claims can be anything, however invalid.
 */
import { createHmac, randomUUID, sign, type KeyObject } from 'node:crypto';
import { thumbprint } from '../../src/protocol/keys.js';
import { newKeyPair } from '../../src/util/key-pair.js';

export interface TestKey {
  readonly publicJwk: { kty: 'OKP'; crv: 'Ed25519'; x: string };
  readonly privateKey: KeyObject;
  readonly thumbprint: string;
}

export interface JwtOptions {
  /** Extra or replacement header members; set one to undefined to drop it (e.g. typ). */
  header?: Record<string, unknown>;
  /** The "current" time used for the default iat; Date.now() when absent. */
  nowMs?: number;
}

export async function generateTestKey(): Promise<TestKey> {
  const { publicKey, privateKey } = newKeyPair('ed25519');
  const jwk = publicKey.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('Ed25519 public JWK without x');
  const publicJwk = { kty: 'OKP', crv: 'Ed25519', x: jwk.x } as const;
  return { publicJwk, privateKey, thumbprint: await thumbprint(publicJwk) };
}

/**
 * Signs `{ alg: 'EdDSA', typ, ...header }` over `{ iat, exp, jti, ...claims }`. exp defaults to
 * 60 s after the effective iat, so overriding iat alone keeps a valid lifetime.
 */
export function signJwt(
  key: TestKey,
  typ: string,
  claims: Record<string, unknown>,
  options: JwtOptions = {},
): Promise<string> {
  const nowSec = Math.floor((options.nowMs ?? Date.now()) / 1000);
  const iat = 'iat' in claims ? claims.iat : nowSec;
  const defaults = { iat: nowSec, exp: (typeof iat === 'number' ? iat : nowSec) + 60, jti: randomUUID() };
  const header = { alg: 'EdDSA', typ, ...options.header };
  const input = signingInput(header, { ...defaults, ...claims });
  return Promise.resolve(`${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`);
}

export function hostJwt(
  host: TestKey,
  aud: string,
  extra: Record<string, unknown> = {},
  options: JwtOptions = {},
): Promise<string> {
  return signJwt(
    host,
    'host+jwt',
    { iss: host.thumbprint, aud, host_public_key: host.publicJwk, ...extra },
    options,
  );
}

export function agentJwt(
  agent: TestKey,
  agentId: string,
  aud: string,
  extra: Record<string, unknown> = {},
  options: JwtOptions = {},
): Promise<string> {
  return signJwt(agent, 'agent+jwt', { sub: agentId, aud, ...extra }, options);
}

/** An `alg: none`-style token: empty signature segment, header exactly as given. */
export function unsignedJwt(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  return `${signingInput(header, payload)}.`;
}

/** HMAC-SHA256 over the signing input, e.g. with a public key as the secret (alg confusion). */
export function hmacJwt(
  secret: string | Buffer,
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
): string {
  const input = signingInput(header, payload);
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

/** JSON.stringify drops undefined members, which is how callers remove a header or claim. */
function signingInput(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  return `${encodeJson(header)}.${encodeJson(payload)}`;
}

export function encodeJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
