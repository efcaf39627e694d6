/**
 * The HTML of the device page (§7.1): the code form and the request as the approver sees it.
 * Everything an agent chose (name, host name, reason, binding message) is escaped, shown as
 * plain text and never as a link (§8.10); the page says first that an AI agent is asking.
 */
import type { SessionRecord } from '../../storage/types.js';
import { iso } from '../../protocol/context.js';
import type { DeviceRequest } from '../../protocol/device.js';
import { escapeHtml } from '../html.js';

const WHAT: Readonly<Record<DeviceRequest['kind'], string>> = {
  registration: 'wants to connect to',
  capability_request: 'asks for more access to',
  reactivation: 'asks to be reactivated at',
};

/** The read-only code form of a proxy without sign-in (the operator decides). */
export function lookUpForm(value: string): string {
  return `<form method="get" action="/device">
<label for="code">Code</label>
<input id="code" class="code-input" name="code" value="${escapeHtml(value)}" autocomplete="one-time-code" spellcheck="false" maxlength="16" required>
<button type="submit">Look up</button>
</form>`;
}

/** The signed-in approver's code form: a POST, so a link alone can never open a decision. */
export function codeForm(session: SessionRecord, value: string): string {
  return `<form method="post" action="/device">
<input type="hidden" name="csrf" value="${escapeHtml(session.csrfToken)}">
<label for="code">Code</label>
<input id="code" class="code-input" name="code" value="${escapeHtml(value)}" autocomplete="one-time-code" spellcheck="false" maxlength="16" required>
<button type="submit">Continue</button>
</form>`;
}

export function whoAmI(session: SessionRecord): string {
  return `<p class="who">Signed in as <strong id="signed-in-as">${escapeHtml(session.userId)}</strong>.</p>
<form method="post" action="/sign-out" class="inline">
<input type="hidden" name="csrf" value="${escapeHtml(session.csrfToken)}">
<button type="submit">Sign out</button>
</form>`;
}

/** What the request asks, in the order a careful person reads it. */
export function requestDetails(r: DeviceRequest): string {
  const capabilities = r.capabilities
    .map((c) => {
      const description = c.description ? ` — ${escapeHtml(c.description.split('\n')[0] ?? '')}` : '';
      const method = c.method ? ` <small class="method">(${escapeHtml(c.method)})</small>` : '';
      const constraints = c.constraints
        ? `<br><small>limited to <code>${escapeHtml(JSON.stringify(c.constraints))}</code></small>`
        : '';
      const risk = c.highRisk
        ? ' <strong class="risk">high risk: it can change data or act for you</strong>'
        : '';
      return `<li><code>${escapeHtml(c.name)}</code>${description}${method}${risk}${constraints}</li>`;
    })
    .join('\n');
  return `<section id="request" aria-labelledby="request-title">
<h2 id="request-title">Request <span class="code">${escapeHtml(r.userCode)}</span></h2>
<p><strong>You are authorizing an AI agent.</strong> The agent <strong id="agent-name">${escapeHtml(r.agentName)}</strong>${
    r.hostName ? ` on <strong id="host-name">${escapeHtml(r.hostName)}</strong>` : ''
  } ${WHAT[r.kind]} this service, as a ${r.mode} agent.</p>
<p>Names, reasons and messages are chosen by the agent: they are not verified by this server.</p>
<dl>
${r.capabilities.length > 0 ? `<dt>Capabilities</dt><dd><ul id="capabilities">${capabilities}</ul></dd>` : ''}
${r.reason ? `<dt>Reason given</dt><dd id="reason">${escapeHtml(r.reason)}</dd>` : ''}
${r.bindingMessage ? `<dt>Message from the agent</dt><dd id="binding-message">${escapeHtml(r.bindingMessage)}</dd>` : ''}
<dt>Open until</dt><dd>${escapeHtml(iso(r.expiresAt) ?? '')}</dd>
</dl>
</section>`;
}

export interface DecisionForms {
  readonly session: SessionRecord;
  readonly hash: string;
  /** The session is older than sign_in.fresh_auth: Approve asks for the password again. */
  readonly reauth: 'password' | 'password+totp' | 'sign-in-again' | null;
}

export function decisionForms(r: DeviceRequest, f: DecisionForms): string {
  const hidden = `<input type="hidden" name="csrf" value="${escapeHtml(f.session.csrfToken)}">
<input type="hidden" name="code" value="${escapeHtml(r.userCode)}">
<input type="hidden" name="shown" value="${escapeHtml(f.hash)}">`;
  let reauth = '';
  if (f.reauth === 'password' || f.reauth === 'password+totp') {
    reauth = `<p class="notice" id="fresh-auth">Your sign-in is older than allowed for approvals: enter your password again to approve.</p>
<label for="reauth-password">Password</label>
<input id="reauth-password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
${f.reauth === 'password+totp' ? '<label for="reauth-totp">One-time code</label>\n<input id="reauth-totp" name="totp" inputmode="numeric" autocomplete="one-time-code" maxlength="8" required>' : ''}`;
  }
  return `<form method="post" action="/device/approve" id="approve-form">
${hidden}
${reauth}
<button type="submit" class="approve" id="approve">Approve</button>
</form>
<form method="post" action="/device/deny" id="deny-form">
${hidden}
<label for="deny-reason">Reason for denying (optional, the agent sees it)</label>
<input id="deny-reason" name="reason" maxlength="500">
<button type="submit" class="deny" id="deny">Deny</button>
</form>`;
}

export function message(kind: 'error' | 'notice' | 'ok', text: string, id = 'outcome'): string {
  return `<p id="${id}" class="${kind}"${kind === 'error' ? ' role="alert"' : ' role="status"'}>${escapeHtml(text)}</p>`;
}
