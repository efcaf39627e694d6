/**
 * Per-call approvals after they were opened (issue 16 §1; per-call.ts opens them): the
 * addressee's Deny, Approve's once-only claim against the shown hash, the stored outcome, expiry,
 * the agent's poll of the status URL (§5.11: a final state is delivered once, then deleted) and
 * the maintenance sweep. Each change is a compare-and-set on the row's status with its §11
 * activity record in the same transaction.
 *
 * A claimed call whose outcome was never stored (the proxy died, or its database was down, between
 * the claim and the end of the call) would read `pending` until its row is deleted, and then "not
 * found", which an agent could take as "never ran" and send again. Once no call could still be
 * running (`outcomeUnknownAfterMs`), the poll answers `failed` with `outcome: "unknown"` instead:
 * the call may or may not have reached the upstream. The maintenance sweep does the same without a
 * poll, so the operator's list and the §11 activity say so even when the agent never asks again.
 */
import { ProtocolError } from '../errors.js';
import type { PerCallRecord } from '../storage/types.js';
import type { AgentAuth } from './authenticate.js';
import { checkTokenCovers } from './capability-claim.js';
import type { ProtocolContext } from './context.js';
import { PER_CALL_SWEEP_BATCH, shownHash } from './per-call.js';
import { PER_CALL_RESULT_TTL_MS, perCallEvent } from './per-call-events.js';

/**
 * How long after its claim a call may still be running: twice the longest upstream deadline (one
 * OAuth token refresh sends a call twice, sender.ts), plus a minute for the database writes.
 */
export function outcomeUnknownAfterMs(longestCallMs: number): number {
  return 2 * longestCallMs + 60_000;
}

/** Who decided and how they authenticated (§11: on the activity record). */
export interface PerCallDecider {
  readonly actor: string;
  readonly authMethod: string;
  /** Deny only: the approver's reason, plain text, capped. */
  readonly reason?: string;
}

/** Denies a pending call; false when it was no longer pending. Nothing is executed. */
export function denyPerCall(ctx: ProtocolContext, r: PerCallRecord, by: PerCallDecider): Promise<boolean> {
  const now = ctx.clock.now();
  return ctx.write(async (tx) => {
    const moved = await tx.updatePerCall(r.id, 'pending', {
      status: 'failed',
      error: new ProtocolError('approval_denied').toBody(),
      decidedAt: now,
      decidedBy: by.actor,
      keepUntil: now + PER_CALL_RESULT_TTL_MS,
    });
    if (moved) {
      await tx.appendActivity(
        perCallEvent(r, now, 'per_call.denied', 'denied', {
          by: by.actor,
          auth_method: by.authMethod,
          ...(by.reason ? { reason: by.reason } : {}),
        }),
      );
    }
    return moved;
  });
}

/**
 * Approve, before anything is sent: the stored row must still hash to `hash` (what the passkey
 * confirmed) and still be pending and in time; it becomes `executing` in the same transaction,
 * so a second submit (or a second approver) finds nothing to run.
 */
export function claimPerCall(
  ctx: ProtocolContext,
  id: string,
  hash: string,
  by: PerCallDecider,
  unknownAfterMs: number,
): Promise<PerCallRecord | undefined> {
  const now = ctx.clock.now();
  return ctx.write(async (tx) => {
    const r = await tx.perCall(id);
    if (!r || r.status !== 'pending' || r.expiresAt <= now || shownHash(r) !== hash) return undefined;
    const claimed = await tx.updatePerCall(id, 'pending', {
      status: 'executing',
      decidedAt: now,
      decidedBy: by.actor,
      // Kept until a poll can tell the agent the outcome is unknown, should it never be stored.
      keepUntil: Math.max(r.keepUntil, now + unknownAfterMs + PER_CALL_RESULT_TTL_MS),
    });
    if (!claimed) return undefined;
    await tx.appendActivity(
      perCallEvent(r, now, 'per_call.approved', 'approved', {
        by: by.actor,
        auth_method: by.authMethod,
        content_hash: hash,
      }),
    );
    return r;
  });
}

/** Stores the outcome of a claimed call for the agent's poll. */
export function finishPerCall(
  ctx: ProtocolContext,
  r: PerCallRecord,
  outcome: { readonly result: unknown; readonly upstreamStatus: number } | { readonly error: ProtocolError },
): Promise<void> {
  const now = ctx.clock.now();
  const failed = 'error' in outcome;
  return ctx.write(async (tx) => {
    const stored = await tx.updatePerCall(r.id, 'executing', {
      status: failed ? 'failed' : 'completed',
      ...(failed ? { error: outcome.error.toBody() } : { result: outcome.result }),
      keepUntil: now + PER_CALL_RESULT_TTL_MS,
    });
    if (!stored) {
      // Past outcomeUnknownAfterMs a poll already told the agent the outcome is unknown.
      ctx.logger.warn('per-call outcome arrived after it was reported unknown', { call_id: r.id });
      return;
    }
    await tx.appendActivity(
      perCallEvent(r, now, 'per_call.executed', failed ? outcome.error.code : 'success', {
        ...(failed ? {} : { upstream_status: outcome.upstreamStatus }),
      }),
    );
  });
}

/** A pending call past its deadline fails with approval_expired (§5.11 `failed`). */
function expire(ctx: ProtocolContext, r: PerCallRecord): Promise<void> {
  const now = ctx.clock.now();
  return ctx.write(async (tx) => {
    const moved = await tx.updatePerCall(r.id, 'pending', {
      status: 'failed',
      error: new ProtocolError('approval_expired').toBody(),
      keepUntil: now + PER_CALL_RESULT_TTL_MS,
    });
    if (moved) await tx.appendActivity(perCallEvent(r, now, 'per_call.expired', 'expired', {}));
  });
}

/** A claimed call past `unknownAfterMs` with no stored outcome fails as unknown (see the top). */
function abandon(ctx: ProtocolContext, r: PerCallRecord): Promise<void> {
  const now = ctx.clock.now();
  return ctx.write(async (tx) => {
    const moved = await tx.updatePerCall(r.id, 'executing', {
      status: 'failed',
      error: new ProtocolError(
        'internal_error',
        'The call was approved and started, but its outcome was never recorded (the proxy stopped or its database was unavailable). It may or may not have reached the upstream API: check there before sending it again.',
        { fields: { outcome: 'unknown' } },
      ).toBody(),
      keepUntil: now + PER_CALL_RESULT_TTL_MS,
    });
    if (moved) await tx.appendActivity(perCallEvent(r, now, 'per_call.outcome_unknown', 'unknown', {}));
  });
}

export type PerCallState =
  | { readonly status: 'pending' }
  | { readonly status: 'completed'; readonly result: unknown }
  | { readonly status: 'failed'; readonly error: Readonly<Record<string, unknown>> };

/**
 * §5.11 polling of a per-call status URL by `auth`'s agent (the token step has checked a fresh
 * JWT). A final state is delivered once: the row is deleted as it is read.
 */
export async function pollPerCall(
  ctx: ProtocolContext,
  auth: AgentAuth,
  id: string,
  unknownAfterMs: number,
): Promise<PerCallState> {
  let r = await ctx.store.perCall(id);
  if (!r) {
    throw new ProtocolError(
      'execution_not_found',
      'No execution with that id exists: it expired, or its outcome was already delivered.',
    );
  }
  if (r.agentId !== auth.agent.id) {
    throw new ProtocolError('unauthorized', 'This execution belongs to another agent.');
  }
  // §4.3, §4.4: a poll asks for this capability's outcome; a JWT not good for it (scoped to
  // others, or unproven where the policy wants proof) cannot fetch it, nor, a delivery, use it up.
  checkTokenCovers(ctx, auth, r.capability);
  if (r.status === 'pending' && r.expiresAt <= ctx.clock.now()) {
    await expire(ctx, r);
    r = (await ctx.store.perCall(id)) ?? r;
  }
  if (r.status === 'executing' && (r.decidedAt ?? r.createdAt) + unknownAfterMs <= ctx.clock.now()) {
    await abandon(ctx, r);
    r = (await ctx.store.perCall(id)) ?? r;
  }
  if (r.status === 'pending' || r.status === 'executing') return { status: 'pending' };
  // A final row changes no more; whichever poll deletes it delivers it (once).
  const delivered = r;
  const gone = await ctx.write(async (tx) => {
    if (!(await tx.perCall(id))) return false;
    await tx.deletePerCall(id);
    return true;
  });
  if (!gone) throw new ProtocolError('execution_not_found', 'This outcome was already delivered.');
  return delivered.status === 'completed'
    ? { status: 'completed', result: delivered.result }
    : { status: 'failed', error: delivered.error ?? new ProtocolError('internal_error').toBody() };
}

/**
 * Maintenance, in small batches: overdue approvals fail; claimed calls that no longer could be
 * running (`unknownAfterMs`, see the top) fail with an unknown outcome; undelivered outcomes past
 * keep_until go.
 */
export async function sweepPerCalls(
  ctx: ProtocolContext,
  unknownAfterMs: number,
): Promise<{ expired: number; abandoned: number; deleted: number }> {
  const now = ctx.clock.now();
  const overdue = await ctx.store.overduePerCalls(now, PER_CALL_SWEEP_BATCH);
  for (const r of overdue) await expire(ctx, r);
  const lost = await ctx.store.abandonedPerCalls(now - unknownAfterMs, PER_CALL_SWEEP_BATCH);
  for (const r of lost) await abandon(ctx, r);
  return {
    expired: overdue.length,
    abandoned: lost.length,
    deleted: await ctx.store.deleteStalePerCalls(now, PER_CALL_SWEEP_BATCH),
  };
}
