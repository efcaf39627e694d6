/**
 * The operator's view of per-call approvals (issue 16 §1), under the admin token like the rest
 * of `/admin/`:
 *
 *   GET  /admin/per-call-approvals?status=&limit=&cursor=   newest first, keyset paginated
 *   POST /admin/per-call-approvals/{id}/deny                the call fails with approval_denied
 *
 * The operator can deny a call but never approve one: approving takes the addressee's passkey on
 * the page (§8.11), so that a person confirms the exact arguments.
 */
import { ProtocolError } from '../../errors.js';
import { iso, type ProtocolContext } from '../../protocol/context.js';
import { isPerCallId } from '../../protocol/per-call.js';
import { denyPerCall, sweepPerCalls } from '../../protocol/per-call-decide.js';
import type { PerCallRecord, PerCallStatus } from '../../storage/types.js';
import type { Exchange } from '../pipeline.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import type { AdminSteps } from './admin-steps.js';

const STATUSES: readonly PerCallStatus[] = ['pending', 'executing', 'completed', 'failed'];
const CURSOR = /^(\d{1,15})~(call_[A-Za-z0-9_-]{1,64})$/;

export interface AdminPerCallOptions {
  readonly ctx: ProtocolContext;
  readonly read: AdminSteps['read'];
  readonly change: AdminSteps['change'];
  /** The deny reason from the JSON body, checked. */
  readonly reasonOf: (x: Exchange) => string | undefined;
  /** How long after its claim a call could still be running: past that the sweep says "unknown". */
  readonly unknownAfterMs: () => number;
}

export function adminPerCallRoutes(
  router: Router,
  { ctx, read, change, reasonOf, unknownAfterMs }: AdminPerCallOptions,
): void {
  router.add(
    'GET',
    '/admin/per-call-approvals',
    read('list-per-call', async ({ res, url }) => {
      await sweepPerCalls(ctx, unknownAfterMs());
      const q = url.searchParams;
      const limit = q.get('limit') === null ? 50 : Number(q.get('limit'));
      if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
        throw new ProtocolError('invalid_request', 'limit must be a whole number from 1 to 200.');
      }
      const status = q.get('status');
      if (status !== null && !STATUSES.includes(status as PerCallStatus)) {
        throw new ProtocolError('invalid_request', `status must be one of ${STATUSES.join(', ')}.`);
      }
      const cursor = q.get('cursor');
      const at = cursor === null ? null : CURSOR.exec(cursor);
      if (cursor !== null && !at) throw new ProtocolError('invalid_request', 'cursor is not valid.');
      const rows = await ctx.store.perCalls({
        ...(status !== null ? { status: status as PerCallStatus } : {}),
        ...(at ? { before: { createdAt: Number(at[1]), id: at[2] as string } } : {}),
        limit,
      });
      const last = rows.at(-1);
      sendJson(res, 200, {
        per_call_approvals: rows.map(view),
        next_cursor: rows.length === limit && last ? `${last.createdAt}~${last.id}` : null,
      });
    }),
  );

  router.add(
    'POST',
    '/admin/per-call-approvals/:id/deny',
    change('deny-per-call', async (x) => {
      const id = x.params.id ?? '';
      const r = isPerCallId(id) ? await ctx.store.perCall(id) : undefined;
      if (!r || r.status !== 'pending' || r.expiresAt <= ctx.clock.now()) {
        throw new ProtocolError('approval_not_found', 'No pending per-call approval has that id.');
      }
      const reason = reasonOf(x);
      const by = { actor: 'admin', authMethod: 'admin_token', ...(reason ? { reason } : {}) };
      if (!(await denyPerCall(ctx, r, by))) {
        throw new ProtocolError('approval_closed', 'The call was decided meanwhile.');
      }
      sendJson(x.res, 200, view((await ctx.store.perCall(id)) ?? r));
    }),
  );
}

function view(r: PerCallRecord): Record<string, unknown> {
  return {
    id: r.id,
    agent_id: r.agentId,
    host_id: r.hostId,
    user_id: r.userId,
    capability: r.capability,
    arguments: r.arguments,
    status: r.status,
    ...(r.error ? { error: r.error } : {}),
    created_at: iso(r.createdAt),
    expires_at: iso(r.expiresAt),
    ...(r.decidedAt !== null ? { decided_at: iso(r.decidedAt), decided_by: r.decidedBy } : {}),
  };
}
