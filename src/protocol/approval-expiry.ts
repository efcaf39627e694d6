/**
 * Time left on an open approval request, and extending it (issue 16 §5, WCAG 2.2.1 "Timing
 * adjustable": a person who needs longer to read and decide is warned and can extend with one
 * simple action). The agent sees the new expiry in its next §5.5 poll (`expires_in`) and in the
 * §10.10.2 stream, which re-arms its expiry timer.
 *
 * Bounds: Extend is offered only when little is left (EXTEND_WHEN_LEFT_MS, or a quarter of the
 * lifetime if that is longer); each press adds one policy lifetime (`approval.expires_in`), and
 * the request never stays open past MAX_LIFETIMES lifetimes from its creation, so an agent's
 * request cannot be kept open for ever. Only a user who may decide it may extend it (the same
 * rule as Approve, `decisionRefusal`); every extension is in the activity log.
 */
import { ProtocolError } from '../errors.js';
import type { ApprovalRecord } from '../storage/types.js';
import { protocolEvent } from './activity.js';
import { announce } from './approvals.js';
import type { ProtocolContext } from './context.js';
import { decisionRefusal, type DeviceRequest } from './device.js';

/** Extend is offered once this little is left (or a quarter of the lifetime, if longer). */
export const EXTEND_WHEN_LEFT_MS = 2 * 60_000;
/** The ceiling: a request is open at most this many policy lifetimes after it was made. */
export const MAX_LIFETIMES = 3;

export interface TimeLeft {
  readonly expiresAt: number;
  readonly leftMs: number;
  /** Little is left and the ceiling is not reached: Extend is offered (to a user who may decide). */
  readonly extendable: boolean;
  /** What one Extend adds now (less than a lifetime when the ceiling is near). */
  readonly extendByMs: number;
}

function bounds(ctx: ProtocolContext, approval: ApprovalRecord): { lifetime: number; ceiling: number } {
  const lifetime = ctx.policy.approval.expiresInMs;
  return { lifetime, ceiling: approval.createdAt + MAX_LIFETIMES * lifetime };
}

/** The time left on `approval` now, and whether Extend may be offered. */
export function timeLeft(ctx: ProtocolContext, approval: ApprovalRecord): TimeLeft {
  const now = ctx.clock.now();
  const { lifetime, ceiling } = bounds(ctx, approval);
  const leftMs = Math.max(0, approval.expiresAt - now);
  const extendByMs = Math.max(0, Math.min(approval.expiresAt + lifetime, ceiling) - approval.expiresAt);
  const little = leftMs <= Math.max(EXTEND_WHEN_LEFT_MS, lifetime / 4);
  return {
    expiresAt: approval.expiresAt,
    leftMs,
    extendable: approval.status === 'pending' && leftMs > 0 && little && extendByMs > 0,
    extendByMs,
  };
}

/** The time left on the request a page shows (undefined when its approval is gone). */
export async function requestTimeLeft(ctx: ProtocolContext, r: DeviceRequest): Promise<TimeLeft | undefined> {
  const approval = await ctx.store.approval(r.approvalId);
  return approval ? timeLeft(ctx, approval) : undefined;
}

/**
 * `userId` extends the request `r` by one lifetime, within the ceiling. Refused (403) for a user
 * who may not decide it, (409) when it is closed, or when it is not near its end or at the ceiling.
 */
export function extendApproval(
  ctx: ProtocolContext,
  r: DeviceRequest,
  userId: string,
  authMethod?: string,
): Promise<ApprovalRecord> {
  const refusal = decisionRefusal(r, userId);
  if (refusal) return Promise.reject(new ProtocolError('unauthorized', refusal));
  return ctx.write(async (tx, after) => {
    const approval = await tx.approval(r.approvalId);
    const now = ctx.clock.now();
    if (!approval || approval.status !== 'pending' || approval.expiresAt <= now) {
      throw new ProtocolError('approval_closed', 'This request was decided or has expired already.');
    }
    const left = timeLeft(ctx, approval);
    if (!left.extendable) {
      throw new ProtocolError(
        'approval_closed',
        left.extendByMs === 0
          ? 'This request is open as long as it may be; decide it now, or the agent can ask again.'
          : 'This request is not near its end yet; it can be extended in its last minutes.',
      );
    }
    const expiresAt = approval.expiresAt + left.extendByMs;
    await tx.updateApproval(approval.id, { expiresAt });
    announce(ctx, after, approval.id);
    const agent = await tx.agent(approval.agentId);
    await tx.appendActivity(
      protocolEvent({
        at: now,
        type: 'approval.extended',
        agentId: approval.agentId,
        hostId: approval.hostId,
        userId: agent?.userId ?? null,
        capability: null,
        outcome: 'extended',
        detail: {
          approval_id: approval.id,
          expires_at: new Date(expiresAt).toISOString(),
          by: userId,
          ...(authMethod ? { auth_method: authMethod } : {}),
        },
      }),
    );
    return { ...approval, expiresAt };
  });
}
