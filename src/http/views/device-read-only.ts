/**
 * The device page of a proxy without `sign_in:` (issue 11 keeps it): anyone with a code sees what
 * the request asks, and the operator decides it (admin API / CLI). Nothing here decides.
 */
import { lookUpDeviceRequest } from '../../protocol/device.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { requestWarnings } from '../../protocol/request-warnings.js';
import { escapeHtml, htmlPage } from '../html.js';
import { lookUpForm, requestDetails } from './device.js';
import { timeLeftView } from './time-left.js';
import { requestTimeLeft } from '../../protocol/approval-expiry.js';
import type { DeviceRequest } from '../../protocol/device.js';

async function timeLeftLine(ctx: ProtocolContext, r: DeviceRequest): Promise<string> {
  const left = await requestTimeLeft(ctx, r);
  return left ? timeLeftView(left, undefined) : '';
}

export async function legacyDevicePage(
  ctx: ProtocolContext,
  title: string,
  serverName: string,
  code: string | null,
): Promise<string> {
  const parts = [`<h1>${escapeHtml(title)}</h1>`];
  if (code === null || code.trim() === '') {
    parts.push('<p>Enter the code the agent showed you to see what it asks for.</p>', lookUpForm(''));
  } else {
    const found = await lookUpDeviceRequest(ctx, code);
    if (found.kind === 'found') {
      const r = found.request;
      parts.push(
        lookUpForm(r.userCode),
        requestDetails(r, requestWarnings(ctx, r, serverName)),
        // The time left (no Extend: only a signed-in approver may extend, issue 16 §5).
        await timeLeftLine(ctx, r),
        `<p class="notice" id="next-step">This page cannot approve anything. The operator of this service decides requests: give them the code <span class="code">${escapeHtml(r.userCode)}</span> (they find it with <code>agent-auth-proxy admin approvals list --code</code>) and say whether to approve it.</p>`,
      );
    } else if (found.kind === 'not_found') {
      parts.push(
        lookUpForm(found.userCode),
        `<p id="outcome" class="notice" role="alert">No open request has the code <span class="code">${escapeHtml(found.userCode)}</span>. It may have expired or been decided already.</p>`,
      );
    } else {
      parts.push(
        lookUpForm(''),
        '<p id="outcome" class="notice" role="alert">That is not a code of this server: codes are eight letters, like <span class="code">WDJB-MJHT</span>.</p>',
      );
    }
  }
  return htmlPage(title, parts.join('\n'));
}
