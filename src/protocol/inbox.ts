/**
 * The approver's inbox at `{issuer}/approvals` (issue 11): the open requests addressed to one
 * signed-in user, decided with the same forms and checks as the device page.
 *
 * Addressed to a user means:
 *  - a CIBA request (§7.5) whose login_hint is the user, when the user is one of
 *    `approval.approvers`: only that user may answer it (§7.2, approval-decisions.ts). A host
 *    linked to nobody gets CIBA for any hint (approvals.ts), so a request naming someone who
 *    signs in here but is no approver reaches nobody, as one naming nobody does;
 *  - a device-authorization request (§7.1) the user opened on the device page with its code and
 *    could decide there (recordOpened): whoever holds the code may come back to it.
 * Nobody else's request is ever listed or found here: the lookups take the user as a key.
 *
 * Bounded: INBOX_PAGE_SIZE requests a page, newest first, with a cursor to older ones.
 */
import { isApprover } from './approvers.js';
import type { ProtocolContext } from './context.js';
import { decisionRefusal, describeApproval, lookUpDeviceRequest, type DeviceRequest } from './device.js';

/** Requests per inbox page. */
export const INBOX_PAGE_SIZE = 20;

export interface InboxPage {
  readonly requests: readonly DeviceRequest[];
  /** The cursor of the next (older) page, null on the last. */
  readonly next: string | null;
}

const CURSOR = /^(\d{1,15})~(apr_[A-Za-z0-9_-]{1,64})$/;

export async function inboxPage(
  ctx: ProtocolContext,
  userId: string,
  cursor: string | null,
): Promise<InboxPage> {
  const at = cursor === null ? null : CURSOR.exec(cursor);
  const rows = await ctx.store.inbox({
    userId,
    now: ctx.clock.now(),
    ...(at ? { before: { createdAt: Number(at[1]), id: at[2] as string } } : {}),
    limit: INBOX_PAGE_SIZE + 1,
  });
  const page = rows.slice(0, INBOX_PAGE_SIZE);
  const last = page.at(-1);
  const described: (DeviceRequest | undefined)[] = [];
  for (const a of page) described.push(await describeApproval(ctx, a));
  return {
    requests: described
      // A device request opened earlier leaves the inbox once its agent acts for someone else.
      .filter(
        (r): r is DeviceRequest =>
          r !== undefined &&
          (r.method === 'ciba' ? isApprover(ctx, userId) : decisionRefusal(r, userId) === undefined),
      ),
    next: rows.length > INBOX_PAGE_SIZE && last ? `${last.createdAt}~${last.id}` : null,
  };
}

/** The open CIBA request `approvalId` if it is addressed to `userId`; for anyone else, nothing. */
export async function lookUpCibaRequest(
  ctx: ProtocolContext,
  approvalId: string,
  userId: string,
): Promise<DeviceRequest | undefined> {
  const approval = await ctx.store.approval(approvalId);
  if (
    approval === undefined ||
    approval.method !== 'ciba' ||
    approval.loginHint !== userId ||
    !isApprover(ctx, userId) ||
    approval.status !== 'pending' ||
    approval.expiresAt <= ctx.clock.now()
  ) {
    return undefined;
  }
  return describeApproval(ctx, approval);
}

/**
 * A signed-in user opened a device-authorization request with its code: it joins their inbox,
 * unless they could not decide it anyway (an autonomous agent, another user's agent).
 */
export async function recordOpened(ctx: ProtocolContext, r: DeviceRequest, userId: string): Promise<void> {
  if (r.method !== 'device_authorization' || decisionRefusal(r, userId) !== undefined) return;
  await ctx.store.markOpened(r.approvalId, userId, ctx.clock.now());
}

/**
 * The open request a decision form names, as the approve step finds it: a CIBA request by its id
 * (only for its addressee), otherwise a device-authorization request by its code.
 */
export async function requestToDecide(
  ctx: ProtocolContext,
  named: { readonly approvalId: string | null; readonly code: string },
  userId: string,
): Promise<DeviceRequest | undefined> {
  if (named.approvalId !== null) return lookUpCibaRequest(ctx, named.approvalId.slice(0, 100), userId);
  const found = await lookUpDeviceRequest(ctx, named.code);
  return found.kind === 'found' ? found.request : undefined;
}
