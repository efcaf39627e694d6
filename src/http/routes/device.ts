/**
 * `{issuer}/device`, the §7.1 verification URI. Without sign-in configured it is read-only: a user
 * sees what a code's request asks and the operator decides. With `sign_in:` the approver signs in,
 * enters or confirms the code (a pre-filled `?code=` is shown for confirmation, never accepted
 * silently: only a POST with the session's CSRF token opens a request), reads it with its
 * warnings (§8.10), and approves or denies with POST forms bound to a hash of what was shown.
 * Approve carries the approver's choices (which capabilities, narrower limits, an expiry:
 * views/decision-form.ts, checked by protocol/decision.ts), needs a fresh sign-in (§8.11) and,
 * for anything that can change data, proof of presence: a passkey assertion bound to this
 * approval and these choices (§8.11; steps/presence.ts), which also counts as the fresh
 * authentication. The inbox (routes/approvals.ts) opens its requests here too: CIBA ones by id,
 * only for their addressee.
 */
import type { Exchange } from '../pipeline.js';
import { DevicePage, deviceTitle } from '../device-page.js';
import { ProtocolError } from '../../errors.js';
import { approve, deny } from '../../protocol/approval-decisions.js';
import { displayText } from '../../protocol/approvals.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import { originFromSession, type DecisionOrigin } from '../../protocol/decision-record.js';
import { recordOpened } from '../../protocol/inbox.js';

import type { ProtocolContext } from '../../protocol/context.js';
import { contentHash, decisionRefusal, type DeviceRequest } from '../../protocol/device.js';
import type { SessionRecord } from '../../storage/types.js';
import { sendHtml, signInLink } from '../html.js';
import type { PageAuth } from '../page-auth.js';
import { need, step } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';
import { page, pageForm, session } from '../steps/page.js';
import type { PresenceGate } from '../steps/presence.js';
import { legacyDevicePage } from '../views/device-read-only.js';
import { approverChoice } from '../decision-choices.js';
import { approvedText } from '../views/decision-form.js';
import { codeForm, message, whoAmI } from '../views/device.js';

import { inboxLink } from '../views/inbox.js';

import { extendApproval } from '../../protocol/approval-expiry.js';
import { iso } from '../../protocol/context.js';

/** The decision record's origin (issue 16): this session, this request, the hash shown. */
function decisionOrigin(x: Exchange, s: SessionRecord, r: DeviceRequest): DecisionOrigin {
  return originFromSession(s, { ip: x.clientIp, userAgent: x.req.headers['user-agent'] }, contentHash(r));
}

export interface DeviceRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly auth: PageAuth;
  /** The name users know the service by (discovery's provider_name). */
  readonly serverName: string;
  /** §8.11 proof of presence at Approve. */
  readonly presence: PresenceGate;
}

export function deviceRoutes(
  router: Router,
  { ctx, limits, auth, serverName, presence }: DeviceRouteOptions,
): void {
  const title = deviceTitle(serverName);
  if (!auth.enabled) {
    router.add('GET', '/device', [
      perIp(limits),
      step('page', async (x) => {
        sendHtml(x.res, 200, await legacyDevicePage(ctx, title, serverName, x.url.searchParams.get('code')));
      }),
    ]);
    return;
  }

  const view = new DevicePage({ ctx, auth, presence, limits, serverName });

  const decisionSteps = pageForm(auth, limits, { token: true });

  router.add('GET', '/device', [
    page,
    perIp(limits),
    session(auth),
    step('render', (x) => {
      const code = (x.url.searchParams.get('code') ?? '').slice(0, 32);
      const s = x.session;
      if (!s) {
        const back = code ? `/device?code=${encodeURIComponent(code)}` : '/device';
        view.send(x, 200, [
          '<p><strong>You are authorizing an AI agent.</strong> An agent showed you a code and asked you to approve what it wants to do.</p>',
          signInLink(back),
        ]);
        return;
      }
      view.send(x, 200, [
        whoAmI(s),
        inboxLink(),
        code
          ? message(
              'notice',
              'Check that this code is exactly the one your agent shows you before you continue.',
              'confirm-code',
            )
          : '<p>Enter the code the agent showed you.</p>',
        codeForm(s, code),
      ]);
    }),
  ]);

  router.add('POST', '/device', [
    ...decisionSteps,
    step('show', async (x) => {
      const s = need(x.session, 'session');
      const r = await view.lookUp(x, s);
      if (!r) return;
      await recordOpened(ctx, r, s.userId);
      await view.showRequest(x, s, r, 200);
    }),
  ]);

  router.add('POST', '/device/approve', [
    ...decisionSteps,
    step('approve', async (x) => {
      const signedIn = need(x.session, 'session');
      const r = await view.lookUp(x, signedIn);
      if (!r || !(await view.unchanged(x, signedIn, r))) return;
      const choice = approverChoice(need(x.form, 'form'), r);
      if (!choice.ok) return view.refuse(x, signedIn, r, 400, choice.problem, 'decision form refused');
      const refusal = decisionRefusal(r, signedIn.userId);
      if (refusal) return view.refuse(x, signedIn, r, 403, refusal);
      // Partial approval: only what is approved needs presence (§8.11).
      const approving = r.capabilities.filter((c) => choice.decision.capabilities.includes(c.name));
      const proof = await presence.check(x, signedIn, r, approving);
      if (proof.kind === 'refused') return view.refuse(x, signedIn, r, proof.status, proof.text);
      const fresh = await view.freshSession(x, signedIn, r, proof);
      if (!fresh) return;
      const s = fresh.session;
      try {
        const decided = await approve(ctx, r.approvalId, {
          userId: s.userId,
          actor: s.userId,
          origin: decisionOrigin(x, s, r),
          ...choice.decision,
        });
        view.send(x, 200, [whoAmI(s), message('ok', approvedText(r, decided)), inboxLink()], fresh.headers);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        await view.showRequest(x, s, r, err.status, message('error', `${err.message} Nothing was granted.`));
      }
    }),
  ]);

  // Issue 16 §5 (WCAG 2.2.1): one more lifetime for a request near its end, within the ceiling.
  router.add('POST', '/device/extend', [
    ...decisionSteps,
    step('extend', async (x) => {
      const s = need(x.session, 'session');
      const r = await view.lookUp(x, s);
      if (!r) return;
      let extended;
      try {
        extended = await extendApproval(ctx, r, s.userId, s.authMethod);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        x.decision.outcome = 'deny';
        x.decision.reason = err.message;
        await view.showRequest(x, s, r, err.status, message('error', err.message));
        return;
      }
      const fresh = { ...r, expiresAt: extended.expiresAt };
      await view.showRequest(
        x,
        s,
        fresh,
        200,
        message('ok', `Extended: the request is open until ${iso(extended.expiresAt) ?? ''}.`),
      );
    }),
  ]);

  router.add('POST', '/device/deny', [
    ...decisionSteps,
    step('deny', async (x) => {
      const s = need(x.session, 'session');
      const r = await view.lookUp(x, s);
      if (!r || !(await view.unchanged(x, s, r))) return;
      const refusal = decisionRefusal(r, s.userId);
      if (refusal) {
        await view.showRequest(x, s, r, 403, message('error', refusal));
        return;
      }
      const reason = displayText((need(x.form, 'form').get('reason') ?? '').slice(0, 500), 'reason');
      await deny(ctx, r.approvalId, {
        ...(reason ? { reason } : {}),
        actor: s.userId,
        origin: decisionOrigin(x, s, r),
      });
      view.send(x, 200, [
        whoAmI(s),
        message(
          'ok',
          `Denied. The agent ${plainText(r.agentName, DISPLAY_LIMITS.name).text} was told no. You can close this page.`,
        ),
        inboxLink(),
      ]);
    }),
  ]);
}
