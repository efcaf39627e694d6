/**
 * The §10.10.2 notification stream of one approval, once its listener is authorized
 * (routes/approval-events.ts): `200 text/event-stream`, one `event: approval` when the approval is
 * approved, denied or expires (at once when that already happened), `: keep-alive` comments while
 * it waits, then the end. Decisions arrive through the in-process hub (ctx.approvalEvents); expiry
 * through a timer at the approval's expiry, re-armed when it was extended; each keep-alive
 * re-reads the approval too, as a backstop for a change nobody published.
 */
import type { ServerResponse } from 'node:http';
import { toProtocolError, type ProtocolError } from '../errors.js';
import { finalStatus, notificationData, type NotificationStatus } from '../protocol/approval-events.js';
import { expireApprovals } from '../protocol/approvals.js';
import type { ProtocolContext } from '../protocol/context.js';
import type { Timers } from '../notify/webhook.js';
import type { ApprovalRecord } from '../storage/types.js';

export interface StreamDeps {
  readonly ctx: ProtocolContext;
  readonly timers: Timers;
  readonly heartbeatMs: number;
  readonly streams: Set<(error?: ProtocolError) => void>;
}

/** Runs one stream until its event is sent, the client goes away or the proxy shuts down. */
export function listenForDecision(
  res: ServerResponse,
  approval: ApprovalRecord,
  deps: StreamDeps,
): Promise<void> {
  const { ctx, timers, heartbeatMs, streams } = deps;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  // HEAD is answered by GET routes: it gets the headers, and holds no stream open.
  if (res.req.method === 'HEAD') {
    res.end();
    return Promise.resolve();
  }
  res.flushHeaders();
  return new Promise<void>((resolve) => {
    let finished = false;
    let cancelHeartbeat = (): void => {};
    let cancelExpiry = (): void => {};
    const unsubscribe = ctx.approvalEvents.subscribe(approval.id, () => check());
    const finish = (error?: ProtocolError, event?: string): void => {
      if (finished) return;
      finished = true;
      streams.delete(finish);
      unsubscribe();
      cancelHeartbeat();
      cancelExpiry();
      if (error) res.write(`event: error\ndata: ${JSON.stringify(error.toBody())}\n\n`);
      res.end(event);
      resolve();
    };
    // Reads the committed state: the hub only says "look again".
    const look = async (): Promise<void> => {
      let current = await ctx.store.approval(approval.id);
      const now = ctx.clock.now();
      if (current?.status === 'pending' && current.expiresAt <= now) {
        // Past its expiry: the sweep runs now rather than when maintenance next comes round, so the
        // event and a status poll agree (it publishes to us; `finished` makes that a no-op).
        await expireApprovals(ctx);
        current = await ctx.store.approval(approval.id);
      }
      if (finished) return;
      // Gone (pending cleanup, §10.9): it can no longer be approved.
      if (!current) {
        const event = await approvalEvent(ctx, approval, 'expired');
        finish(undefined, event);
        return;
      }
      const status = finalStatus(current, now);
      if (status !== undefined) {
        const event = await approvalEvent(ctx, current, status);
        finish(undefined, event);
        return;
      }
      armExpiry(current.expiresAt - now);
    };
    // Checks may overlap (a publish during a keep-alive's read): `finish` runs once. A store
    // failure ends the stream with an error event.
    const check = (): void => {
      if (finished) return;
      look().catch((err: unknown) => {
        finish(toProtocolError(err));
      });
    };
    // A timer at the approval's expiry: it fires though nobody polls; re-armed when it was extended.
    const armExpiry = (ms: number): void => {
      cancelExpiry();
      cancelExpiry = timers.set(check, Math.max(1, ms));
    };
    const heartbeat = (): void => {
      res.write(': keep-alive\n\n');
      // Also catches an approval closed without a publish (agent revoked or claimed meanwhile).
      check();
      if (!finished) cancelHeartbeat = timers.set(heartbeat, heartbeatMs);
    };
    // The client may have gone while an earlier step waited (the owner lookup on PostgreSQL):
    // its 'close' is then past, and the stream would keep its slot and timers until the decision.
    if (res.destroyed) {
      finish();
      return;
    }
    res.once('close', () => finish());
    streams.add(finish);
    cancelHeartbeat = timers.set(heartbeat, heartbeatMs);
    check();
  });
}

async function approvalEvent(
  ctx: ProtocolContext,
  approval: ApprovalRecord,
  status: NotificationStatus,
): Promise<string> {
  const data = await notificationData(ctx.store, approval, status);
  return `event: approval\nid: ${approval.id}\ndata: ${JSON.stringify(data)}\n\n`;
}
