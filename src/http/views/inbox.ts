/**
 * The HTML of the approver's inbox (`{issuer}/approvals`): one card per open request addressed to
 * the signed-in user (src/protocol/inbox.ts), newest first, each with a button that opens it in
 * the request view with the decision forms (the device page's own, POST /device). Agent text on
 * the cards is plain, capped and escaped like everywhere else (§8.10).
 */
import type { TimeLeft } from '../../protocol/approval-expiry.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import type { DeviceRequest } from '../../protocol/device.js';
import type { InboxPage } from '../../protocol/inbox.js';
import { INBOX_PAGE_SIZE } from '../../protocol/inbox.js';
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';
import { requestField } from './device.js';
import { timeLeftView } from './time-left.js';

/** The time left on a card's request; `canExtend`: the user may decide it, so may extend it. */
export type TimeLeftOf = (
  r: DeviceRequest,
) => { readonly time: TimeLeft; readonly canExtend: boolean } | undefined;

function timeLeftOf(r: DeviceRequest, s: SessionRecord, left: TimeLeftOf): string {
  const t = left(r);
  if (!t) return '';
  return timeLeftView(
    t.time,
    t.canExtend ? { session: s, request: r } : undefined,
    `time-left-${r.approvalId}`,
  );
}

/** A link to the inbox, for the pages around a decision. */
export function inboxLink(): string {
  return '<p><a id="inbox-link" href="/approvals">Your approvals inbox</a></p>';
}

/** How many capabilities a card names before "and N more". */
const CARD_CAPABILITIES = 5;

function card(r: DeviceRequest, s: SessionRecord, warnings: number, left: TimeLeftOf): string {
  const plain = (text: string, max: number): string => escapeHtml(plainText(text, max).text);
  const names = r.capabilities.slice(0, CARD_CAPABILITIES).map((c) => `<code>${plain(c.name, 60)}</code>`);
  const more = r.capabilities.length - names.length;
  const asks = r.capabilities.length
    ? `asks for ${names.join(', ')}${more > 0 ? ` and ${more} more` : ''}`
    : 'asks to connect, with no capabilities';
  const via =
    r.method === 'ciba'
      ? 'Sent to you by the agent'
      : `You opened it with the code ${escapeHtml(r.userCode)}`;
  return `<li class="card" id="request-${escapeHtml(r.approvalId)}">
<p><strong class="agent">${plain(r.agentName, DISPLAY_LIMITS.name)}</strong>${
    r.hostName ? ` on <strong>${plain(r.hostName, DISPLAY_LIMITS.name)}</strong>` : ''
  } ${asks}.</p>
${r.bindingMessage ? `<p>Message from the agent: <q>${plain(r.bindingMessage, 120)}</q></p>` : ''}
${r.reason ? `<p>Reason given: <q>${plain(r.reason, 120)}</q></p>` : ''}
${warnings > 0 ? `<p class="risk">${warnings === 1 ? '1 warning' : `${warnings} warnings`}: review it carefully.</p>` : ''}
<p class="who">${via}.</p>
${timeLeftOf(r, s, left)}
<form method="post" action="/device">
<input type="hidden" name="csrf" value="${escapeHtml(s.csrfToken)}">
${requestField(r)}
<button type="submit">Review and decide</button>
</form>
</li>`;
}

export function inboxView(
  s: SessionRecord,
  page: InboxPage,
  warningCount: (r: DeviceRequest) => number,
  left: TimeLeftOf,
): string {
  const intro = `<h2 id="inbox-title">Waiting for your decision</h2>
<p>Requests an agent sent to you, and requests you opened with a code, while they are open. Newest first, ${INBOX_PAGE_SIZE} a page.</p>`;
  if (page.requests.length === 0) {
    return `${intro}\n<p id="inbox-empty">Nothing is waiting for you.</p>`;
  }
  const cards = page.requests.map((r) => card(r, s, warningCount(r), left)).join('\n');
  const older = page.next
    ? `<p><a id="older" href="/approvals?before=${escapeHtml(encodeURIComponent(page.next))}">Older requests</a></p>`
    : '';
  return `${intro}
<ul id="inbox" class="cards">
${cards}
</ul>
${older}`;
}
