/**
 * Time left on an open request (issue 16 §5, WCAG 2.2.1): "expires in 4 minutes, at …", and when
 * little remains an Extend button, a POST form with the session's CSRF token naming the request
 * like the decision forms do. Shown on the request view and on inbox cards.
 */
import type { TimeLeft } from '../../protocol/approval-expiry.js';
import { iso } from '../../protocol/context.js';
import type { DeviceRequest } from '../../protocol/device.js';
import type { SessionRecord } from '../../storage/types.js';
import { escapeHtml } from '../html.js';
import { requestField } from './device.js';

/** "4 minutes", never "0 minutes" while anything is left (a partial minute counts as one). */
export function minutesLeft(leftMs: number): string {
  const minutes = Math.max(1, Math.ceil(leftMs / 60_000));
  return minutes === 1 ? '1 minute' : `${minutes} minutes`;
}

/**
 * The time-left line, and the Extend form when `extend` is given (the user may decide the request)
 * and little is left. `id` keeps element ids unique when several cards share a page.
 */
export function timeLeftView(
  t: TimeLeft,
  extend: { readonly session: SessionRecord; readonly request: DeviceRequest } | undefined,
  id = 'time-left',
): string {
  const at = escapeHtml(iso(t.expiresAt) ?? '');
  const domId = escapeHtml(id);
  const line = `<p id="${domId}" class="${t.extendable ? 'notice' : 'who'}">Expires in ${minutesLeft(t.leftMs)}, at <time datetime="${at}">${at}</time>.</p>`;
  if (!extend || !t.extendable) return line;
  return `${line}
<form method="post" action="/device/extend" class="inline" id="${domId}-extend-form">
<input type="hidden" name="csrf" value="${escapeHtml(extend.session.csrfToken)}">
${requestField(extend.request)}
<button type="submit" id="${domId}-extend">Extend by ${minutesLeft(t.extendByMs)}</button>
</form>`;
}
