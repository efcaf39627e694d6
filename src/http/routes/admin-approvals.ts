/**
 * The operator's approval requests (§7): the open ones (or the one a user code names), and
 * approving or denying one as `admin` (or as the `user_id` given).
 */
import { ProtocolError } from '../../errors.js';
import { approve, deny, type Decision } from '../../protocol/approval-decisions.js';
import { expireApprovals } from '../../protocol/approvals.js';
import { iso, type ProtocolContext } from '../../protocol/context.js';
import { normalizeUserCode } from '../../protocol/user-code.js';
import { agentView } from '../../protocol/views.js';
import type { ApprovalRecord } from '../../storage/types.js';
import { nextCursor, pageOf } from '../listing-page.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { ACTOR, type AdminSteps } from './admin-steps.js';
import { MAX_USER_ID } from './admin-users.js';

export function adminApprovalRoutes(router: Router, ctx: ProtocolContext, steps: AdminSteps): void {
  router.add(
    'GET',
    '/admin/approvals',
    steps.read('list-approvals', async ({ res, url }) => {
      await expireApprovals(ctx);
      const agentId = url.searchParams.get('agent_id') ?? undefined;
      // The code a user read off the device page (§7.1), as they typed it.
      const codeParam = url.searchParams.get('user_code');
      const userCode = codeParam === null ? undefined : normalizeUserCode(codeParam);
      if (codeParam !== null && userCode === undefined) {
        throw new ProtocolError(
          'invalid_request',
          'user_code is not a user code (eight letters, like WDJB-MJHT).',
        );
      }
      const page = pageOf(url);
      // A user code names one approval: looked up by its unique index, not found in a page.
      const byCode = userCode === undefined ? undefined : await ctx.store.approvalByUserCode(userCode);
      const listed =
        userCode === undefined
          ? await ctx.store.approvals({ status: 'pending', ...(agentId ? { agentId } : {}), ...page })
          : [];
      const approvals =
        userCode === undefined
          ? listed
          : [byCode].filter(
              (a): a is ApprovalRecord =>
                a !== undefined && a.status === 'pending' && (!agentId || a.agentId === agentId),
            );
      const names = new Map<string, string | undefined>();
      for (const a of approvals) {
        if (!names.has(a.agentId)) names.set(a.agentId, (await ctx.store.agent(a.agentId))?.name);
      }
      sendJson(res, 200, {
        ...nextCursor(listed, page.limit),
        approvals: approvals.map((a) => ({
          id: a.id,
          kind: a.kind,
          agent_id: a.agentId,
          host_id: a.hostId,
          user_code: a.userCode,
          method: a.method,
          capabilities: a.capabilities.map((c) => ({
            name: c.name,
            ...(c.constraints ? { constraints: c.constraints } : {}),
          })),
          ...(a.reason ? { reason: a.reason } : {}),
          ...(a.loginHint ? { login_hint: a.loginHint } : {}),
          ...(a.bindingMessage ? { binding_message: a.bindingMessage } : {}),
          agent_name: names.get(a.agentId),
          created_at: iso(a.createdAt),
          expires_at: iso(a.expiresAt),
        })),
      });
    }),
  );

  router.add(
    'POST',
    '/admin/approvals/:id/approve',
    steps.change('approve', async (rc) => {
      const b = steps.bodyOf(rc);
      const caps = b.capabilities;
      if (caps !== undefined && (!Array.isArray(caps) || caps.some((c) => typeof c !== 'string'))) {
        throw new ProtocolError('invalid_request', 'capabilities must be an array of capability names.');
      }
      const constraints = b.constraints;
      if (
        constraints !== undefined &&
        (constraints === null || typeof constraints !== 'object' || Array.isArray(constraints))
      ) {
        throw new ProtocolError('invalid_request', 'constraints must be an object keyed by capability name.');
      }
      const userId = steps.stringOf(rc, 'user_id', MAX_USER_ID);
      const reason = steps.stringOf(rc, 'reason');
      const decision = await approve(ctx, rc.params.id ?? '', {
        ...(userId ? { userId } : {}),
        ...(caps ? { capabilities: caps as string[] } : {}),
        ...(constraints ? { constraints: constraints as Record<string, unknown> } : {}),
        ...(reason ? { reason } : {}),
        actor: ACTOR,
        origin: steps.originOf(rc),
      });
      sendJson(rc.res, 200, await decisionView(ctx, decision, { withApproved: true }));
    }),
  );

  router.add(
    'POST',
    '/admin/approvals/:id/deny',
    steps.change('deny', async (rc) => {
      const reason = steps.stringOf(rc, 'reason');
      const decision = await deny(ctx, rc.params.id ?? '', {
        ...(reason ? { reason } : {}),
        actor: ACTOR,
        origin: steps.originOf(rc),
      });
      sendJson(rc.res, 200, await decisionView(ctx, decision, { withApproved: false }));
    }),
  );
}

/** What Approve and Deny answer: the request's new status, and the agent as it now stands. */
async function decisionView(
  ctx: ProtocolContext,
  decision: Decision,
  { withApproved }: { readonly withApproved: boolean },
): Promise<Record<string, unknown>> {
  const grants = await ctx.store.grants(decision.agent.id);
  return {
    id: decision.approval.id,
    status: decision.approval.status,
    ...(withApproved ? { approved: decision.approved } : {}),
    denied: decision.denied,
    agent: agentView(ctx, decision.agent, grants, undefined, { audit: true }),
  };
}
