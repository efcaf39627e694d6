/**
 * The steps of the approval pages (issue 11), in the order a page route lists them:
 *
 *   page (errors as HTML) → per-IP limit → session → form body (POST) → same-origin + CSRF (POST)
 *   → action → render
 *
 * A POST that fails the origin or token check changes nothing: it is refused before the action.
 */
import { ProtocolError } from '../../errors.js';
import { fragmentedBody, readRequestBody } from '../body.js';
import { csrfMatches, stillSignsIn } from '../../protocol/sessions.js';
import { headerDisowns, type PageAuth } from '../page-auth.js';
import type { RateLimits } from '../rate-limits.js';
import { perIp } from './limits.js';
import { step, type SharedStep } from '../pipeline.js';

/** Small forms only: a code, a password, a reason (the deny reason is capped at 500 characters). */
export const MAX_FORM_BYTES = 8 * 1024;

export const page: SharedStep = step('page', (x) => {
  x.page = true;
});

/** The signed-in approver, if the cookie names a live session. */
export function session(auth: PageAuth): SharedStep {
  return step('session', async (x) => {
    const value = auth.cookieValue(x.req);
    if (value !== undefined) x.sessionCookie = value;
    const found = await auth.sessions.find(value);
    // A session whose way in was since removed from the configuration signs nobody in (§8.11),
    // nor one the authenticating proxy in front no longer vouches for.
    if (found && stillSignsIn(auth.settings, found) && !headerDisowns(auth, x.req, found)) {
      x.session = found;
      x.decision.user_id = found.userId;
    }
  });
}

/** `application/x-www-form-urlencoded`, size-capped while read. */
export const formBody: SharedStep = step('form', async (x) => {
  const type = x.req.headers['content-type'] ?? '';
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) {
    throw new ProtocolError(
      'invalid_request',
      'This form must be sent as application/x-www-form-urlencoded.',
    );
  }
  // Read as a JSON body is (body.ts): into one buffer, paused rather than destroyed when over, so
  // that the 413 reaches the browser before the connection closes.
  const { bytes, over, fragmented } = await readRequestBody(x.req, MAX_FORM_BYTES);
  if (fragmented) throw fragmentedBody(MAX_FORM_BYTES);
  if (over) {
    throw new ProtocolError('payload_too_large', `The form exceeds ${MAX_FORM_BYTES} bytes.`, {
      headers: { connection: 'close' },
    });
  }
  x.form = new URLSearchParams(bytes.toString('utf8'));
});

/**
 * Cross-site request forgery: the browser's `Origin` must be the issuer's, and the form must
 * carry the session's CSRF token (when there is a session; the sign-in form has none yet and
 * relies on the origin check plus SameSite cookies).
 */
export function sameOrigin(auth: PageAuth, options: { token: boolean }): SharedStep {
  return step('csrf', (x) => {
    const origin = x.req.headers.origin;
    if (origin !== auth.origin) {
      throw new ProtocolError(
        'unauthorized',
        'This form did not come from this site, so nothing was changed. Open the page again and retry.',
      );
    }
    if (options.token && (!x.session || !csrfMatches(x.session, x.form?.get('csrf')))) {
      throw new ProtocolError(
        'unauthorized',
        'This form has expired or was not issued to you, so nothing was changed. Open the page again and retry.',
      );
    }
  });
}

/**
 * The steps every page form POST starts with, in the order above: page → per-IP limit → session
 * → form body → same origin (+ the session's CSRF token when `token`, i.e. for a signed-in form).
 */
export function pageForm(auth: PageAuth, limits: RateLimits, options: { token: boolean }): SharedStep[] {
  return [page, perIp(limits), session(auth), formBody, sameOrigin(auth, options)];
}
