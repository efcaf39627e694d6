/**
 * The HTML pages the proxy serves. Every value is escaped where it is interpolated, and the
 * Content-Security-Policy allows no script at all and only this one stylesheet (by its hash), so
 * text an agent chose (§8.10: names, reasons) can only ever render as text.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { ProtocolError } from '../errors.js';

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text → HTML text or attribute value (quoted). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;overflow-wrap:anywhere}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}
label{display:block;margin-top:.8rem;font-weight:600}
input{font:inherit;padding:.4rem .5rem;width:100%;max-width:20rem;box-sizing:border-box}
input.code-input{font-family:ui-monospace,monospace;letter-spacing:.1em;text-transform:uppercase;width:12rem}
button{font:inherit;padding:.45rem 1rem;margin-top:.8rem;cursor:pointer}
a.button{display:inline-block;font:inherit;padding:.45rem 1rem;margin-top:.8rem;border:1px solid #1d5fd1;background:#1d5fd1;color:#fff;text-decoration:none}
button.approve{background:#0b6e2e;color:#fff;border:1px solid #0b6e2e}
button.deny{background:#fff;color:#a40000;border:1px solid #a40000}
:focus-visible{outline:3px solid #1d5fd1;outline-offset:2px}
dt{font-weight:600;margin-top:.6rem}dd{margin:0}
code,.code{font-family:ui-monospace,monospace}
.notice{border-left:4px solid #b26b00;background:#fff8e6;padding:.5rem .8rem}
.error{border-left:4px solid #a40000;background:#fdecec;padding:.5rem .8rem}
.ok{border-left:4px solid #0b6e2e;background:#eaf6ee;padding:.5rem .8rem}
.risk{color:#a40000;font-size:.9em}
.who{font-size:.9rem;color:#444}
.inline{display:inline}
fieldset{border:1px solid #c8c8c8;border-radius:4px;margin:.8rem 0;padding:.4rem .8rem .7rem;min-width:0}
legend{font-weight:600;padding:0 .3rem}
input[type=checkbox]{width:1.15rem;height:1.15rem;margin:0 .35rem 0 0;vertical-align:-.15rem}
select{font:inherit;padding:.4rem .5rem;max-width:100%}
.choice{border-top:1px solid #e4e4e4;padding:.5rem 0}
.choice>label,.value label,.bound label{display:inline;font-weight:400}
.bound{display:inline-block;margin:.3rem 1rem .3rem 0}
.bound input{width:7rem;margin-left:.3rem}
.value{display:inline-block;margin:.3rem 1rem .3rem 0}
.kept,.hint,.limits{color:#444;font-size:.9rem}
.warn{border-left:4px solid #a40000;background:#fff3f0;padding:.2rem .8rem;margin:.8rem 0}
.cards{list-style:none;padding:0}
.card{border:1px solid #c8c8c8;border-radius:6px;padding:.2rem .9rem .8rem;margin:.8rem 0}
pre.value{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2rem 0;font-family:ui-monospace,monospace;background:#f4f4f4;padding:.3rem .5rem}
`;

/** The CSP allows exactly this inline stylesheet: no other style, and no script at all. */
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

export const PAGE_CSP = `default-src 'none'; style-src ${STYLE_HASH}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

/** The link that signs a visitor in and brings them back to `returnTo` (a path of this server). */
export function signInLink(returnTo: string): string {
  return `<p><a id="sign-in-link" href="/sign-in?return=${escapeHtml(encodeURIComponent(returnTo))}">Sign in to continue</a></p>`;
}

export function htmlPage(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

export function sendHtml(
  res: ServerResponse,
  status: number,
  html: string,
  headers: Readonly<Record<string, string | string[]>> = {},
): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
    // No script, no framing (clickjacking), forms only back to this origin, nothing fetched elsewhere.
    'content-security-policy': PAGE_CSP,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(html);
}

/** 303 See Other: after a POST, the browser GETs `location` (no resubmission on reload). */
export function redirect(
  res: ServerResponse,
  location: string,
  headers: Readonly<Record<string, string | string[]>> = {},
): void {
  res.writeHead(303, { location, 'cache-control': 'no-store', 'content-length': 0, ...headers });
  res.end();
}

/** An error on a page, as a page: the message and a way back, never a JSON body. */
export function sendErrorPage(res: ServerResponse, e: ProtocolError): void {
  const body = `<h1>Something went wrong</h1>
<p id="outcome" class="error" role="alert">${escapeHtml(e.message)}</p>
<p><a href="/device">Back to agent requests</a></p>`;
  sendHtml(res, e.status, htmlPage('Something went wrong', body), e.headers);
}
