/**
 * The passkeys section of `{issuer}/account` (issue 11): the user's passkeys, "Add passkey" and
 * "Remove". Adding and removing run a WebAuthn ceremony (the script of passkey-script.ts); the
 * forms are plain POSTs with the session's CSRF token, and the server checks everything again.
 */
import { iso } from '../../protocol/context.js';
import { MAX_PASSKEY_NAME, MAX_PASSKEYS_PER_USER, type EnrolmentNeeds } from '../../protocol/passkeys.js';
import type { PasskeyRecord, SessionRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';
import { PASSKEY_STATUS } from './passkey-script.js';

export interface PasskeySection {
  readonly session: SessionRecord;
  readonly passkeys: readonly PasskeyRecord[];
  /** False when the issuer is an IP address or plain http other than localhost. */
  readonly available: boolean;
  /** What adding one needs now (protocol/passkeys.ts enrolmentNeeds). */
  readonly enrolment: EnrolmentNeeds;
}

export function passkeySection(p: PasskeySection): string {
  const csrf = `<input type="hidden" name="csrf" value="${escapeHtml(p.session.csrfToken)}">`;
  const rows = p.passkeys
    .map(
      (k) => `<li class="passkey" data-passkey-id="${escapeHtml(k.id)}">
<strong>${escapeHtml(k.name)}</strong><br>
<small>Added ${escapeHtml(iso(k.createdAt) ?? '')}; ${k.lastUsedAt ? `last used ${escapeHtml(iso(k.lastUsedAt) ?? '')}` : 'not used yet'}</small>
<form method="post" action="/account/passkeys/remove" class="inline" data-passkey="confirm" data-options="/account/passkeys/remove/options" data-waiting="Confirm with one of your passkeys to remove this one…">
${csrf}
<input type="hidden" name="id" value="${escapeHtml(k.id)}">
<button type="submit" class="deny" aria-label="Remove passkey ${escapeHtml(k.name)}">Remove</button>
</form>
</li>`,
    )
    .join('\n');
  const parts = [
    `<section id="passkeys" aria-labelledby="passkeys-title">
<h2 id="passkeys-title">Passkeys</h2>
<p>A passkey (your fingerprint, face or device PIN) proves that you, a person, are approving: this server asks for one before it lets an AI agent change data or act for you. With a passkey you can also sign in without your password.</p>`,
  ];
  parts.push(
    p.passkeys.length > 0
      ? `<ul id="passkey-list">${rows}</ul>`
      : '<p id="no-passkeys">You have no passkey yet.</p>',
  );
  if (!p.available) {
    parts.push(
      '<p class="notice" id="passkeys-unavailable">Passkeys cannot be used at this address: browsers allow them only on https (or http://localhost), never on an IP address. Ask the operator to set the server\'s issuer to its domain name.</p>',
    );
  } else if (p.passkeys.length >= MAX_PASSKEYS_PER_USER) {
    parts.push(
      `<p class="notice">You have ${MAX_PASSKEYS_PER_USER} passkeys, the most allowed: remove one to add another.</p>`,
    );
  } else if (p.enrolment === 'sign-in-again') {
    parts.push(
      '<p class="notice" id="enrol-sign-in">To add a passkey, your sign-in must be recent. <a href="/sign-in?return=%2Faccount">Sign in again</a>, then add it.</p>',
    );
  } else {
    parts.push(`<form method="post" action="/account/passkeys" id="add-passkey-form" data-passkey="register" data-options="/account/passkeys/options" data-waiting="Follow your browser's prompt to create the passkey…">
${csrf}
<label for="passkey-name">Name for this passkey (optional, e.g. "work laptop")</label>
<input id="passkey-name" name="name" maxlength="${MAX_PASSKEY_NAME}" autocomplete="off">
${p.enrolment === 'confirm' ? '<p class="who">You will first confirm with one of your passkeys, then create the new one.</p>' : ''}${p.enrolment === 'code' ? ENROLMENT_CODE_FIELD : ''}
<button type="submit" class="approve" id="add-passkey">Add passkey</button>
</form>`);
  }
  parts.push(PASSKEY_STATUS, '</section>');
  return parts.join('\n');
}

/** sign_in.first_passkey: operator_code: the first passkey takes the operator's one-time code. */
const ENROLMENT_CODE_FIELD = `<label for="enrolment-code">Enrolment code from your administrator</label>
<input id="enrolment-code" name="enrolment_code" required maxlength="32" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" aria-describedby="enrolment-code-help">
<p class="who" id="enrolment-code-help">Your first passkey needs the one-time code your administrator gave you in person or by phone (for example ABCD-EFGH-JKMN-PQRS). It works once. Nobody else, no agent and no e-mail, should have it.</p>`;

/** The passkey sign-in of /sign-in: shown by the script only (it needs JavaScript). */
export function passkeySignInForm(back: string): string {
  return `<form method="post" action="/sign-in/passkey" id="passkey-sign-in" data-passkey="sign-in" data-options="/sign-in/passkey/options" data-reveal hidden>
<input type="hidden" name="return" value="${escapeHtml(back)}">
<button type="submit" id="sign-in-passkey">Sign in with a passkey</button>
</form>
${PASSKEY_STATUS}`;
}
