/**
 * What the device page says about proof of presence (§8.11) for a request that needs it, and the
 * marker that tells the page script to run the passkey prompt when Approve is clicked (the
 * approve form itself stays as views/device.ts renders it).
 */
import { escapeHtml } from '../html.js';
import { PASSKEY_SCRIPT_TAG, PASSKEY_STATUS } from './passkey-script.js';

export type PresenceState =
  /** The approver has a passkey: Approve asks for it. */
  | 'ready'
  | 'no-passkey'
  /** The issuer is an IP address or plain http other than localhost: browsers refuse WebAuthn. */
  | 'unavailable';

export function presenceNotice(names: readonly string[], always: boolean, state: PresenceState): string {
  const what =
    names.length > 0
      ? `A passkey is required to approve ${names.map(escapeHtml).join(', ')}: ${
          always ? 'this server asks for one for every approval' : 'these can change data or act for you'
        } (§8.11).`
      : 'A passkey is required to approve any request on this server (§8.11).';
  if (state === 'ready') {
    return `<p class="notice" id="passkey-required" role="status">${what} When you click Approve, your browser asks for your passkey (fingerprint, face or PIN); it confirms exactly this request.</p>
<span hidden data-passkey-for="approve-form" data-options="/device/passkey-options" data-waiting="Confirm with your passkey to approve…"></span>
${PASSKEY_STATUS}
${PASSKEY_SCRIPT_TAG}`;
  }
  const why =
    state === 'no-passkey'
      ? 'You have no passkey yet, so this request cannot be approved here: <a href="/account">add a passkey on your account page</a>, then open this request again. Or deny it.'
      : "Passkeys cannot be used at this server's address (browsers allow them only on https or http://localhost, never on an IP address), so this request cannot be approved here: ask the operator, or deny it.";
  return `<p class="notice" id="passkey-required" role="status">${what} ${why}</p>`;
}
