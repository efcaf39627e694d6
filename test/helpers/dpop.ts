/**
 * DPoP proofs (RFC 9449 §4.2) for tests: really signed, with any claim or header member replaced
 * or dropped (set it to undefined), so that tests can also make the proofs a server must refuse.
 */
import { createHash, randomUUID } from 'node:crypto';
import { signJwt, type TestKey } from './keys.js';

/** A DPoP proof by `key` for `method url`, bound to `token` (`ath`), issued at `nowMs`. */
export function dpopProof(
  key: TestKey,
  request: { method: string; url: string; token: string; nowMs: number },
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const ath = createHash('sha256').update(request.token).digest('base64url');
  return signJwt(
    key,
    'dpop+jwt',
    { jti: randomUUID(), htm: request.method, htu: request.url, ath, ...claims },
    { nowMs: request.nowMs, header: { jwk: key.publicJwk, ...header } },
  );
}

/** The headers of a request made with DPoP-bound `token` and its `proof`. */
export function dpopHeaders(token: string, proof: string): Record<string, string> {
  return { authorization: `DPoP ${token}`, dpop: proof };
}
