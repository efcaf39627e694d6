/**
 * The HTML of the device page (§7.1): the code form and the request as the approver sees it.
 * Everything an agent chose (name, host name, reason, binding message, constraint values) is made
 * plain (markup and invisible characters removed), capped (src/protocol/display-text.ts),
 * escaped, and never a link (§8.10); the page says first that an AI agent is asking, then warns
 * (src/protocol/request-warnings.ts).
 */
import type { SessionRecord } from '../../storage/types.js';
import { iso } from '../../protocol/context.js';
import { isReadOnlyMethod, MAX_CLAIMS_READ, type DeviceRequest } from '../../protocol/device.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import type { RequestWarning } from '../../protocol/request-warnings.js';
import { escapeHtml } from '../html.js';
import { constraintText, decisionControls } from './decision-form.js';

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

/** Agent-chosen text for the page: plain (no markup, nothing invisible), capped, escaped (§8.10). */
function shown(text: string, max: number): string {
  return escapeHtml(plainText(text, max).text);
}

/** The warnings above a request (§8.10), or nothing. */
export function warningList(warnings: readonly RequestWarning[]): string {
  if (warnings.length === 0) return '';
  const items = warnings.map((w) => `<li class="warning-${w.kind}">${escapeHtml(w.text)}</li>`).join('\n');
  return `<div id="warnings" class="warn" role="alert">
<p><strong>Be careful with this request.</strong></p>
<ul>
${items}
</ul>
</div>`;
}

/**
 * What the request asks, in the order a careful person reads it. How long it stays open follows it
 * (views/time-left.ts), with Extend when little is left.
 */
export function requestDetails(r: DeviceRequest, warnings: readonly RequestWarning[] = []): string {
  const capabilities = r.capabilities
    .map((c) => {
      const description = c.description
        ? ` — ${escapeHtml(plainText(c.description.split('\n')[0] ?? '', DISPLAY_LIMITS.description).text)}`
        : '';
      const method = c.method ? ` <small class="method">(${escapeHtml(c.method)})</small>` : '';
      const constraints = c.constraints
        ? `<br><small class="limits">limited to: ${Object.entries(c.constraints)
            .map(([field, value]) => escapeHtml(constraintText(field, value)))
            .join('; ')}</small>`
        : '';
      const risk = c.highRisk
        ? ' <strong class="risk">high risk: it can change data or act for you</strong>'
        : '';
      return `<li><code>${shown(c.name, DISPLAY_LIMITS.name)}</code>${description}${method}${risk}${constraints}</li>`;
    })
    .join('\n');
  const heading =
    r.method === 'ciba'
      ? 'Request sent to you'
      : `Request <span class="code">${escapeHtml(r.userCode)}</span>`;
  return `<section id="request" aria-labelledby="request-title">
<h2 id="request-title">${heading}</h2>
<p><strong>You are authorizing an AI agent.</strong> The agent <strong id="agent-name">${shown(r.agentName, DISPLAY_LIMITS.name)}</strong>${
    r.hostName ? ` on <strong id="host-name">${shown(r.hostName, DISPLAY_LIMITS.name)}</strong>` : ''
  } ${WHAT[r.kind]} this service, as a ${r.mode} agent.</p>
<p>Names, reasons and messages are chosen by the agent: they are not verified by this server.</p>
${warningList(warnings)}
<dl>
${r.capabilities.length > 0 ? `<dt>Capabilities</dt><dd><ul id="capabilities">${capabilities}</ul></dd>` : ''}
${r.reason ? `<dt>Reason given</dt><dd id="reason">${shown(r.reason, DISPLAY_LIMITS.reason)}</dd>` : ''}
${r.bindingMessage ? `<dt>Message from the agent</dt><dd id="binding-message">${shown(r.bindingMessage, DISPLAY_LIMITS.bindingMessage)}</dd>` : ''}
${r.hostKey ? `<dt>App key</dt><dd id="host-key"><code>${escapeHtml(shortThumbprint(r.hostKey.thumbprint))}</code>, first seen ${escapeHtml(iso(r.hostKey.registeredAt) ?? '')}</dd>` : ''}
${r.hostKey ? registeredFrom(r.hostKey) : ''}
</dl>
${linkNotice(r.linkUnlocks)}
${claimsNotice(r.claims)}
</section>`;
}

/**
 * §2.9: approving links the host to you, and its agents then get the defaults without asking:
 * which, before you decide (each that can change data said so).
 */
function linkNotice(unlocks: DeviceRequest['linkUnlocks']): string {
  if (unlocks.length === 0) return '';
  const items = unlocks
    .map(
      (c) =>
        `<li><code>${escapeHtml(c.name)}</code>${isReadOnlyMethod(c.method) ? '' : ' (can change data)'}</li>`,
    )
    .join('\n');
  return `<div id="link-unlocks" class="notice" role="note">
<p><strong>Approving connects this app (its host) to your account.</strong> From then on its agents get these without asking you:</p>
<ul>${items}</ul></div>`;
}

/**
 * §9.3 / §2.10: approving links the host to you, and its autonomous agents become yours with their
 * history; which ones, and what they did lately, before you decide.
 */
function claimsNotice(claims: DeviceRequest['claims']): string {
  const links = '<p><strong>Approving connects this app (its host) to your account.</strong>';
  if (claims.agents.length === 0) {
    // None among the agents read; past the bound there may be some all the same.
    return claims.moreAtLeast
      ? `<div id="claims" class="notice" role="note">
${links} It has over ${MAX_CLAIMS_READ} agents; the autonomous ones among them become yours, and what they did before becomes part of your history.</p></div>`
      : '';
  }
  const items = claims.agents
    .map((a) => {
      const recent = a.recent.length
        ? a.recent
            .map(
              (e) =>
                `${escapeHtml(iso(e.at) ?? '')} ${shown(e.what, DISPLAY_LIMITS.name)}: ${escapeHtml(e.outcome)}`,
            )
            .join('; ')
        : 'no activity yet';
      return `<li><strong>${shown(a.name, DISPLAY_LIMITS.name)}</strong> (${escapeHtml(a.status)}) — ${recent}</li>`;
    })
    .join('\n');
  const more = claims.moreAtLeast
    ? `<p>… and ${claims.more > 0 ? `at least ${claims.more}` : 'perhaps'} more (this app has over ${MAX_CLAIMS_READ} agents).</p>`
    : claims.more > 0
      ? `<p>… and ${claims.more} more.</p>`
      : '';
  return `<div id="claims" class="notice" role="note">
${links} Its autonomous agents below become yours, and what they did before becomes part of your history:</p>
<ul>
${items}
</ul>
${more}</div>`;
}

/**
 * RFC 8628 §5.4: when and from where the host registered, so a person can tell a request made on
 * their own machine from one made elsewhere. Stored capped and without control characters; escaped.
 */
function registeredFrom(key: NonNullable<DeviceRequest['hostKey']>): string {
  if (key.ip === null) return '';
  const agent = key.userAgent === null ? '' : ` (${escapeHtml(key.userAgent)})`;
  return `<dt>Registered</dt><dd id="host-origin">registered ${escapeHtml(iso(key.registeredAt) ?? '')} from ${escapeHtml(key.ip)}${agent}</dd>`;
}

/**
 * The first 16 characters of a key thumbprint in groups of four ("AbCd EfGh IjKl MnOp…"): enough
 * for a person to compare with what the agent's host shows, short enough to read (RFC 8628 §5.4).
 */
export function shortThumbprint(thumbprint: string): string {
  return `${(thumbprint.slice(0, 16).match(/.{1,4}/g) ?? []).join(' ')}…`;
}

export interface DecisionForms {
  readonly session: SessionRecord;
  readonly hash: string;
  /** The session is older than sign_in.fresh_auth: Approve asks for the password again. */
  readonly reauth: 'password' | 'password+totp' | 'sign-in-again' | null;
}

export function decisionForms(r: DeviceRequest, f: DecisionForms): string {
  const hidden = `<input type="hidden" name="csrf" value="${escapeHtml(f.session.csrfToken)}">
${requestField(r)}
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
${decisionControls(r)}
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

/**
 * The hidden field that names the request in a form: its code for a device request; its id for
 * a CIBA request, which is found only in its addressee's inbox (src/protocol/inbox.ts).
 */
export function requestField(r: DeviceRequest): string {
  return r.method === 'ciba'
    ? `<input type="hidden" name="approval" value="${escapeHtml(r.approvalId)}">`
    : `<input type="hidden" name="code" value="${escapeHtml(r.userCode)}">`;
}

export function message(kind: 'error' | 'notice' | 'ok', text: string, id = 'outcome'): string {
  return `<p id="${id}" class="${kind}"${kind === 'error' ? ' role="alert"' : ' role="status"'}>${escapeHtml(text)}</p>`;
}
