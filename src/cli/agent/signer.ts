/**
 * The client's own JWT signing (§4.2 host JWTs, §4.3 agent JWTs, §4.4 DPoP proofs): EdDSA over
 * Ed25519, a fresh jti and a 60 s lifetime per request (§8.2), `iss` the RFC 7638 thumbprint of
 * the host key. Kept
 * here rather than imported from src/protocol: the CLI is a client and speaks only HTTP.
 */
import { createHash, createPrivateKey, randomUUID, sign } from 'node:crypto';
import type { PrivateJwk } from './key-file.js';

/** §8.2: at most 60 s; a short life is what makes replay protection cheap for the server. */
const LIFETIME_SEC = 60;

export interface PublicJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
}

export function publicJwk(key: PrivateJwk): PublicJwk {
  return { kty: 'OKP', crv: 'Ed25519', x: key.x };
}

/**
 * RFC 7638 §3: SHA-256 over the required members in lexicographic order with no whitespace;
 * for an OKP key (RFC 8037 §2) they are crv, kty, x.
 */
export function thumbprint(key: PrivateJwk | PublicJwk): string {
  const canonical = `{"crv":"${key.crv}","kty":"${key.kty}","x":"${key.x}"}`;
  return createHash('sha256').update(canonical).digest('base64url');
}

function signJwt(key: PrivateJwk, typ: 'host+jwt' | 'agent+jwt', claims: object, nowMs: number): string {
  const iat = Math.floor(nowMs / 1000);
  return signed(key, { alg: 'EdDSA', typ }, { ...claims, iat, exp: iat + LIFETIME_SEC, jti: randomUUID() });
}

function signed(key: PrivateJwk, header: object, payload: object): string {
  const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${encode(header)}.${encode(payload)}`;
  const privateKey = createPrivateKey({ key: { ...key }, format: 'jwk' });
  return `${input}.${sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
}

/**
 * §4.2: aud is the issuer; host_public_key always (the proxy may not know the host yet, and
 * must compare it when it does); agent_public_key only for registration (§5.3).
 */
export function hostJwt(
  host: PrivateJwk,
  issuer: string,
  nowMs: number,
  agentKey?: PrivateJwk,
  bound = false,
): string {
  return signJwt(
    host,
    'host+jwt',
    {
      iss: thumbprint(host),
      aud: issuer,
      host_public_key: publicJwk(host),
      ...(agentKey ? { agent_public_key: publicJwk(agentKey) } : {}),
      // §4.4, §8 (registration with a discovered server): bound to the host key, proven per request.
      ...(bound ? { cnf: { jkt: thumbprint(host) } } : {}),
    },
    nowMs,
  );
}

/**
 * §4.3: sub is the agent id, iss the host's thumbprint, aud the recipient: the issuer for the
 * auth server's endpoints, the execute location for execution (§5.11).
 */
export function agentJwt(
  agent: PrivateJwk,
  host: PrivateJwk,
  agentId: string,
  aud: string,
  nowMs: number,
  bound = false,
): string {
  // §4.4: bound to the agent key itself, whose proofs then go with it (dpopProof).
  const cnf = bound ? { cnf: { jkt: thumbprint(agent) } } : {};
  return signJwt(agent, 'agent+jwt', { iss: thumbprint(host), sub: agentId, aud, ...cnf }, nowMs);
}

/**
 * RFC 9449 §4.2: a DPoP proof by `key` for one request, `method url` (query and fragment left
 * out), tied to `jwt` by its SHA-256 (`ath`).
 */
export function dpopProof(key: PrivateJwk, method: string, url: string, jwt: string, nowMs: number): string {
  const target = new URL(url);
  return signed(
    key,
    { alg: 'EdDSA', typ: 'dpop+jwt', jwk: publicJwk(key) },
    {
      jti: randomUUID(),
      htm: method,
      htu: `${target.origin}${target.pathname}`,
      iat: Math.floor(nowMs / 1000),
      ath: createHash('sha256').update(jwt).digest('base64url'),
    },
  );
}
