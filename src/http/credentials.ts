/** Reading and checking credentials from request headers. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ProtocolError } from '../errors.js';
import type { PresentedToken } from '../protocol/dpop.js';

/**
 * The token of `Authorization: Bearer <token>`, or undefined when there is no Authorization header.
 * Another scheme is answered like missing credentials, `401` (the server adds the challenge; RFC
 * 6750 §3.1: an unsupported authentication method gets no error code); a malformed Bearer is a 400.
 */
export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  if (!/^Bearer(?:[ ]|$)/i.test(header)) {
    throw new ProtocolError(
      'authentication_required',
      'Only "Authorization: Bearer <token>" is accepted here (RFC 6750).',
    );
  }
  const match = /^Bearer[ ]+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  if (!match?.[1]) {
    throw new ProtocolError('invalid_request', 'Authorization must be "Bearer <token>".');
  }
  return match[1];
}

/**
 * A JWT as presented: `Authorization: Bearer <token>` or, for a DPoP-bound one (§4.4, RFC 9449
 * §7.1), `Authorization: DPoP <token>` with its proof in the `DPoP` header. Undefined when there
 * is no Authorization header; other schemes as for bearerToken.
 */
export function presentedToken(req: IncomingMessage): PresentedToken | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^(Bearer|DPoP)[ ]+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  if (!match?.[1] || !match[2]) {
    if (!/^(?:Bearer|DPoP)(?:[ ]|$)/i.test(header)) {
      throw new ProtocolError(
        'authentication_required',
        'Only "Authorization: Bearer <token>" (or "DPoP <token>" with a DPoP proof) is accepted here.',
      );
    }
    throw new ProtocolError('invalid_request', 'Authorization must be "Bearer <token>" or "DPoP <token>".');
  }
  const proof = req.headers.dpop;
  return {
    token: match[2],
    scheme: match[1].toLowerCase() === 'dpop' ? 'dpop' : 'bearer',
    // Node joins a repeated header with ", " (never part of a JWS): the proof check refuses it.
    proof: typeof proof === 'string' ? proof : undefined,
  };
}

/** Constant-time comparison of secrets (hashing first makes the lengths equal). */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The token's JWT `typ` header, read without trusting it (routing only; verification follows). */
export function jwtType(token: string): string | undefined {
  const dot = token.indexOf('.');
  if (dot <= 0 || dot > 2048) return undefined;
  try {
    const header: unknown = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8'));
    return header !== null && typeof header === 'object' && 'typ' in header && typeof header.typ === 'string'
      ? header.typ
      : undefined;
  } catch {
    return undefined;
  }
}
