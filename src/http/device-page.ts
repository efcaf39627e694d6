/**
 * The device page's answers (§7.1) once an approver is signed in: the request with its warnings
 * and decision forms, the request a form names, the checks Approve and Deny share, and the session
 * Approve decides in (§8.11). The routes (routes/device.ts) are lists of steps over these.
 */
import { lookUpCibaRequest } from '../protocol/inbox.js';
import { requestTimeLeft } from '../protocol/approval-expiry.js';
import type { ProtocolContext } from '../protocol/context.js';
import { contentHash, decisionRefusal, lookUpDeviceRequest, type DeviceRequest } from '../protocol/device.js';
import { requestWarnings } from '../protocol/request-warnings.js';
import type { SessionRecord } from '../storage/types.js';
import { escapeHtml, htmlPage, sendHtml } from './html.js';
import type { PageAuth } from './page-auth.js';
import { need, type Exchange } from './pipeline.js';
import type { PresenceGate } from './steps/presence.js';
import type { RateLimits } from './rate-limits.js';
import { codeForm, decisionForms, message, requestDetails, whoAmI } from './views/device.js';
import { inboxLink } from './views/inbox.js';
import { oidcFreshNotice, oidcReauthNow, oidcStartPath } from './views/oidc.js';
import { timeLeftView } from './views/time-left.js';

/** Where the approver finds this request again: its code's page, or the inbox for CIBA (§7.2). */
export function pageOf(r: DeviceRequest): string {
  return r.method === 'ciba' ? '/approvals' : `/device?code=${encodeURIComponent(r.userCode)}`;
}

export class DevicePage {
  readonly #ctx: ProtocolContext;
  readonly #auth: PageAuth;
  readonly #presence: PresenceGate;
  readonly #limits: RateLimits;
  readonly #serverName: string;
  readonly #title: string;

  constructor(options: {
    readonly ctx: ProtocolContext;
    readonly auth: PageAuth;
    readonly presence: PresenceGate;
    /** Wrong device codes per person (RateLimits.deviceCodeGuess). */
    readonly limits: RateLimits;
    /** The name users know the service by (discovery's provider_name). */
    readonly serverName: string;
  }) {
    this.#ctx = options.ctx;
    this.#auth = options.auth;
    this.#presence = options.presence;
    this.#limits = options.limits;
    this.#serverName = options.serverName;
    this.#title = deviceTitle(options.serverName);
  }

  send(x: Exchange, status: number, parts: string[], headers: Readonly<Record<string, string>> = {}): void {
    sendHtml(
      x.res,
      status,
      htmlPage(this.#title, [`<h1>${escapeHtml(this.#title)}</h1>`, ...parts].join('\n')),
      headers,
    );
  }

  /**
   * Whether the person signs in again somewhere other than this server's password form: at the
   * front proxy, at the provider, or (a passkey session standing in for one of those) as the
   * person without a local account did before.
   */
  #signsInElsewhere(s: SessionRecord): boolean {
    return s.authMethod === 'trusted_header' || s.authMethod === 'oidc' || this.#passkeyWithoutPassword(s);
  }

  /** Whether a fresh sign-in goes through the OIDC provider (an OIDC session, or one standing in for it). */
  #signsInAtProvider(s: SessionRecord): boolean {
    return (
      s.authMethod === 'oidc' ||
      (this.#passkeyWithoutPassword(s) && this.#auth.settings.trustedHeader === undefined)
    );
  }

  /**
   * A passkey session of someone with no local account: it stands in for a sign-in elsewhere
   * (freshSession), and asking that person for a password they do not have only spends the
   * sign-in throttles.
   */
  #passkeyWithoutPassword(s: SessionRecord): boolean {
    return s.authMethod === 'passkey' && !this.#auth.local.knows(s.userId);
  }

  /** The request with its decision forms, plus a message above it. */
  async showRequest(
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    status: number,
    note?: string,
  ): Promise<void> {
    const refusal = decisionRefusal(r, s.userId);
    const parts = [whoAmI(s)];
    let headers: Readonly<Record<string, string>> = {};
    if (note) parts.push(note);
    parts.push(requestDetails(r, requestWarnings(this.#ctx, r, this.#serverName)));
    // WCAG 2.2.1: the time left, and Extend when little is left, for a user who may decide it.
    const left = await requestTimeLeft(this.#ctx, r);
    if (left) parts.push(timeLeftView(left, refusal ? undefined : { session: s, request: r }));
    if (refusal) {
      parts.push(message('notice', refusal, 'cannot-decide'));
    } else {
      const proof = await this.#presence.view(s, r);
      if (proof.html) parts.push(proof.html);
      headers = proof.headers;
      let reauth: 'password' | 'password+totp' | 'sign-in-again' | null = null;
      // The passkey Approve asks for is the fresh authentication too (§8.11): no password then.
      if (!proof.passkeyIsFreshAuth && !this.#auth.sessions.isFresh(s, this.#auth.settings.freshAuthMs)) {
        reauth = this.#signsInElsewhere(s)
          ? 'sign-in-again'
          : this.#auth.local.wantsTotp(s.userId)
            ? 'password+totp'
            : 'password';
      }
      const oidc = this.#auth.settings.oidc;
      if (reauth === 'sign-in-again' && this.#signsInAtProvider(s) && oidc) {
        parts.push(oidcFreshNotice(oidc.name, pageOf(r)));
      } else if (reauth === 'sign-in-again') {
        const back = pageOf(r);
        parts.push(
          `<p class="notice" id="fresh-auth">Your sign-in is older than allowed for approvals. <a href="/sign-in?return=${escapeHtml(encodeURIComponent(back))}">Sign in again</a> to approve.</p>`,
        );
      }
      parts.push(decisionForms(r, { session: s, hash: contentHash(r), reauth }));
    }
    this.send(x, status, parts, headers);
  }

  /**
   * The open request the form names, or the code form again with why not: by its code, or (from
   * the inbox) a CIBA request by its id, found only when it is addressed to this user.
   */
  async lookUp(x: Exchange, s: SessionRecord): Promise<DeviceRequest | undefined> {
    const approvalId = need(x.form, 'form').get('approval');
    if (approvalId !== null) {
      const ciba = await lookUpCibaRequest(this.#ctx, approvalId.slice(0, 100), s.userId);
      if (!ciba) {
        this.send(x, 404, [
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
    await this.#limits.deviceCodeGuess(s.userId);
    const found = await lookUpDeviceRequest(this.#ctx, code);
    if (found.kind === 'found') {
      await this.#limits.deviceCodeRight(s.userId);
      return found.request;
    }
    const why =
      found.kind === 'not_found'
        ? `No open request has the code ${found.userCode}. It may have expired or been decided already.`
        : 'That is not a code of this server: codes are eight letters, like WDJB-MJHT.';
    this.send(x, 404, [
      whoAmI(s),
      message('error', why),
      codeForm(s, found.kind === 'not_found' ? found.userCode : ''),
    ]);
    return undefined;
  }

  /** The request as now stored must hash to what the form says was shown. */
  async unchanged(x: Exchange, s: SessionRecord, r: DeviceRequest): Promise<boolean> {
    if (need(x.form, 'form').get('shown') === contentHash(r)) return true;
    await this.showRequest(
      x,
      s,
      r,
      409,
      message('error', 'This request changed since you saw it. Nothing was decided: review it again.'),
    );
    return false;
  }

  /** Approve refused before anything was decided: the request again, and why (`logged`: the decision record's reason). */
  async refuse(
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    status: number,
    why: string,
    logged = why,
  ): Promise<void> {
    x.decision.outcome = 'deny';
    x.decision.reason = logged;
    await this.showRequest(x, s, r, status, message('error', `${why} Nothing was granted.`));
  }

  /**
   * The session Approve decides in (§8.11): a verified passkey, or a fresh sign-in, starts a new
   * one (its cookie in `headers`). A stale session re-authenticates here with its password (and
   * one-time code); an OIDC one is sent to its provider. Undefined: the page answered already.
   */
  async freshSession(
    x: Exchange,
    s: SessionRecord,
    r: DeviceRequest,
    proof: { readonly kind: string },
  ): Promise<{ session: SessionRecord; headers: Record<string, string> } | undefined> {
    if (proof.kind === 'verified') {
      // Behind a trusted header the header stays what signs this person in: a passkey session
      // started here would outlive their signing out at the proxy in front (headerDisowns drops
      // only header sessions when the header is gone). The decision is still made, and
      // recorded, with the passkey.
      if (s.authMethod === 'trusted_header') return { session: { ...s, authMethod: 'passkey' }, headers: {} };
      // It stands in for the sign-in `s` came from: no longer than that one would have lasted.
      const started = await this.#auth.sessions.start(s.userId, 'passkey', x.sessionCookie, {
        notAfter: s.expiresAt,
      });
      return { session: started.session, headers: { 'set-cookie': this.#auth.cookie(started.cookieValue) } };
    }
    if (this.#auth.sessions.isFresh(s, this.#auth.settings.freshAuthMs)) return { session: s, headers: {} };
    const oidc = this.#auth.settings.oidc;
    if (this.#signsInAtProvider(s) && oidc) {
      // §8.11: back to the provider with max_age=0, then to this request. A page that moves on
      // by itself (Refresh), because the CSP's form-action stops a redirect out of this POST.
      const start = oidcStartPath(pageOf(r), true);
      x.decision.reason = 'fresh sign-in needed';
      this.send(x, 200, [whoAmI(s), oidcReauthNow(oidc.name, pageOf(r))], { refresh: `0; url=${start}` });
      return undefined;
    }
    if (this.#signsInElsewhere(s)) {
      await this.showRequest(
        x,
        s,
        r,
        403,
        message('error', 'Sign in again before approving. Nothing was granted.'),
      );
      return undefined;
    }
    const form = need(x.form, 'form');
    const result = await this.#auth.local.attempt(
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
      await this.showRequest(x, s, r, result.kind === 'throttled' ? 429 : 400, message('error', text));
      return undefined;
    }
    // Re-authenticating is a sign-in: a new session, the old one ended.
    const started = await this.#auth.sessions.start(s.userId, result.method, x.sessionCookie, {
      credentialTag: result.credentialTag,
    });
    return { session: started.session, headers: { 'set-cookie': this.#auth.cookie(started.cookieValue) } };
  }
}

/** The device page's title and heading. */
export function deviceTitle(serverName: string): string {
  return `Agent requests — ${serverName}`;
}
