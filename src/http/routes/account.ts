/**
 * `{issuer}/account` (issue 11): the signed-in user's own page. Its passkeys section lists their
 * passkeys and adds or removes one (views/account-passkeys.ts; the rules are
 * protocol/passkey-account.ts). Adding and removing are POST forms with the session's CSRF token
 * that carry the WebAuthn answers the page script collected; the page is re-rendered with the
 * outcome.
 */
import { addPasskey, removePasskey, type AccountChange } from '../../protocol/passkey-account.js';
import { enrolmentNeeds, type Passkeys } from '../../protocol/passkeys.js';
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml, htmlPage, sendHtml } from '../html.js';
import type { PageAuth } from '../page-auth.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { formBody, page, sameOrigin, session } from '../steps/page.js';
import { passkeySection } from '../views/account-passkeys.js';
import { message, whoAmI } from '../views/device.js';
import { PASSKEY_PAGE_HEADERS, PASSKEY_SCRIPT_TAG } from '../views/passkey-script.js';

export interface AccountRouteOptions {
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly passkeys: Passkeys;
  readonly serverName: string;
}

export function accountRoutes(
  router: Router,
  { auth, limits, passkeys, serverName }: AccountRouteOptions,
): void {
  const title = `Your account — ${serverName}`;

  const render = (x: Exchange, s: SessionRecord, status: number, note?: string): void => {
    const list = passkeys.list(s.userId);
    const fresh = auth.sessions.isFresh(s, auth.settings.freshAuthMs);
    const parts = [`<h1>${escapeHtml(title)}</h1>`, whoAmI(s)];
    if (note) parts.push(note);
    parts.push(
      passkeySection({
        session: s,
        passkeys: list,
        available: passkeys.available,
        enrolment: enrolmentNeeds(list.length > 0, fresh),
      }),
      PASSKEY_SCRIPT_TAG,
    );
    sendHtml(x.res, status, htmlPage(title, parts.join('\n')), PASSKEY_PAGE_HEADERS);
  };

  /** The outcome of an add or remove, as the account page with a message. */
  const outcome = (
    x: Exchange,
    s: SessionRecord,
    change: AccountChange,
    done: (name: string) => string,
  ): void => {
    if (change.ok) {
      render(x, s, 200, message('ok', done(change.passkey.name)));
      return;
    }
    x.decision.outcome = 'deny';
    x.decision.reason = change.reason;
    render(x, s, change.status, message('error', `${change.reason} Nothing was changed.`));
  };

  router.add('GET', '/account', [
    page,
    perIp(limits),
    session(auth),
    step('render', (x) => {
      if (!x.session) {
        sendHtml(
          x.res,
          200,
          htmlPage(
            title,
            `<h1>${escapeHtml(title)}</h1>
<p><a id="sign-in-link" href="/sign-in?return=%2Faccount">Sign in</a> to see your account.</p>`,
          ),
        );
        return;
      }
      render(x, x.session, 200);
    }),
  ]);

  const signedIn = [page, perIp(limits), session(auth), formBody, sameOrigin(auth, { token: true })];

  router.add('POST', '/account/passkeys', [
    ...signedIn,
    step('add', async (x) => {
      const s = need(x.session, 'session');
      const fresh = auth.sessions.isFresh(s, auth.settings.freshAuthMs);
      outcome(
        x,
        s,
        await addPasskey(passkeys, s, fresh, need(x.form, 'form')),
        (n) => `Passkey "${n}" added.`,
      );
    }),
  ]);

  router.add('POST', '/account/passkeys/remove', [
    ...signedIn,
    step('remove', async (x) => {
      const s = need(x.session, 'session');
      outcome(x, s, await removePasskey(passkeys, s, need(x.form, 'form')), (n) => `Passkey "${n}" removed.`);
    }),
  ]);
}
