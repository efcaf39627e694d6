/**
 * `GET /device`, the §7.1 verification URI: a user enters (or follows a link with) the code an
 * agent showed them and sees what that request asks for. Deciding is not offered here (see
 * src/protocol/device.ts); the page names the code to give the operator. Per-IP rate limited,
 * since the page answers whether a code exists (RFC 8628 §5.1).
 */
import { iso, type ProtocolContext } from '../../protocol/context.js';
import { lookUpDeviceRequest, type DeviceRequest } from '../../protocol/device.js';
import { escapeHtml, htmlPage, sendHtml } from '../html.js';
import type { RateLimits } from '../rate-limits.js';
import { step } from '../pipeline.js';
import type { Router } from '../router.js';
import { perIp } from '../steps/limits.js';

export interface DeviceRouteOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  /** The name users know the service by (discovery's provider_name). */
  readonly serverName: string;
}

const WHAT: Readonly<Record<DeviceRequest['kind'], string>> = {
  registration: 'wants to connect to',
  capability_request: 'asks for more access to',
  reactivation: 'asks to be reactivated at',
};

export function deviceRoutes(router: Router, { ctx, limits, serverName }: DeviceRouteOptions): void {
  router.add('GET', '/device', [
    perIp(limits),
    step('page', ({ res, url }) => {
      const code = url.searchParams.get('code');
      const title = `Agent requests — ${serverName}`;
      const parts = [`<h1>${escapeHtml(title)}</h1>`];
      if (code === null || code.trim() === '') {
        parts.push('<p>Enter the code the agent showed you to see what it asks for.</p>', form(''));
      } else {
        const found = lookUpDeviceRequest(ctx, code);
        if (found.kind === 'found') {
          parts.push(form(found.request.userCode), request(found.request));
        } else if (found.kind === 'not_found') {
          parts.push(
            form(found.userCode),
            `<p id="outcome" class="notice" role="alert">No open request has the code <span class="code">${escapeHtml(found.userCode)}</span>. It may have expired or been decided already.</p>`,
          );
        } else {
          parts.push(
            form(''),
            '<p id="outcome" class="notice" role="alert">That is not a code of this server: codes are eight letters, like <span class="code">WDJB-MJHT</span>.</p>',
          );
        }
      }
      sendHtml(res, 200, htmlPage(title, parts.join('\n')));
    }),
  ]);
}

function form(value: string): string {
  return `<form method="get" action="/device">
<label for="code">Code</label>
<input id="code" name="code" value="${escapeHtml(value)}" autocomplete="off" spellcheck="false" maxlength="16" required>
<button type="submit">Look up</button>
</form>`;
}

function request(r: DeviceRequest): string {
  const capabilities = r.capabilities
    .map((c) => {
      const description = c.description ? ` — ${escapeHtml(c.description.split('\n')[0] ?? '')}` : '';
      const constraints = c.constraints
        ? `<br><small>limited to <code>${escapeHtml(JSON.stringify(c.constraints))}</code></small>`
        : '';
      const risk = c.highRisk
        ? ' <strong class="risk">high risk: it can change data or act for you</strong>'
        : '';
      return `<li><code>${escapeHtml(c.name)}</code>${description}${risk}${constraints}</li>`;
    })
    .join('\n');
  return `<section id="outcome" aria-labelledby="request-title">
<h2 id="request-title">Request <span class="code">${escapeHtml(r.userCode)}</span></h2>
<p>The agent <strong id="agent-name">${escapeHtml(r.agentName)}</strong>${
    r.hostName ? ` on <strong id="host-name">${escapeHtml(r.hostName)}</strong>` : ''
  } ${WHAT[r.kind]} this service, as a ${r.mode} agent.</p>
<p>Names and reasons are chosen by the agent: they are not verified by this server.</p>
<dl>
${r.capabilities.length > 0 ? `<dt>Capabilities</dt><dd><ul id="capabilities">${capabilities}</ul></dd>` : ''}
${r.reason ? `<dt>Reason given</dt><dd id="reason">${escapeHtml(r.reason)}</dd>` : ''}
<dt>Open until</dt><dd>${escapeHtml(iso(r.expiresAt) ?? '')}</dd>
</dl>
<p class="notice" id="next-step">This page cannot approve anything. The operator of this service decides requests: give them the code <span class="code">${escapeHtml(r.userCode)}</span> (they find it with <code>agent-auth-proxy admin approvals list --code</code>) and say whether to approve it.</p>
</section>`;
}
