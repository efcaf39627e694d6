/**
 * What a page that runs a WebAuthn ceremony adds: the script tag and a CSP that allows that one
 * same-origin script and its same-origin requests. Every other page keeps the CSP without
 * script (html.ts).
 */
import { PAGE_CSP } from '../html.js';
import { WEBAUTHN_SCRIPT_PATH } from '../assets/webauthn.js';

export const PASSKEY_SCRIPT_TAG = `<script src="${WEBAUTHN_SCRIPT_PATH}" defer></script>`;

const SCRIPT_CSP = PAGE_CSP.replace(
  "default-src 'none';",
  "default-src 'none'; script-src 'self'; connect-src 'self';",
);
if (SCRIPT_CSP === PAGE_CSP)
  throw new Error("passkey-script: PAGE_CSP no longer starts with default-src 'none'");

/** Headers for `sendHtml` on a page that includes PASSKEY_SCRIPT_TAG. */
export const PASSKEY_PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': SCRIPT_CSP,
});

/** Where the script says what is happening (read out by screen readers). */
export const PASSKEY_STATUS = '<p id="passkey-status" role="status" aria-live="polite"></p>';
