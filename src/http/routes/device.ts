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
import { ProtocolError } from '../../errors.js';
import { approve, deny } from '../../protocol/approval-decisions.js';
import { displayText } from '../../protocol/approvals.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import { originFromSession, type DecisionOrigin } from '../../protocol/decision-record.js';
import { lookUpCibaRequest, recordOpened } from '../../protocol/inbox.js';
import { requestWarnings } from '../../protocol/request-warnings.js';
import type { ProtocolContext } from '../../protocol/context.js';
import {
  contentHash,
  decisionRefusal,
  lookUpDeviceRequest,
  type DeviceRequest,
} from '../../protocol/device.js';
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml, htmlPage, sendHtml } from '../html.js';
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
import { codeForm, decisionForms, message, requestDetails, whoAmI } from '../views/device.js';
import { oidcFreshNotice, oidcReauthNow, oidcStartPath } from '../views/oidc.js';
import { inboxLink } from '../views/inbox.js';
import { timeLeftView } from '../views/time-left.js';
import { extendApproval, requestTimeLeft } from '../../protocol/approval-expiry.js';
import { iso } from '../../protocol/context.js';

/** Where the approver finds this request again: its code's page, or the inbox for CIBA (§7.2). */
function pageOf(r: DeviceRequest): string {
  return r.method === 'ciba' ? '/approvals' : `/device?code=${encodeURIComponent(r.userCode)}`;
}

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
  const title = `Agent requests — ${serverName}`;
  const send = (
    x: Exchange,
    status: number,
    parts: string[],
    headers: Readonly<Record<string, string>> = {},
  ): void => {
    sendHtml(x.res, status, htmlPage(title, [`<h1>${escapeHtml(title)}</h1>`, ...parts].join('\n')), headers);
  };
  if (!auth.enabled) {
    router.add('GET', '/device', [
      perIp(limits),
      step('page', async (x) => {
        sendHtml(x.res, 200, await legacyDevicePage(ctx, title, serverName, x.url.searchParams.get('code')));
      }),
    ]);
    return;
  }

  /** The request with its decision forms, plus a message above it. */
  const showRequest = async (
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    status: number,
    note?: string,
  ): Promise<void> => {
    const refusal = decisionRefusal(r, s.userId);
    const parts = [whoAmI(s)];
    let headers: Readonly<Record<string, string>> = {};
    if (note) parts.push(note);
    parts.push(requestDetails(r, requestWarnings(ctx, r, serverName)));
    // WCAG 2.2.1: the time left, and Extend when little is left, for a user who may decide it.
    const left = await requestTimeLeft(ctx, r);
    if (left) parts.push(timeLeftView(left, refusal ? undefined : { session: s, request: r }));
    if (refusal) {
      parts.push(message('notice', refusal, 'cannot-decide'));
    } else {
      const proof = await presence.view(s, r);
      if (proof.html) parts.push(proof.html);
      headers = proof.headers;
      let reauth: 'password' | 'password+totp' | 'sign-in-again' | null = null;
      // The passkey Approve asks for is the fresh authentication too (§8.11): no password then.
      if (!proof.passkeyIsFreshAuth && !auth.sessions.isFresh(s, auth.settings.freshAuthMs)) {
        reauth =
          s.authMethod === 'trusted_header' || s.authMethod === 'oidc'
            ? 'sign-in-again'
            : auth.local.wantsTotp(s.userId)
              ? 'password+totp'
              : 'password';
      }
      const oidc = auth.settings.oidc;
      if (reauth === 'sign-in-again' && s.authMethod === 'oidc' && oidc) {
        parts.push(oidcFreshNotice(oidc.name, pageOf(r)));
      } else if (reauth === 'sign-in-again') {
        const back = pageOf(r);
        parts.push(
          `<p class="notice" id="fresh-auth">Your sign-in is older than allowed for approvals. <a href="/sign-in?return=${escapeHtml(encodeURIComponent(back))}">Sign in again</a> to approve.</p>`,
        );
      }
      parts.push(decisionForms(r, { session: s, hash: contentHash(r), reauth }));
    }
    send(x, status, parts, headers);
  };

  /**
   * The open request the form names, or the code form again with why not: by its code, or (from
   * the inbox) a CIBA request by its id, found only when it is addressed to this user.
   */
  const lookUp = async (x: Exchange, s: SessionRecord): Promise<DeviceRequest | undefined> => {
    const approvalId = need(x.form, 'form').get('approval');
    if (approvalId !== null) {
      const ciba = await lookUpCibaRequest(ctx, approvalId.slice(0, 100), s.userId);
      if (!ciba) {
        send(x, 404, [
          whoAmI(s),
          message(
            'error',
            'No open request of yours has that id. It may have expired or been decided already.',
          ),
          inboxLink(),
        ]);
      }
      return ciba;
    }
    const code = need(x.form, 'form').get('code') ?? '';
    const found = await lookUpDeviceRequest(ctx, code);
    if (found.kind === 'found') return found.request;
    const why =
      found.kind === 'not_found'
        ? `No open request has the code ${found.userCode}. It may have expired or been decided already.`
        : 'That is not a code of this server: codes are eight letters, like WDJB-MJHT.';
    send(x, 404, [
      whoAmI(s),
      message('error', why),
      codeForm(s, found.kind === 'not_found' ? found.userCode : ''),
    ]);
    return undefined;
  };

  /** The request as now stored must hash to what the form says was shown. */
  const unchanged = async (x: Exchange, s: SessionRecord, r: DeviceRequest): Promise<boolean> => {
    if (need(x.form, 'form').get('shown') === contentHash(r)) return true;
    await showRequest(
      x,
      s,
      r,
      409,
      message('error', 'This request changed since you saw it. Nothing was decided: review it again.'),
    );
    return false;
  };

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
        send(x, 200, [
          '<p><strong>You are authorizing an AI agent.</strong> An agent showed you a code and asked you to approve what it wants to do.</p>',
          `<p><a id="sign-in-link" href="/sign-in?return=${escapeHtml(encodeURIComponent(back))}">Sign in to continue</a></p>`,
        ]);
        return;
      }
      send(x, 200, [
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
      const r = await lookUp(x, s);
      if (!r) return;
      await recordOpened(ctx, r, s.userId);
      await showRequest(x, s, r, 200);
    }),
  ]);

  /** Approve refused before anything was decided: the request again, and why (`logged`: the decision record's reason). */
  const refuse = async (
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    status: number,
    why: string,
    logged = why,
  ): Promise<void> => {
    x.decision.outcome = 'deny';
    x.decision.reason = logged;
    await showRequest(x, s, r, status, message('error', `${why} Nothing was granted.`));
  };

  /**
   * The session Approve decides in (§8.11): a verified passkey, or a fresh sign-in, starts a new
   * one (its cookie in `headers`). A stale session re-authenticates here with its password (and
   * one-time code); an OIDC one is sent to its provider. Undefined: the page answered already.
   */
  const freshSession = async (
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    proof: { readonly kind: string },
  ): Promise<{ session: SessionRecord; headers: Record<string, string> } | undefined> => {
    if (proof.kind === 'verified') {
      const started = await auth.sessions.start(s.userId, 'passkey', x.sessionCookie);
      return { session: started.session, headers: { 'set-cookie': auth.cookie(started.cookieValue) } };
    }
    if (auth.sessions.isFresh(s, auth.settings.freshAuthMs)) return { session: s, headers: {} };
    const oidc = auth.settings.oidc;
    if (s.authMethod === 'oidc' && oidc) {
      // §8.11: back to the provider with max_age=0, then to this request. A page that moves on
      // by itself (Refresh), because the CSP's form-action stops a redirect out of this POST.
      const start = oidcStartPath(pageOf(r), true);
      x.decision.reason = 'fresh sign-in needed';
      send(x, 200, [whoAmI(s), oidcReauthNow(oidc.name, pageOf(r))], { refresh: `0; url=${start}` });
      return undefined;
    }
    if (s.authMethod === 'trusted_header' || s.authMethod === 'oidc') {
      await showRequest(
        x,
        s,
        r,
        403,
        message('error', 'Sign in again before approving. Nothing was granted.'),
      );
      return undefined;
    }
    const form = need(x.form, 'form');
    const result = await auth.local.attempt(
      s.userId,
      form.get('password') ?? '',
      form.get('totp') ?? '',
      x.clientIp,
    );
    if (result.kind !== 'ok') {
      const text =
        result.kind === 'throttled'
          ? 'Too many failed sign-ins. Try again later. Nothing was granted.'
          : 'That password or one-time code is not right. Nothing was granted.';
      await showRequest(x, s, r, result.kind === 'throttled' ? 429 : 400, message('error', text));
      return undefined;
    }
    // Re-authenticating is a sign-in: a new session, the old one ended.
    const started = await auth.sessions.start(s.userId, result.method, x.sessionCookie);
    return { session: started.session, headers: { 'set-cookie': auth.cookie(started.cookieValue) } };
  };

  router.add('POST', '/device/approve', [
    ...decisionSteps,
    step('approve', async (x) => {
      const signedIn = need(x.session, 'session');
      const r = await lookUp(x, signedIn);
      if (!r || !(await unchanged(x, signedIn, r))) return;
      const choice = approverChoice(need(x.form, 'form'), r);
      if (!choice.ok) return refuse(x, signedIn, r, 400, choice.problem, 'decision form refused');
      const refusal = decisionRefusal(r, signedIn.userId);
      if (refusal) return refuse(x, signedIn, r, 403, refusal);
      // Partial approval: only what is approved needs presence (§8.11).
      const approving = r.capabilities.filter((c) => choice.decision.capabilities.includes(c.name));
      const proof = await presence.check(x, signedIn, r, approving);
      if (proof.kind === 'refused') return refuse(x, signedIn, r, proof.status, proof.text);
      const fresh = await freshSession(x, signedIn, r, proof);
      if (!fresh) return;
      const s = fresh.session;
      try {
        const decided = await approve(ctx, r.approvalId, {
          userId: s.userId,
          actor: s.userId,
          origin: decisionOrigin(x, s, r),
          ...choice.decision,
        });
        send(x, 200, [whoAmI(s), message('ok', approvedText(r, decided)), inboxLink()], fresh.headers);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        await showRequest(x, s, r, err.status, message('error', `${err.message} Nothing was granted.`));
      }
    }),
  ]);

  // Issue 16 §5 (WCAG 2.2.1): one more lifetime for a request near its end, within the ceiling.
  router.add('POST', '/device/extend', [
    ...decisionSteps,
    step('extend', async (x) => {
      const s = need(x.session, 'session');
      const r = await lookUp(x, s);
      if (!r) return;
      let extended;
      try {
        extended = await extendApproval(ctx, r, s.userId, s.authMethod);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        x.decision.outcome = 'deny';
        x.decision.reason = err.message;
        await showRequest(x, s, r, err.status, message('error', err.message));
        return;
      }
      const fresh = { ...r, expiresAt: extended.expiresAt };
      await showRequest(
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
      const r = await lookUp(x, s);
      if (!r || !(await unchanged(x, s, r))) return;
      const refusal = decisionRefusal(r, s.userId);
      if (refusal) {
        await showRequest(x, s, r, 403, message('error', refusal));
        return;
      }
      const reason = displayText((need(x.form, 'form').get('reason') ?? '').slice(0, 500), 'reason');
      await deny(ctx, r.approvalId, {
        ...(reason ? { reason } : {}),
        actor: s.userId,
        origin: decisionOrigin(x, s, r),
      });
      send(x, 200, [
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
