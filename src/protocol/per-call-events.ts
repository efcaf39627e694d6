/**
 * A per-call approval's activity records and its outcome's lifetime, shared by the modules that
 * open, decide and close one (per-call.ts, per-call-decide.ts, lifecycle.ts), and the closing of
 * an agent's pending ones when the agent can no longer run them.
 */
import { ProtocolError, type ErrorCode } from '../errors.js';
import type { PerCallRecord, StoreWriter } from '../storage/types.js';
import { protocolEvent } from './activity.js';

/** How long an outcome waits for the agent's poll after the call ended (then it is deleted). */
export const PER_CALL_RESULT_TTL_MS = 15 * 60_000;

/** A §11 activity record of a per-call approval. */
export function perCallEvent(
  r: PerCallRecord,
  at: number,
  type: string,
  outcome: string,
  detail: Record<string, unknown>,
): ReturnType<typeof protocolEvent> {
  return protocolEvent({
    at,
    type,
    agentId: r.agentId,
    hostId: r.hostId,
    userId: r.userId,
    capability: r.capability,
    outcome,
    detail: { call_id: r.id, ...detail },
  });
}

/**
 * Fails the agent's pending per-call approvals with `code` (the agent was revoked, claimed, …).
 * Left pending, they stayed in the approver's inbox asking for a passkey confirmation of a call
 * that could no longer run. Each update takes its row out of `pending`, so the batches end.
 */
export async function closePendingPerCalls(
  tx: StoreWriter,
  agentId: string,
  now: number,
  code: ErrorCode,
): Promise<void> {
  for (let batch = await tx.pendingPerCallsOf(agentId, 100); batch.length > 0;) {
    for (const r of batch) {
      const moved = await tx.updatePerCall(r.id, 'pending', {
        status: 'failed',
        error: new ProtocolError(code).toBody(),
        keepUntil: now + PER_CALL_RESULT_TTL_MS,
      });
      if (moved) await tx.appendActivity(perCallEvent(r, now, 'per_call.closed', code, {}));
    }
    batch = await tx.pendingPerCallsOf(agentId, 100);
  }
}
