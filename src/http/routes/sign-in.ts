/**
 * `GET/POST /sign-in` and `POST /sign-out` (issue 11): local accounts (password, then TOTP when
 * the account has one), a "Sign in with …" button for the OIDC provider (routes/oidc.ts), and the
 * trusted header of an authenticating proxy, which signs in without a form; and, for local
 * accounts, a passkey (routes/passkeys.ts). Every sign-in starts a new session (the id is rotated;
 * the old one ends).
 */
import type { ServerResponse } from 'node:http';
import type { Passkeys } from '../../protocol/passkeys.js';
import { escapeHtml, htmlPage, redirect, sendHtml } from '../html.js';
import { safeReturn, type PageAuth } from '../page-auth.js';
import { need, step } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, pageForm, session } from '../steps/page.js';
import { oidcButton } from '../views/oidc.js';
import { passkeySignInForm } from '../views/account-passkeys.js';
import { PASSKEY_PAGE_HEADERS, PASSKEY_SCRIPT_TAG } from '../views/passkey-script.js';
import { passkeySignInRoutes } from './passkeys.js';

export interface SignInRouteOptions {
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly serverName: string;
  /** Passkey sign-in (local accounts), when passkeys work at the issuer. */
  readonly passkeys?: Passkeys;
}

/**
 * The sign-in page, with a message above the ways to sign in (other sign-in routes use it too);
 * with `passkeys` (local accounts, at an issuer where WebAuthn works) also the passkey form and
 * the one script that runs its ceremony.
 */
export function showSignIn(
  res: ServerResponse,
  status: number,
  auth: PageAuth,
  serverName: string,
  back: string,
  {
    message,
    userId = '',
    passkeys,
    headers = {},
  }: {
    message?: string;
    userId?: string;
    passkeys?: Passkeys;
    headers?: Readonly<Record<string, string>>;
  } = {},
): void {
  const title = `Sign in — ${serverName}`;
  // Read per page: whether passkeys work depends on the issuer, known once the server listens.
  const withPasskey = passkeys !== undefined && passkeys.available && auth.hasLocal;
  const body =
    signInPage(auth, title, back, message, userId) +
    (withPasskey ? `\n${passkeySignInForm(back)}\n${PASSKEY_SCRIPT_TAG}` : '');
  sendHtml(res, status, htmlPage(title, body), { ...(withPasskey ? PASSKEY_PAGE_HEADERS : {}), ...headers });
}

export function signInRoutes(
  router: Router,
  { auth, limits, serverName, passkeys }: SignInRouteOptions,
): void {
  const show = (res: ServerResponse, status: number, back: string, message?: string, userId = ''): void => {
    showSignIn(res, status, auth, serverName, back, {
      ...(message ? { message } : {}),
      userId,
      ...(passkeys ? { passkeys } : {}),
    });
  };
  if (passkeys !== undefined && auth.hasLocal) passkeySignInRoutes(router, { auth, limits, passkeys, show });

  router.add('GET', '/sign-in', [
    page,
    perIp(limits),
    session(auth),
    step('sign-in', async (x) => {
      const back = safeReturn(x.url.searchParams.get('return'));
      const trusted = auth.trustedUser(x.req);
      if (trusted !== undefined) {
        const { cookieValue } = await auth.sessions.start(trusted, 'trusted_header', x.sessionCookie);
        x.decision.user_id = trusted;
        redirect(x.res, back, { 'set-cookie': auth.cookie(cookieValue) });
        return;
      }
      show(x.res, 200, back);
    }),
  ]);

  router.add('POST', '/sign-in', [
    ...pageForm(auth, limits, { token: false }),
    step('sign-in', async (x) => {
      const form = need(x.form, 'form');
      const back = safeReturn(form.get('return'));
      const userId = (form.get('user_id') ?? '').trim().slice(0, 200);
      if (!auth.hasLocal) {
        show(x.res, 400, back, 'This server has no local accounts.');
        return;
      }
      const result = await auth.local.attempt(
        userId,
        form.get('password') ?? '',
        form.get('totp') ?? '',
        x.clientIp,
      );
      if (result.kind === 'throttled') {
        x.decision.outcome = 'deny';
        x.decision.reason = 'sign-in throttled';
        const minutes = Math.ceil(result.retryAfterSec / 60);
        showSignIn(x.res, 429, auth, serverName, back, {
          message: `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
          userId,
          ...(passkeys ? { passkeys } : {}),
          headers: { 'retry-after': String(result.retryAfterSec) },
        });
        return;
      }
      if (result.kind === 'wrong') {
        x.decision.outcome = 'deny';
        x.decision.reason = 'wrong credentials';
        show(x.res, 400, back, 'That user name, password or one-time code is not right.', userId);
        return;
      }
      const { cookieValue } = await auth.sessions.start(result.userId, result.method, x.sessionCookie, {
        credentialTag: result.credentialTag,
      });
      x.decision.user_id = result.userId;
      redirect(x.res, back, { 'set-cookie': auth.cookie(cookieValue) });
    }),
  ]);

  router.add('POST', '/sign-out', [
    ...pageForm(auth, limits, { token: true }),
    step('sign-out', async (x) => {
      if (x.sessionCookie !== undefined) await auth.sessions.end(x.sessionCookie);
      redirect(x.res, '/sign-in', { 'set-cookie': auth.clearCookie() });
    }),
  ]);
}

function signInPage(auth: PageAuth, title: string, back: string, message?: string, userId = ''): string {
  const parts = [`<h1>${escapeHtml(title)}</h1>`];
  if (message) parts.push(`<p id="outcome" class="error" role="alert">${escapeHtml(message)}</p>`);
  const oidc = auth.settings.oidc;
  if (oidc) {
    parts.push('<p>Sign in to review and decide what AI agents ask to do for you.</p>');
    parts.push(oidcButton(oidc.name, back));
    if (!auth.hasLocal) return parts.join('\n');
    parts.push('<h2>Or with an account of this server</h2>');
  }
  if (!auth.hasLocal) {
    parts.push(
      auth.settings.trustedHeader
        ? "<p>This server signs you in through your organisation's sign-in. Open it through that address to continue.</p>"
        : '<p>Signing in is not enabled on this server: the operator decides agent requests.</p>',
    );
    return parts.join('\n');
  }
  if (!oidc) parts.push('<p>Sign in to review and decide what AI agents ask to do for you.</p>');
  parts.push(`<form method="post" action="/sign-in">
<input type="hidden" name="return" value="${escapeHtml(back)}">
<label for="user_id">User name</label>
<input id="user_id" name="user_id" value="${escapeHtml(userId)}" autocomplete="username" required maxlength="200">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
<label for="totp">One-time code (only if your account uses one)</label>
<input id="totp" name="totp" inputmode="numeric" autocomplete="one-time-code" maxlength="8">
<button type="submit">Sign in</button>
</form>`);
  return parts.join('\n');
}
