/**
 * The OIDC parts of the pages (issue 11): the "Sign in with …" button of the sign-in page and
 * the way back to the provider when an approval needs a fresh sign-in (§8.11). Both are links,
 * not forms: the page CSP's `form-action 'self'` would (rightly) stop a form whose answer
 * redirects to the provider.
 */
import { escapeHtml } from '../html.js';

/** Where a sign-in at the provider starts; `fresh`: the provider must ask for credentials again. */
export function oidcStartPath(back: string, fresh = false): string {
  return `/sign-in/oidc?return=${encodeURIComponent(back)}${fresh ? '&fresh=1' : ''}`;
}

export function oidcButton(name: string, back: string): string {
  return `<p><a class="button" id="oidc-sign-in" href="${escapeHtml(oidcStartPath(back))}">Sign in with ${escapeHtml(name)}</a></p>`;
}

/** The notice on a request whose approver signed in at the provider longer ago than fresh_auth. */
export function oidcFreshNotice(name: string, back: string): string {
  return `<p class="notice" id="fresh-auth">Your sign-in is older than allowed for approvals. Approve sends you to ${escapeHtml(name)} to sign in again, then back here. <a id="oidc-fresh" href="${escapeHtml(oidcStartPath(back, true))}">Sign in again with ${escapeHtml(name)}</a></p>`;
}

/** Approve pressed with a stale provider sign-in: the page moves on to the provider by itself. */
export function oidcReauthNow(name: string, back: string): string {
  return `<p class="notice" id="fresh-auth" role="status">Your sign-in is older than allowed for approvals, so nothing was approved yet: taking you to ${escapeHtml(name)} to sign in again, then back to this request.</p>
<p><a class="button" id="oidc-fresh" href="${escapeHtml(oidcStartPath(back, true))}">Continue to ${escapeHtml(name)}</a></p>`;
}
