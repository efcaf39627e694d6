/**
 * `GET /sign-in/oidc` and `GET /sign-in/oidc/callback` (issue 11): approvers sign in at the
 * organisation's OpenID Connect provider. The first sends the browser there with a new pending
 * sign-in; the second checks the answer (src/protocol/oidc.ts) and starts a session (a new id,
 * the old one ended), then returns to the local path the sign-in was started for.
 *
 * The browser cookie that binds a pending sign-in to its browser is random, `HttpOnly`,
 * `SameSite=Lax` (the provider's redirect back is a top-level GET, so it is sent), lives as long as
 * a pending sign-in, and is reused while valid so sign-ins started in two tabs both finish.
 */
import { randomBytes } from 'node:crypto';
import { OidcUnavailable, PENDING_TTL_MS } from '../../protocol/oidc-outcomes.js';
import type { OidcSignIn } from '../../protocol/oidc.js';
import { redirect } from '../html.js';
import { readCookie, safeReturn, type PageAuth } from '../page-auth.js';
import { step } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, session } from '../steps/page.js';
import { showSignIn } from './sign-in.js';

export interface OidcRouteOptions {
  readonly auth: PageAuth;
  readonly oidc: OidcSignIn;
  readonly limits: RateLimits;
  readonly serverName: string;
}

const STATUS = {
  unknown_state: 400,
  provider_error: 403,
  acr_not_allowed: 403,
  not_fresh: 403,
  no_user_id: 403,
  email_not_verified: 403,
  invalid_response: 502,
  unavailable: 503,
} as const;

export function oidcRoutes(router: Router, { auth, oidc, limits, serverName }: OidcRouteOptions): void {
  const cookieName = (): string => (auth.secure ? '__Host-aap_oidc' : 'aap_oidc');

  router.add('GET', '/sign-in/oidc', [
    page,
    perIp(limits),
    step('oidc-start-limit', (x) => limits.oidcStart(x.clientIp)),
    step('start', async (x) => {
      const back = safeReturn(x.url.searchParams.get('return'));
      const fresh = x.url.searchParams.get('fresh') === '1';
      const existing = readCookie(x.req, cookieName());
      const browser =
        existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)
          ? existing
          : randomBytes(32).toString('base64url');
      let target: URL;
      try {
        target = await oidc.begin(back, fresh, browser);
      } catch (err) {
        if (!(err instanceof OidcUnavailable)) throw err;
        x.decision.outcome = 'error';
        x.decision.reason = 'oidc provider unavailable';
        showSignIn(x.res, 503, auth, serverName, back, {
          message: `${oidc.name} could not be reached, so you cannot sign in there right now. Try again in a minute.`,
        });
        return;
      }
      const maxAge = Math.floor(PENDING_TTL_MS / 1000);
      redirect(x.res, target.href, {
        'set-cookie': `${cookieName()}=${browser}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${auth.secure ? '; Secure' : ''}`,
      });
    }),
  ]);

  router.add('GET', '/sign-in/oidc/callback', [
    page,
    perIp(limits),
    session(auth),
    step('finish', async (x) => {
      const result = await oidc.finish(x.url.searchParams, readCookie(x.req, cookieName()));
      if (result.kind === 'refused') {
        x.decision.outcome = result.reason === 'unavailable' ? 'error' : 'deny';
        x.decision.reason = `oidc: ${result.reason}`;
        showSignIn(x.res, STATUS[result.reason], auth, serverName, result.returnTo, {
          message: result.message,
        });
        return;
      }
      const { cookieValue } = await auth.sessions.start(result.userId, 'oidc', x.sessionCookie, {
        authenticatedAt: result.authenticatedAt,
        claims: { acr: result.acr, amr: result.amr },
      });
      x.decision.user_id = result.userId;
      redirect(x.res, result.returnTo, { 'set-cookie': auth.cookie(cookieValue) });
    }),
  ]);
}
