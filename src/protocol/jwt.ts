/**
 * Host and agent JWTs (§4.2, §4.3): a strict structural pre-check before any key lookup, then
 * signature and claim verification. Every failure is a JwtError, which callers answer with
 * 401 invalid_jwt; the messages name the rule that failed and never echo key material.
 */
import type { Clock } from '../clock.js';
import { hasControlCharacter, hasLoneSurrogate } from '../util/control-characters.js';
import { Ed25519PublicKey } from './ed25519.js';

export type JwtType = 'host+jwt' | 'agent+jwt';

/** A verified token's payload. */
export type Claims = Readonly<Record<string, unknown>>;

/** Callers choose the values; §8.2 suggests at most 30 s skew and 60 s lifetime. */
export interface JwtPolicy {
  readonly clockSkewSec: number;
  readonly maxLifetimeSec: number;
}

export interface UnverifiedJwt {
  readonly header: Readonly<Record<string, unknown>>;
  readonly payload: Readonly<Record<string, unknown>>;
  readonly token: string;
}

export class JwtError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JwtError';
  }
}

/** §8.2: servers SHOULD NOT tolerate more than 30 seconds of clock skew (the policy's ceiling). */
export const MAX_CLOCK_SKEW_MS = 30_000;

/** Far above any legitimate host or agent JWT; bounds the work done before the signature check. */
export const MAX_JWT_BYTES = 8 * 1024;
const MAX_JTI_LENGTH = 256;
/** Ed25519 signatures are 64 bytes (RFC 8032 §5.1.6). */
const ED25519_SIGNATURE_BYTES = 64;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/**
 * Claims that name a stored row (the agent, the host, a replay entry): no id this server issues or
 * accepts holds a control character, and PostgreSQL's text cannot hold a NUL, so such a value is
 * refused as malformed here rather than reaching a lookup that would fail (a 500) uncharged.
 */
const IDENTIFYING_CLAIMS = ['sub', 'iss', 'jti'] as const;
// fatal: a payload that is not UTF-8 must not be "repaired" into different claims. Without the
// `stream` option decode() keeps no state between calls, so one instance serves every token.
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * What decodeJwt returns. verifyJwt trusts the header and payload of an instance (frozen, decoded
 * from its own token) and decodes anything else again, so no hand-built object can pair one
 * token's signature with another's claims. The private field is the mark: no other code can make
 * an object that has it (a WeakSet of the objects made here did the same at ~0.4 µs per token).
 */
class DecodedJwt implements UnverifiedJwt {
  readonly #madeHere = true;

  constructor(
    readonly header: Readonly<Record<string, unknown>>,
    readonly payload: Readonly<Record<string, unknown>>,
    readonly token: string,
  ) {
    Object.freeze(this);
  }

  static madeHere(jwt: UnverifiedJwt): jwt is DecodedJwt {
    return #madeHere in jwt;
  }
}

/**
 * Headers already checked, by typ and encoded segment: an agent's header is the same bytes on
 * every request (alg, typ, kid), so it is decoded and checked once. Bounded in entries and in the
 * length of what is kept; started afresh when full.
 */
const checkedHeaders: Record<JwtType, Map<string, Readonly<Record<string, unknown>>>> = {
  'host+jwt': new Map(),
  'agent+jwt': new Map(),
};
const MAX_CHECKED_HEADERS = 1024;
const MAX_CACHED_HEADER_CHARS = 512;

/**
 * Header members that point the verifier at a key chosen by the token itself. Keys come only from
 * registration or the registered JWKS URL (§4.1), so accepting these would let anyone self-sign.
 */
const EMBEDDED_KEY_HEADERS = ['jku', 'jwk', 'x5u', 'x5c'] as const;

export function decodeJwt(token: string, typ: JwtType): UnverifiedJwt {
  if (typeof token !== 'string' || token.length === 0) throw new JwtError('The JWT is empty.');
  if (Buffer.byteLength(token, 'utf8') > MAX_JWT_BYTES) {
    throw new JwtError(`The JWT exceeds ${MAX_JWT_BYTES} bytes.`);
  }
  const parts = token.split('.');
  if (parts.length !== 3) throw new JwtError('The JWT must be a compact JWS with three parts.');
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
  const header = checkedHeader(encodedHeader, typ);
  const payload = decodeJsonObject(encodedPayload, 'payload');
  for (const claim of IDENTIFYING_CLAIMS) {
    const value = payload[claim];
    if (typeof value === 'string' && hasControlCharacter(value)) {
      throw new JwtError(`The JWT "${claim}" must not contain control characters.`);
    }
    // A lone surrogate (`"j\ud800"`) is no text: PostgreSQL's driver stores it as U+FFFD, so two
    // such jtis would be one there (a false replay) and two on SQLite.
    if (typeof value === 'string' && hasLoneSurrogate(value)) {
      throw new JwtError(`The JWT "${claim}" must be well-formed Unicode text.`);
    }
  }
  if (!isBase64url(encodedSignature) || decodedLength(encodedSignature) !== ED25519_SIGNATURE_BYTES) {
    throw new JwtError('The JWT signature is not a base64url Ed25519 signature.');
  }
  return new DecodedJwt(header, Object.freeze(payload), token);
}

/** The header, decoded and checked against the rules of `typ` (or as it was the last time). */
function checkedHeader(encodedHeader: string, typ: JwtType): Readonly<Record<string, unknown>> {
  const checked = checkedHeaders[typ];
  const cached = checked.get(encodedHeader);
  if (cached !== undefined) return cached;
  const header = decodeJsonObject(encodedHeader, 'header');
  // Exact match only: alg "none", HMAC (which a public key could be abused as the secret for),
  // RSA/ECDSA and the RFC 9864 spelling "Ed25519" are all refused, since §4.1 fixes JWA EdDSA.
  if (header.alg !== 'EdDSA') throw new JwtError('The JWT header "alg" must be "EdDSA".');
  // Exact, case-sensitive comparison (no "application/" prefix): the typ is what keeps a host JWT
  // from being replayed as an agent JWT and vice versa (§4.5 step 1, §4.5.1 step 1).
  if (header.typ !== typ) throw new JwtError(`The JWT header "typ" must be "${typ}".`);
  // No extensions are understood, so any critical one must fail (RFC 7515 §4.1.11).
  if ('crit' in header) throw new JwtError('The JWT header must not contain "crit".');
  for (const name of EMBEDDED_KEY_HEADERS) {
    if (name in header) throw new JwtError(`The JWT header must not contain "${name}".`);
  }
  if (header.kid !== undefined && (typeof header.kid !== 'string' || header.kid.length === 0)) {
    throw new JwtError('The JWT header "kid" must be a non-empty string.');
  }
  if (typeof header.kid === 'string' && hasControlCharacter(header.kid)) {
    throw new JwtError('The JWT header "kid" must not contain control characters.');
  }
  Object.freeze(header);
  if (encodedHeader.length <= MAX_CACHED_HEADER_CHARS) {
    if (checked.size >= MAX_CHECKED_HEADERS) checked.clear();
    checked.set(encodedHeader, header);
  }
  return header;
}

/** One base64url segment of a compact JWS, decoded as the JSON object it must be (UTF-8, strictly). */
export function decodeJsonObject(segment: string, what: 'header' | 'payload'): Record<string, unknown> {
  if (!isBase64url(segment)) throw new JwtError(`The JWT ${what} is not base64url.`);
  let value: unknown;
  try {
    value = JSON.parse(UTF8.decode(Buffer.from(segment, 'base64url')));
  } catch {
    throw new JwtError(`The JWT ${what} is not valid JSON.`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new JwtError(`The JWT ${what} must be a JSON object.`);
  }
  return value as Record<string, unknown>;
}

/**
 * Node's base64url decoder silently skips invalid characters, so the alphabet is checked first;
 * a length of 1 mod 4 cannot come from any byte string.
 */
export function isBase64url(segment: string): boolean {
  return BASE64URL.test(segment) && segment.length % 4 !== 1;
}

/** Bytes an unpadded base64url segment decodes to (its alphabet is checked first): no copy made. */
function decodedLength(segment: string): number {
  return Math.floor((segment.length * 3) / 4);
}

/**
 * Checks the signature (ed25519.ts: RFC 8032 §5.1.7, including the S < L check) and the claims.
 * Synchronous on purpose: a verification on the calling thread costs less CPU than a hop to the
 * libuv pool and back (as WebCrypto's does), and execution calls this once per request.
 */
export function verifyJwt(
  jwt: UnverifiedJwt,
  key: Ed25519PublicKey,
  options: { typ: JwtType; audiences: readonly string[]; clock: Clock; policy: JwtPolicy },
): Claims {
  if (!Ed25519PublicKey.isOne(key)) {
    throw new JwtError('The verification key is not an Ed25519 public key.');
  }
  // The claims checked below must be exactly the bytes the signature covers, with the header
  // rules of this typ: an object decodeJwt made for this typ carries them; anything else is
  // decoded again from its token.
  const { payload, token } =
    DecodedJwt.madeHere(jwt) && jwt.header.typ === options.typ ? jwt : decodeJwt(jwt.token, options.typ);
  // decodeJwt has checked the three base64url parts and the 64-byte signature.
  const lastDot = token.lastIndexOf('.');
  const signingInput = Buffer.from(token.slice(0, lastDot), 'latin1');
  const signature = Buffer.from(token.slice(lastDot + 1), 'base64url');
  if (!key.verify(signingInput, signature)) throw new JwtError('The JWT signature is invalid.');
  checkAudience(payload.aud, options.audiences);
  checkTimes(payload, options.clock.now(), options.policy);
  checkJti(payload.jti);
  return payload;
}

/**
 * §4.2/§4.3: aud must be exactly the expected value, with no normalisation of URLs. RFC 7519
 * §4.1.3 allows an array, but a token addressed to this server and to others at once could be
 * replayed at those others (or theirs here), so an array is accepted only as the single expected
 * value: `["<issuer>"]`, never `["<issuer>", "<anyone else>"]`.
 */
function checkAudience(aud: unknown, audiences: readonly string[]): void {
  if (aud === undefined) throw new JwtError('The JWT is missing "aud".');
  let value: unknown = aud;
  if (Array.isArray(aud)) {
    if (aud.length !== 1) {
      throw new JwtError(
        'The JWT "aud" array must hold exactly one value: this server, and no other audience.',
      );
    }
    value = aud[0];
  }
  if (typeof value !== 'string') {
    throw new JwtError('The JWT "aud" must be a string or an array of one string.');
  }
  if (!audiences.includes(value)) throw new JwtError('The JWT "aud" does not name this server.');
}

/**
 * The refusals a wrong clock causes, by the claim that failed: §8.2 asks servers to log and
 * monitor them (a host whose clock drifts fails here first). Their messages are what the decision
 * record's `reason` holds, so the metrics read them back from there (clockRefusalOf).
 */
export const CLOCK_REFUSALS = {
  iat: 'The JWT "iat" is in the future.',
  exp: 'The JWT has expired.',
  nbf: 'The JWT is not yet valid ("nbf").',
} as const;
export type ClockRefusal = keyof typeof CLOCK_REFUSALS;

/** Which clock refusal a refusal's message is, if any. */
export function clockRefusalOf(message: string | null): ClockRefusal | undefined {
  if (message === CLOCK_REFUSALS.iat) return 'iat';
  if (message === CLOCK_REFUSALS.exp) return 'exp';
  if (message === CLOCK_REFUSALS.nbf) return 'nbf';
  return undefined;
}

/** §4.5 step 8, §4.5.1 step 5, §8.2. Compared in milliseconds so no rounding widens the window. */
function checkTimes(payload: Readonly<Record<string, unknown>>, nowMs: number, policy: JwtPolicy): void {
  const { iat, exp, nbf } = payload;
  if (!isNumericDate(iat)) throw new JwtError('The JWT "iat" must be a number.');
  if (!isNumericDate(exp)) throw new JwtError('The JWT "exp" must be a number.');
  if (exp <= iat) throw new JwtError('The JWT "exp" must be after "iat".');
  // Bounding the lifetime bounds the replay window the jti cache has to cover (§8.2).
  if (exp - iat > policy.maxLifetimeSec) {
    throw new JwtError(`The JWT lifetime exceeds ${policy.maxLifetimeSec} seconds.`);
  }
  const skewMs = policy.clockSkewSec * 1000;
  if (iat * 1000 > nowMs + skewMs) throw new JwtError(CLOCK_REFUSALS.iat);
  if (exp * 1000 + skewMs <= nowMs) throw new JwtError(CLOCK_REFUSALS.exp);
  if (nbf !== undefined) {
    if (!isNumericDate(nbf)) throw new JwtError('The JWT "nbf" must be a number.');
    if (nbf * 1000 > nowMs + skewMs) throw new JwtError(CLOCK_REFUSALS.nbf);
  }
}

function isNumericDate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** §4.6: every JWT carries a jti; the length cap keeps the replay cache's memory bounded. */
function checkJti(jti: unknown): void {
  if (typeof jti !== 'string' || jti.length === 0) {
    throw new JwtError('The JWT "jti" must be a non-empty string.');
  }
  if (jti.length > MAX_JTI_LENGTH) {
    throw new JwtError(`The JWT "jti" exceeds ${MAX_JTI_LENGTH} characters.`);
  }
}

/**
 * The instant (epoch ms) until which a verified JWT's jti must be remembered: it stays acceptable
 * until exp + skew, and §8.2 requires the replay cache to cover that whole effective window.
 */
export function replayHorizonMs(payload: Claims, policy: JwtPolicy): number {
  if (!isNumericDate(payload.exp)) throw new JwtError('The JWT "exp" must be a number.');
  // Whole milliseconds, rounded up: RFC 7519 lets `exp` have a fraction (`time.time() + 60`), and
  // PostgreSQL's bigint column refused one, answering every such request 503.
  return Math.ceil((payload.exp + policy.clockSkewSec) * 1000);
}
