/**
 * §10.10.2 `GET /agent/events/{approval id}`: the approval's notification stream. Steps: agent or
 * host JWT → limits → replay record → owner check → a stream slot → the stream, which sends one
 * `event: approval` when the approval is approved, denied or expires (at once when that already
 * happened), keep-alive comments while it waits, and closes. Polling §5.5 is unchanged; a client
 * whose stream fails falls back to it (§7.3).
 *
 * Who may listen (§5.5 is host-authenticated; the agent JWT is accepted too):
 * - the approval's agent, with its agent JWT (a capability request of an active agent);
 * - the approval's host, with its host JWT: the only way while the agent is pending (registration,
 *   reactivation), since a pending agent's JWT is refused (`agent_pending`).
 * Anyone else gets `404 approval_not_found`, as for an id that does not exist: the stream does not
 * tell strangers which approval ids exist.
 *
 * Bounds: open streams are capped per agent, per host and in total (STREAM_LIMITS; a full cap is
 * `429 rate_limited`, the proxy-wide one `503 temporarily_unavailable`); a stream holds no upstream
 * slot; it ends at the approval's expiry at the latest, and at shutdown (`closeStreams`).
 */
import { ProtocolError } from '../../errors.js';
import {
  finalStatus,
  notificationData,
  notificationUrl,
  NOTIFICATION_PATH,
  type NotificationStatus,
} from '../../protocol/approval-events.js';
import { expireApprovals } from '../../protocol/approvals.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { InFlightSlots, type Slot } from '../../protocol/in-flight.js';
import type { InFlightLimits } from '../../policy/types.js';
import type { Timers } from '../../notify/webhook.js';
import type { ApprovalRecord } from '../../storage/types.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { principalLimits } from '../steps/limits.js';
import { replayRecord } from '../steps/replay.js';
import { agentOrHostToken, type TokenStepOptions } from '../steps/tokens.js';

/** Default caps on open notification streams (documented in README). */
export const STREAM_LIMITS: InFlightLimits = { perAgent: 4, perHost: 32, total: 1000 };
/** A comment line this often keeps proxies and clients from timing the idle stream out. */
export const HEARTBEAT_MS = 15_000;

export interface ApprovalEventRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  /** Real timers in production; tests drive expiry and heartbeats by hand. */
  readonly timers: Timers;
  readonly streamLimits?: InFlightLimits;
  readonly heartbeatMs?: number;
}

export interface ApprovalEventRoutes {
  /** Ends every open stream with an `error` event (the client falls back to polling). */
  closeStreams(): void;
  /** Open streams (tests check that none is left behind). */
  readonly open: number;
}

interface Listening {
  approval?: ApprovalRecord;
  slot?: Slot;
}

export function approvalEventRoutes(router: Router, options: ApprovalEventRouteOptions): ApprovalEventRoutes {
  const { ctx, limits, timers } = options;
  const slots = new InFlightSlots(options.streamLimits ?? STREAM_LIMITS);
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const streams = new Set<(error?: ProtocolError) => void>();

  router.addWithState<Listening>(
    'GET',
    `${NOTIFICATION_PATH}/:id`,
    [
      // The audience may be the notification URL itself, like a §5.11 status URL, or the issuer.
      agentOrHostToken(options, (x) => [notificationUrl(ctx.issuer(), x.params.id ?? ''), ctx.issuer()], {
        allowPending: true,
        allowRejected: true,
      }),
      principalLimits(limits),
      replayRecord(ctx),
      step('owner', (x, s) => {
        s.approval = ownApproval(ctx, x, x.params.id ?? '');
      }),
      step('stream-slot', (_x, s) => {
        const approval = need(s.approval, 'approval');
        const taken = slots.acquire({ agentId: approval.agentId, hostId: approval.hostId });
        if (!taken.ok) {
          const who = { agent: 'This agent', host: 'This host', total: 'The proxy' }[taken.scope];
          throw new ProtocolError(
            taken.scope === 'total' ? 'temporarily_unavailable' : 'rate_limited',
            `${who} already has ${taken.limit} notification streams open; poll GET /agent/status instead (§7.3).`,
            { headers: { 'retry-after': '5' } },
          );
        }
        s.slot = taken.slot;
      }),
      step('stream', (x, s) =>
        listen(x, need(s.approval, 'approval'), { ctx, timers, heartbeatMs, streams }).finally(() =>
          s.slot?.release(),
        ),
      ),
    ],
    () => ({}),
    (_x, s) => s.slot?.release(),
  );

  return {
    closeStreams: () => {
      for (const finish of [...streams]) {
        finish(
          new ProtocolError('temporarily_unavailable', 'The proxy is shutting down; poll GET /agent/status.'),
        );
      }
    },
    get open() {
      return streams.size;
    },
  };
}

/** The approval, when the caller is its agent or its agent's host; otherwise as if it did not exist. */
function ownApproval(ctx: ProtocolContext, x: Exchange, id: string): ApprovalRecord {
  const approval = ctx.store.approval(id);
  const mine =
    approval !== undefined &&
    (x.agent ? x.agent.agent.id === approval.agentId : x.host?.host?.id === approval.hostId);
  if (!approval || !mine) throw new ProtocolError('approval_not_found', `No approval request "${id}".`);
  return approval;
}

interface StreamDeps {
  readonly ctx: ProtocolContext;
  readonly timers: Timers;
  readonly heartbeatMs: number;
  readonly streams: Set<(error?: ProtocolError) => void>;
}

/** Runs one stream until its event is sent, the client goes away or the proxy shuts down. */
function listen(x: Exchange, approval: ApprovalRecord, deps: StreamDeps): Promise<void> {
  const { ctx, timers, heartbeatMs, streams } = deps;
  const { res } = x;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
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
    const check = (): void => {
      if (finished) return;
      let current = ctx.store.approval(approval.id);
      const now = ctx.clock.now();
      if (current?.status === 'pending' && current.expiresAt <= now) {
        // Past its expiry: the sweep runs now rather than when maintenance next comes round, so the
        // event and a status poll agree (it publishes to us; `finished` makes that a no-op).
        expireApprovals(ctx);
        current = ctx.store.approval(approval.id);
      }
      // Gone (pending cleanup, §10.9): it can no longer be approved.
      if (!current) {
        finish(undefined, approvalEvent(ctx, approval, 'expired'));
        return;
      }
      const status = finalStatus(current, now);
      if (status !== undefined) {
        finish(undefined, approvalEvent(ctx, current, status));
        return;
      }
      armExpiry(current.expiresAt - now);
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
    res.once('close', () => finish());
    streams.add(finish);
    cancelHeartbeat = timers.set(heartbeat, heartbeatMs);
    check();
  });
}

function approvalEvent(ctx: ProtocolContext, approval: ApprovalRecord, status: NotificationStatus): string {
  const data = notificationData(ctx.store, approval, status);
  return `event: approval\nid: ${approval.id}\ndata: ${JSON.stringify(data)}\n\n`;
}
