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
import { notificationUrl, NOTIFICATION_PATH } from '../../protocol/approval-events.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { InFlightSlots, type Slot, type SlotOwner } from '../../protocol/in-flight.js';
import { isUnapproved } from '../../protocol/pending-hosts.js';
import type { InFlightLimits } from '../../policy/policy.js';
import type { Timers } from '../../notify/webhook.js';
import type { ApprovalRecord } from '../../storage/types.js';
import { listenForDecision } from '../approval-stream.js';
import { need, step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import type { Router } from '../router.js';
import { principalLimits } from '../steps/limits.js';
import { replayRecord } from '../steps/replay.js';
import { agentOrHostToken, type TokenStepOptions } from '../steps/tokens.js';

/** Default caps on open notification streams (documented in README). */
export const STREAM_LIMITS: InFlightLimits = { perAgent: 4, perHost: 32, total: 1000 };
/**
 * Of those, what hosts nobody has approved may hold together: anyone can make such hosts, and
 * 32 of them with 8 agents each took all 1,000, leaving none for approved hosts (and 1,000 of
 * 1,024 connections open).
 */
export const UNAPPROVED_STREAM_SHARE = 0.2;

interface Listening {
  approval?: ApprovalRecord;
  slot?: Slot;
}

/**
 * The open streams' caps: per agent, per host and in total, and within the total a share for
 * hosts nobody approved (UNAPPROVED_STREAM_SHARE). A refusal takes nothing.
 */
export class NotificationStreamSlots {
  readonly #all: InFlightSlots;
  readonly #strangers: InFlightSlots;

  constructor(limits: InFlightLimits) {
    this.#all = new InFlightSlots(limits);
    const share =
      limits.total === null ? null : Math.max(1, Math.floor(limits.total * UNAPPROVED_STREAM_SHARE));
    this.#strangers = new InFlightSlots({ perAgent: null, perHost: null, total: share });
  }

  /** A slot for a stream of `owner`'s; `unapproved`: its host is one nobody approved. */
  acquire(owner: SlotOwner, unapproved: boolean): Slot {
    const stranger = unapproved ? this.#strangers.acquire(owner) : undefined;
    if (stranger !== undefined && !stranger.ok) {
      throw new ProtocolError(
        'temporarily_unavailable',
        `Hosts awaiting approval already have ${stranger.limit} notification streams open; poll GET /agent/status instead (§7.3).`,
        { headers: { 'retry-after': '5' } },
      );
    }
    const taken = this.#all.acquire(owner);
    if (!taken.ok) {
      if (stranger?.ok) stranger.slot.release();
      const who = { agent: 'This agent', host: 'This host', total: 'The proxy' }[taken.scope];
      throw new ProtocolError(
        taken.scope === 'total' ? 'temporarily_unavailable' : 'rate_limited',
        `${who} already has ${taken.limit} notification streams open; poll GET /agent/status instead (§7.3).`,
        { headers: { 'retry-after': '5' } },
      );
    }
    if (stranger?.ok !== true) return taken.slot;
    return {
      release: () => {
        taken.slot.release();
        stranger.slot.release();
      },
    };
  }
}
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

export function approvalEventRoutes(router: Router, options: ApprovalEventRouteOptions): ApprovalEventRoutes {
  const { ctx, limits, timers } = options;
  const slots = new NotificationStreamSlots(options.streamLimits ?? STREAM_LIMITS);
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
      step('owner', async (x, s) => {
        s.approval = await ownApproval(ctx, x, x.params.id ?? '');
      }),
      step('stream-slot', (x, s) => {
        const approval = need(s.approval, 'approval');
        const host = x.agent ? x.agent.host : x.host?.host;
        s.slot = slots.acquire(
          { agentId: approval.agentId, hostId: approval.hostId },
          host !== undefined && isUnapproved(host),
        );
      }),
      step('stream', (x, s) =>
        listenForDecision(x.res, need(s.approval, 'approval'), { ctx, timers, heartbeatMs, streams }).finally(
          () => s.slot?.release(),
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
async function ownApproval(ctx: ProtocolContext, x: Exchange, id: string): Promise<ApprovalRecord> {
  const approval = await ctx.store.approval(id);
  const mine =
    approval !== undefined &&
    (x.agent ? x.agent.agent.id === approval.agentId : x.host?.host?.id === approval.hostId);
  if (!approval || !mine) throw new ProtocolError('approval_not_found', `No approval request "${id}".`);
  return approval;
}
