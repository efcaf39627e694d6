/**
 * How a replica's memory follows the other replicas' commits on one PostgreSQL (issue 13): the
 * hot caches of §10.2 and the §10.10.2 notification streams, on the change notices of
 * storage/pg-notify.ts.
 *
 * The bound (§4.5 "revocation takes effect within a bounded window"): a revocation, status change
 * or grant change committed on one replica is refused by every other as soon as its notice
 * arrives (milliseconds), and in any case within 2 s:
 * - while the listening connection works, the notice clears the cache (a lookup that was reading
 *   the store meanwhile does not keep what it read: HotCache.generation);
 * - a connection that fails, closes, or leaves a probe unanswered is found out within
 *   PROBE_INTERVAL_MS + PROBE_TIMEOUT_MS (1.5 s); from then the cache is suspended (every lookup
 *   reads the store) until a new connection listens, and cleared again then, since whatever was
 *   sent in between is lost.
 * A stream waiting on another replica's decision hears it the same way; while notices may be
 * lost, its keep-alive re-read (approval-stream.ts) is the backstop, and every stream looks again
 * when listening resumes.
 */
import type { ChangeHandlers } from '../storage/pg-notify.js';
import type { ProtocolContext } from './context.js';

export function replicaChangeHandlers(ctx: ProtocolContext): ChangeHandlers {
  return {
    onNotice(notice) {
      if (notice.cache) ctx.cache.clear();
      if (notice.approvals === 'all') ctx.approvalEvents.publishAll();
      else for (const id of notice.approvals) ctx.approvalEvents.publish(id);
    },
    onDown(error) {
      ctx.cache.suspend();
      ctx.logger.warn('replica change notices interrupted; caching suspended', { cause: error.message });
    },
    onUp() {
      const resumed = ctx.cache.suspended;
      ctx.cache.resume();
      ctx.approvalEvents.publishAll();
      if (resumed) ctx.logger.info('replica change notices resumed; caching again');
    },
  };
}
