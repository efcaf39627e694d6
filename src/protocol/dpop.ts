/**
 * §4.4 proof of possession, the DPoP profile (RFC 9449). A JWT whose `cnf.jkt` names a key is
 * bound to it: it counts only beside a DPoP proof that key signed for this very request (method,
 * URL, and the JWT itself through `ath`). A stolen bound JWT is therefore useless without the
 * private key, even within its 60 seconds. `capabilities.dpop` (policy) makes that binding
 * required for the capabilities it lists (§4.5: "if proof of possession is required by server
 * policy, validate the DPoP proof … and ensure it matches the JWT's cnf claim").
 *
 * The proof's own `jti` is not stored: `ath` ties the proof to one JWT, whose `jti` is used once
 * (§4.6), so a replayed proof would come with a replayed JWT, refused anyway. No nonces are
 * issued (RFC 9449 §8 is optional); a proof's `iat` must fall within the JWT lifetime and skew.
 */
import { createHash } from 'node:crypto';
import { ProtocolError } from '../errors.js';
import type { AgentAuth } from './authenticate.js';
import type { ProtocolContext } from './context.js';
import { decodeJsonObject, isBase64url, MAX_JWT_BYTES, type Claims } from './jwt.js';
import { parsePublicJwk, thumbprint, verificationKey } from './keys.js';

/** The proof algorithms accepted: the one the protocol uses for every key (§4.1). */
export const DPOP_ALGORITHMS: readonly string[] = ['EdDSA'];

/** How a JWT was presented: the Authorization scheme, and the DPoP header when there was one. */
export interface PresentedToken {
  readonly token: string;
  readonly scheme: 'bearer' | 'dpop';
  /** The `DPoP` request header, as received (undefined: none). */
  readonly proof: string | undefined;
}

/** The request a proof must be made for. */
export interface ProvenRequest {
  readonly method: string;
  /** The URL the client used: the issuer's origin and the request path, no query (RFC 9449 §4.3). */
  readonly url: string;
}

const MAX_PROOF_JTI_LENGTH = 256;

/** The challenge that tells a client which proofs this server takes (RFC 9449 §7.1). */
function challenge(error?: string): string {
  return `DPoP ${error ? `error="${error}", ` : ''}algs="${DPOP_ALGORITHMS.join(' ')}"`;
}

function invalidProof(message: string): ProtocolError {
  return new ProtocolError('invalid_jwt', `${message} (§4.4, RFC 9449).`, {
    headers: { 'www-authenticate': challenge('invalid_dpop_proof') },
  });
}

/**
 * Checks that `presented` is used as its binding says: a JWT with `cnf.jkt` only with the DPoP
 * scheme and a proof by that key; the DPoP scheme only for such a JWT. Undefined, at once, for a
 * plain bearer JWT (execution's usual case stays synchronous); otherwise resolves to 'dpop' once
 * the proof holds. `request` is asked for only when there is a proof to check.
 */
export function checkTokenBinding(
  ctx: ProtocolContext,
  claims: Claims,
  presented: PresentedToken,
  request: () => ProvenRequest,
): undefined | Promise<'dpop'> {
  if (presented.scheme === 'bearer' && claims.cnf === undefined) return undefined;
  const jkt = boundKey(claims.cnf);
  if (presented.scheme === 'bearer') {
    throw invalidProof(
      'This JWT is bound to a key (cnf.jkt): send it as "Authorization: DPoP <JWT>" with a DPoP proof header',
    );
  }
  return provenBy(ctx, jkt, presented, request());
}

async function provenBy(
  ctx: ProtocolContext,
  jkt: string | undefined,
  presented: PresentedToken,
  request: ProvenRequest,
): Promise<'dpop'> {
  if (jkt === undefined) {
    throw invalidProof('"Authorization: DPoP" needs a JWT bound to the proof key by its cnf.jkt claim');
  }
  if (presented.proof === undefined) throw invalidProof('"Authorization: DPoP" needs a DPoP header');
  const proofKey = await verifyDpopProof(ctx, presented.proof, presented.token, request);
  if (proofKey !== jkt) throw invalidProof('The DPoP proof is signed by another key than cnf.jkt names');
  return 'dpop';
}

/**
 * `capabilities.dpop`: executing `name` (or reading its outcome) needs a JWT proven by DPoP. A
 * `401`, so that the client signs again, bound, as the challenge says.
 */
export function checkProofRequirement(ctx: ProtocolContext, auth: AgentAuth, name: string): void {
  if (auth.proof === 'dpop' || !ctx.policy.dpop.has(name)) return;
  throw new ProtocolError(
    'invalid_jwt',
    `${name} needs a DPoP-bound agent JWT: a cnf.jkt claim, "Authorization: DPoP <JWT>" and a DPoP proof header (§4.4, RFC 9449).`,
    { headers: { 'www-authenticate': challenge() } },
  );
}

/** The `cnf` claim's key thumbprint; undefined when absent. Other confirmation methods are refused. */
export function boundKey(cnf: unknown): string | undefined {
  if (cnf === undefined) return undefined;
  if (typeof cnf !== 'object' || cnf === null || Array.isArray(cnf)) {
    throw invalidProof('The cnf claim must be an object');
  }
  const members = Object.keys(cnf);
  const { jkt } = cnf as Readonly<Record<string, unknown>>;
  // mTLS (cnf["x5t#S256"], RFC 8705) and anything else: a binding this server cannot check must
  // not be ignored, alone or beside jkt, or the JWT would be accepted on less than it demands.
  if (jkt === undefined || members.some((m) => m !== 'jkt')) {
    throw invalidProof('Only DPoP bindings (cnf.jkt, and nothing else in cnf) are supported here');
  }
  if (typeof jkt !== 'string' || !isBase64url(jkt) || jkt.length !== 43) {
    throw invalidProof('cnf.jkt must be a base64url SHA-256 JWK thumbprint');
  }
  return jkt;
}

/**
 * RFC 9449 §4.3: the proof's structure, key and signature, then its claims against the request.
 * Returns the RFC 7638 thumbprint of the key that signed it.
 */
async function verifyDpopProof(
  ctx: ProtocolContext,
  proof: string,
  accessToken: string,
  request: ProvenRequest,
): Promise<string> {
  // One header (Node joins repeated ones with ", "; a compact JWS has no comma), one JWS.
  if (proof.length > MAX_JWT_BYTES) throw invalidProof(`The DPoP proof exceeds ${MAX_JWT_BYTES} bytes`);
  const parts = proof.split('.');
  if (parts.length !== 3) throw invalidProof('The DPoP header must hold exactly one compact JWS');
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
  const header = decoded(encodedHeader, 'header');
  if (header.typ !== 'dpop+jwt') throw invalidProof('The DPoP proof "typ" must be "dpop+jwt"');
  if (typeof header.alg !== 'string' || !DPOP_ALGORITHMS.includes(header.alg)) {
    throw invalidProof(`The DPoP proof "alg" must be one of ${DPOP_ALGORITHMS.join(', ')}`);
  }
  if ('crit' in header) throw invalidProof('The DPoP proof header must not contain "crit"');
  for (const name of ['jku', 'x5u', 'x5c'] as const) {
    if (name in header) throw invalidProof(`The DPoP proof header must not contain "${name}"`);
  }
  // parsePublicJwk refuses private key members, other key types and weak Ed25519 points.
  const jwk = parsePublicJwk(header.jwk);
  if (!jwk.ok) throw invalidProof(`The DPoP proof "jwk": ${jwk.message}`);
  if (!isBase64url(encodedSignature)) throw invalidProof('The DPoP proof signature is not base64url');
  const signingInput = Buffer.from(`${encodedHeader}.${encodedPayload}`, 'latin1');
  const signature = Buffer.from(encodedSignature, 'base64url');
  if (!verificationKey(jwk.jwk).verify(signingInput, signature)) {
    throw invalidProof('The DPoP proof signature is invalid');
  }
  checkProofClaims(ctx, decoded(encodedPayload, 'payload'), accessToken, request);
  return thumbprint(jwk.jwk);
}

function decoded(segment: string, what: 'header' | 'payload'): Record<string, unknown> {
  try {
    return decodeJsonObject(segment, what);
  } catch {
    throw invalidProof(`The DPoP proof ${what} is not a base64url JSON object`);
  }
}

function checkProofClaims(
  ctx: ProtocolContext,
  payload: Readonly<Record<string, unknown>>,
  accessToken: string,
  request: ProvenRequest,
): void {
  const { jti, htm, htu, iat, ath } = payload;
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_PROOF_JTI_LENGTH) {
    throw invalidProof(`The DPoP proof "jti" must be a string of 1 to ${MAX_PROOF_JTI_LENGTH} characters`);
  }
  if (htm !== request.method) throw invalidProof(`The DPoP proof "htm" must be ${request.method}`);
  if (typeof htu !== 'string' || !sameResource(htu, request.url)) {
    throw invalidProof(`The DPoP proof "htu" must be ${request.url}`);
  }
  if (typeof iat !== 'number' || !Number.isFinite(iat))
    throw invalidProof('The DPoP proof "iat" must be a number');
  const { clockSkewSec, maxJwtLifetimeSec } = ctx.policy.lifetimes;
  const now = ctx.clock.now();
  if (iat * 1000 > now + clockSkewSec * 1000) throw invalidProof('The DPoP proof "iat" is in the future');
  if (iat * 1000 < now - (maxJwtLifetimeSec + clockSkewSec) * 1000) {
    throw invalidProof(`The DPoP proof is older than ${maxJwtLifetimeSec} seconds`);
  }
  const expected = createHash('sha256').update(accessToken, 'ascii').digest('base64url');
  if (ath !== expected) throw invalidProof('The DPoP proof "ath" must be the SHA-256 of this JWT');
}

/** RFC 9449 §4.3 step 9: the same URL, query and fragment aside, after RFC 3986 normalisation. */
function sameResource(htu: string, expected: string): boolean {
  let given: URL;
  try {
    given = new URL(htu);
  } catch {
    return false;
  }
  const wanted = new URL(expected);
  return given.origin === wanted.origin && given.pathname === wanted.pathname;
}
