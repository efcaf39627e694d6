/**
 * The §7 approval object an agent is answered with while a person decides: how to reach the
 * approver (CIBA, or the device page and its code), how long it stays open, how often to poll,
 * and the §10.10.2 notification stream.
 */
import type { ApprovalRecord } from '../storage/types.js';
import { notificationUrl } from './approval-events.js';
import type { ProtocolContext } from './context.js';

export function approvalObject(ctx: ProtocolContext, approval: ApprovalRecord): Record<string, unknown> {
  const expiresIn = Math.max(0, Math.ceil((approval.expiresAt - ctx.clock.now()) / 1000));
  const interval = Math.max(1, Math.round(ctx.policy.approval.intervalMs / 1000));
  // §10.10.2: an SSE stream on the issuer's own origin (§8.12 origin checks pass); polling stays.
  const notification = notificationUrl(ctx.issuer(), approval.id);
  if (approval.method === 'ciba') {
    return {
      method: 'ciba',
      expires_in: expiresIn,
      interval,
      ...(approval.bindingMessage ? { binding_message: approval.bindingMessage } : {}),
      notification_url: notification,
    };
  }
  const verificationUri = ctx.policy.approval.verificationUri ?? `${ctx.issuer()}/device`;
  const complete = new URL(verificationUri);
  complete.searchParams.set('code', approval.userCode);
  return {
    method: 'device_authorization',
    verification_uri: verificationUri,
    verification_uri_complete: complete.href,
    user_code: approval.userCode,
    expires_in: expiresIn,
    interval,
    notification_url: notification,
  };
}
