/**
 * The passkeys section of `{issuer}/account` (issue 11, §8.11): the user's passkeys, and adding or
 * removing one (views/account-passkeys.ts; the rules are protocol/passkey-account.ts). Adding and
 * removing are POST forms with the session's CSRF token that carry the WebAuthn answers the page
 * script collected; the account page is shown again with the outcome.
 */
import { addPasskey, removePasskey, type AccountChange } from '../../protocol/passkey-account.js';
import { enrolmentNeeds, type Passkeys } from '../../protocol/passkeys.js';
import type { SessionRecord } from '../../storage/types.js';
import type { PageAuth } from '../page-auth.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { pageForm } from '../steps/page.js';
import { passkeySection } from '../views/account-passkeys.js';
import { message } from '../views/device.js';
import { PASSKEY_SCRIPT_TAG } from '../views/passkey-script.js';
import type { AccountPage, AccountSection } from './account.js';

export function passkeysAccountSection(auth: PageAuth, passkeys: Passkeys): AccountSection {
  return async (_x, s) => {
    const list = await passkeys.list(s.userId);
    const fresh = auth.sessions.isFresh(s, auth.settings.freshAuthMs);
    return [
      passkeySection({
        session: s,
        passkeys: list,
        available: passkeys.available,
        enrolment: enrolmentNeeds(list.length > 0, fresh, passkeys.firstNeedsCode),
      }),
      PASSKEY_SCRIPT_TAG,
    ].join('\n');
  };
}

export interface AccountPasskeyRouteOptions {
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly passkeys: Passkeys;
  readonly page: AccountPage;
}

export function accountPasskeyRoutes(
  router: Router,
  { auth, limits, passkeys, page: accountPage }: AccountPasskeyRouteOptions,
): void {
  /** The outcome of an add or remove, as the account page with a message. */
  const outcome = (
    x: Exchange,
    s: SessionRecord,
    change: AccountChange,
    done: (name: string) => string,
  ): Promise<void> => {
    if (change.ok) return accountPage.show(x, s, 200, message('ok', done(change.passkey.name)));
    x.decision.outcome = 'deny';
    x.decision.reason = change.reason;
    return accountPage.show(x, s, change.status, message('error', `${change.reason} Nothing was changed.`));
  };

  const signedIn = pageForm(auth, limits, { token: true });

  router.add('POST', '/account/passkeys', [
    ...signedIn,
    step('add', async (x) => {
      const s = need(x.session, 'session');
      const fresh = auth.sessions.isFresh(s, auth.settings.freshAuthMs);
      await outcome(
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
      await outcome(
        x,
        s,
        await removePasskey(passkeys, s, need(x.form, 'form')),
        (n) => `Passkey "${n}" removed.`,
      );
    }),
  ]);
}
