/**
 * The operator's activity log (§11), newest first, by agent, host, capability or time window; a
 * page ends with the cursor of the next. Queued execution records are written first.
 */
import { ProtocolError } from '../../errors.js';
import { iso, type ProtocolContext } from '../../protocol/context.js';
import type { ActivityRecord } from '../../storage/types.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import type { AdminSteps } from './admin-steps.js';

export function adminActivityRoutes(
  router: Router,
  ctx: ProtocolContext,
  steps: AdminSteps,
  flushActivity: (() => Promise<void>) | undefined,
): void {
  router.add(
    'GET',
    '/admin/activity',
    steps.read('activity', async ({ res, url }) => {
      await flushActivity?.();
      const q = url.searchParams;
      const limit = q.get('limit') === null ? 100 : Number(q.get('limit'));
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new ProtocolError('invalid_request', 'limit must be a whole number from 1 to 1000.');
      }
      const time = (key: string): number | undefined => {
        const v = q.get(key);
        if (v === null) return undefined;
        const t = Date.parse(v);
        if (Number.isNaN(t)) throw new ProtocolError('invalid_request', `${key} must be an ISO 8601 time.`);
        return t;
      };
      const cursor = q.get('cursor');
      if (cursor !== null && !/^\d{1,15}$/.test(cursor))
        throw new ProtocolError('invalid_request', 'cursor is not valid.');
      const since = time('since');
      const until = time('until');
      const rows = await ctx.store.activity({
        ...(q.get('agent_id') ? { agentId: q.get('agent_id') as string } : {}),
        ...(q.get('host_id') ? { hostId: q.get('host_id') as string } : {}),
        ...(q.get('capability') ? { capability: q.get('capability') as string } : {}),
        ...(since !== undefined ? { since } : {}),
        ...(until !== undefined ? { until } : {}),
        ...(cursor !== null ? { beforeId: Number(cursor) } : {}),
        limit,
      });
      sendJson(res, 200, {
        activity: rows.map(activityView),
        next_cursor: rows.length === limit ? String(rows[rows.length - 1]?.id ?? '') : null,
      });
    }),
  );
}

function activityView(r: ActivityRecord): Record<string, unknown> {
  return {
    id: r.id,
    at: iso(r.at),
    type: r.type,
    agent_id: r.agentId,
    host_id: r.hostId,
    user_id: r.userId,
    capability: r.capability,
    outcome: r.outcome,
    ...(r.detail ? { detail: r.detail } : {}),
    ...(r.jti ? { jti: r.jti } : {}),
    ...(r.latencyMs !== null ? { latency_ms: r.latencyMs } : {}),
    ...(r.upstreamStatus !== null ? { upstream_status: r.upstreamStatus } : {}),
  };
}
