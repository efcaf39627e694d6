/**
 * The WebAuthn side of the pages (issue 11): the script, and the JSON endpoints its forms fetch
 * ceremony options from, each a POST from this origin (Origin checked) carrying the session's
 * CSRF token once there is a session:
 *
 *   GET  /assets/webauthn.js               the page script (@simplewebauthn/browser + client)
 *   POST /sign-in/passkey/options          usernameless sign-in (local accounts)
 *   POST /sign-in/passkey                  … its answer: a new session, auth method `passkey`
 *   POST /account/passkeys/options         adding a passkey (and confirming with an existing one)
 *   POST /account/passkeys/remove/options  confirming a removal
 *   POST /device/passkey-options           §8.11 presence, bound to an approval and its form
 *
 * The options are JSON; what they lead to are plain form POSTs (routes/account.ts, device.ts).
 */
import type { ServerResponse } from 'node:http';
import { ProtocolError } from '../../errors.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { requestToDecide } from '../../protocol/inbox.js';
import { enrolmentOptions, removalOptions } from '../../protocol/passkey-account.js';
import { mayStillSignIn, type CeremonyScope, type Passkeys } from '../../protocol/passkeys.js';
import { clientNetwork } from '../../util/client-network.js';
import { webauthnScript, WEBAUTHN_SCRIPT_PATH } from '../assets/webauthn.js';
import { redirect } from '../html.js';
import { safeReturn, type PageAuth } from '../page-auth.js';
import { need, step } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { formBody, pageForm, sameOrigin, session } from '../steps/page.js';
import type { PresenceGate } from '../steps/presence.js';

export interface PasskeyRouteOptions {
  readonly ctx: ProtocolContext;
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly passkeys: Passkeys;
  readonly presence: PresenceGate;
}

/** A sign-in ceremony is counted against the client's address (there is no session yet). */
function signInScope(clientIp: string): CeremonyScope {
  // Per client network (an IPv6 client's /64): the open challenges per owner are bounded, and
  // one client must not hold a bound's worth from each of its addresses.
  return { purpose: 'sign-in', owner: `ip:${clientNetwork(clientIp)}`, userId: null, binding: 'sign-in' };
}

export function passkeyRoutes(
  router: Router,
  { ctx, auth, limits, passkeys, presence }: PasskeyRouteOptions,
): void {
  const script = webauthnScript();
  router.add('GET', WEBAUTHN_SCRIPT_PATH, [
    perIp(limits),
    step('script', (x) => {
      x.res.writeHead(200, {
        'content-type': 'text/javascript; charset=utf-8',
        'content-length': Buffer.byteLength(script),
        'x-content-type-options': 'nosniff',
        'cache-control': 'no-cache',
      });
      x.res.end(script);
    }),
  ]);

  const signedIn = [perIp(limits), session(auth), formBody, sameOrigin(auth, { token: true })];

  router.add('POST', '/account/passkeys/options', [
    ...signedIn,
    step('options', async (x) => {
      const s = need(x.session, 'session');
      const fresh = auth.sessions.isFresh(s, auth.settings.freshAuthMs);
      sendJson(x.res, 200, await enrolmentOptions(passkeys, s, fresh, need(x.form, 'form').entries()));
    }),
  ]);

  router.add('POST', '/account/passkeys/remove/options', [
    ...signedIn,
    step('options', async (x) => {
      const id = need(x.form, 'form').get('id') ?? '';
      sendJson(x.res, 200, await removalOptions(passkeys, need(x.session, 'session'), id));
    }),
  ]);

  router.add('POST', '/device/passkey-options', [
    ...signedIn,
    step('options', async (x) => {
      const s = need(x.session, 'session');
      const form = need(x.form, 'form');
      const request = await requestToDecide(
        ctx,
        { approvalId: form.get('approval'), code: form.get('code') ?? '' },
        s.userId,
      );
      if (!request) {
        throw new ProtocolError(
          'approval_not_found',
          'No open request of yours has this code or id any more.',
        );
      }
      sendJson(x.res, 200, { assertion: await presence.options(x, s, request) });
    }),
  ]);
}

/**
 * Passkey sign-in, registered by routes/sign-in.ts when there are local accounts; `show` renders
 * the sign-in page with a message.
 */
export function passkeySignInRoutes(
  router: Router,
  options: {
    readonly auth: PageAuth;
    readonly limits: RateLimits;
    readonly passkeys: Passkeys;
    readonly show: (res: ServerResponse, status: number, back: string, message: string) => void;
  },
): void {
  const { auth, limits, passkeys, show } = options;
  router.add('POST', '/sign-in/passkey/options', [
    perIp(limits),
    formBody,
    sameOrigin(auth, { token: false }),
    step('options', async (x) => {
      sendJson(x.res, 200, { assertion: await passkeys.assertionOptions(signInScope(x.clientIp)) });
    }),
  ]);

  router.add('POST', '/sign-in/passkey', [
    ...pageForm(auth, limits, { token: false }),
    step('sign-in', async (x) => {
      const form = need(x.form, 'form');
      const back = safeReturn(form.get('return'));
      const result = await passkeys.verifyAssertion(signInScope(x.clientIp), form.get('assertion') ?? '');
      const refusal = !result.ok
        ? `Signing in with that passkey did not work. ${result.reason}`
        : !mayStillSignIn(auth.settings, result.passkey.userId)
          ? 'This passkey belongs to an account that can no longer sign in here.'
          : undefined;
      if (refusal || !result.ok) {
        x.decision.outcome = 'deny';
        x.decision.reason = 'passkey sign-in refused';
        show(x.res, 400, back, refusal ?? '');
        return;
      }
      const { cookieValue } = await auth.sessions.start(result.passkey.userId, 'passkey', x.sessionCookie);
      x.decision.user_id = result.passkey.userId;
      redirect(x.res, back, { 'set-cookie': auth.cookie(cookieValue) });
    }),
  ]);
}
