/**
 * `GET {issuer}/approvals` (issue 11): the signed-in approver's inbox of open requests addressed
 * to them (src/protocol/inbox.ts), and the per-call approvals waiting for them (issue 16 §1;
 * each card links to its own page, routes/per-call.ts). It only lists: each card opens the request in the device
 * page's request view (POST /device), and the decision goes through the same Approve and Deny
 * steps, with the same Origin, CSRF, fresh-authentication and content-hash checks.
 */
import { inboxPage } from '../../protocol/inbox.js';
import { requestTimeLeft, type TimeLeft } from '../../protocol/approval-expiry.js';
import { decisionRefusal, type DeviceRequest } from '../../protocol/device.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { requestWarnings } from '../../protocol/request-warnings.js';
import { escapeHtml, htmlPage, sendHtml, signInLink } from '../html.js';
import type { PageAuth } from '../page-auth.js';
import { step } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, session } from '../steps/page.js';
import { whoAmI } from '../views/device.js';
import { inboxView } from '../views/inbox.js';
import { perCallCard, perCallSection } from '../views/per-call.js';
import { perCallInbox } from '../../protocol/per-call.js';
import { partiesOf } from './per-call.js';

export interface ApprovalsRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly auth: PageAuth;
  /** The name users know the service by (discovery's provider_name). */
  readonly serverName: string;
}

export function approvalsRoutes(
  router: Router,
  { ctx, limits, auth, serverName }: ApprovalsRouteOptions,
): void {
  const title = `Your approvals — ${serverName}`;
  router.add('GET', '/approvals', [
    page,
    perIp(limits),
    session(auth),
    step('inbox', async (x) => {
      const s = x.session;
      const body = [`<h1>${escapeHtml(title)}</h1>`];
      if (!s) {
        body.push(
          '<p>Requests from AI agents that wait for your decision are listed here once you sign in.</p>',
          signInLink('/approvals'),
        );
      } else {
        const cursor = (x.url.searchParams.get('before') ?? '').slice(0, 100) || null;
        const listed = await inboxPage(ctx, s.userId, cursor);
        const now = ctx.clock.now();
        const calls: string[] = [];
        const waiting = await perCallInbox(ctx, s.userId);
        for (const r of waiting.calls) {
          calls.push(perCallCard(r, await partiesOf(ctx, r, serverName), now));
        }
        const timesLeft = new Map<DeviceRequest, TimeLeft | undefined>();
        for (const r of listed.requests) timesLeft.set(r, await requestTimeLeft(ctx, r));
        body.push(
          whoAmI(s),
          perCallSection(calls, waiting.more),
          inboxView(
            s,
            listed,
            (r) => requestWarnings(ctx, r, serverName).length,
            (r) => {
              const time = timesLeft.get(r);
              return time && { time, canExtend: decisionRefusal(r, s.userId) === undefined };
            },
          ),
          '<p><a href="/device">Enter a code from an agent</a></p>',
        );
      }
      sendHtml(x.res, 200, htmlPage(title, body.join('\n')));
    }),
  ]);
}
