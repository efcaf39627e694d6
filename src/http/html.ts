/**
 * The few HTML pages the proxy serves. Every value is escaped where it is interpolated, and the
 * Content-Security-Policy allows no script at all, so text an agent chose (§8.10: names, reasons)
 * can only ever render as text.
 */
import type { ServerResponse } from 'node:http';

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
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}
input{font:inherit;font-family:ui-monospace,monospace;letter-spacing:.1em;text-transform:uppercase;padding:.3rem .5rem;width:10rem}
button{font:inherit;padding:.3rem .9rem}
dt{font-weight:600;margin-top:.6rem}dd{margin:0}
code,.code{font-family:ui-monospace,monospace}
.notice{border-left:4px solid #b26b00;background:#fff8e6;padding:.5rem .8rem}
.risk{color:#a40000;font-size:.9em}
`;

export function htmlPage(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

export function sendHtml(res: ServerResponse, status: number, html: string): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
    // No script, no framing (clickjacking), forms only back to this page, nothing fetched elsewhere.
    'content-security-policy':
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  });
  res.end(html);
}
