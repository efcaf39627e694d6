/**
 * `GET {issuer}/account` (issue 11): the signed-in user's page, made of sections that other route
 * modules contribute (their agents and hosts: routes/account-agents.ts; their passkeys:
 * routes/account-passkeys.ts). This module only
 * signs the visitor in and lays the sections out; each section's POST routes live with it and show
 * their outcome through the `AccountPage` returned here.
 */
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml, htmlPage, sendHtml, signInLink } from '../html.js';
import type { PageAuth } from '../page-auth.js';
import { step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, session } from '../steps/page.js';
import { whoAmI } from '../views/device.js';

/** One section of the page, rendered for the signed-in user. */
export type AccountSection = (x: Exchange, session: SessionRecord) => Promise<string>;

export interface AccountPage {
  /** The whole page, with `note` (an outcome message, HTML) above the sections. */
  show(x: Exchange, session: SessionRecord, status: number, note?: string): Promise<void>;
}

export interface AccountRouteOptions {
  readonly auth: PageAuth;
  readonly limits: RateLimits;
  readonly serverName: string;
  readonly sections: readonly AccountSection[];
  /** Headers of the signed-in page (the passkey section's script needs its own CSP). */
  readonly headers?: Readonly<Record<string, string>>;
}

export function accountRoutes(router: Router, options: AccountRouteOptions): AccountPage {
  const title = `Your account — ${options.serverName}`;
  const accountPage: AccountPage = {
    async show(x, s, status, note) {
      const parts = [`<h1>${escapeHtml(title)}</h1>`, whoAmI(s)];
      if (note) parts.push(note);
      for (const section of options.sections) parts.push(await section(x, s));
      sendHtml(x.res, status, htmlPage(title, parts.join('\n')), options.headers ?? {});
    },
  };
  router.add('GET', '/account', [
    page,
    perIp(options.limits),
    session(options.auth),
    step('render', async (x) => {
      if (!x.session) {
        sendHtml(
          x.res,
          200,
          htmlPage(
            title,
            `<h1>${escapeHtml(title)}</h1>
<p>Sign in to see the agents that act for you, what they may do, and what they did.</p>
${signInLink('/account')}`,
          ),
        );
        return;
      }
      await accountPage.show(x, x.session, 200);
    }),
  ]);
  return accountPage;
}
