/**
 * §7.2: with CIBA "the server notifies the user through its notification channel"; device requests
 * may be announced the same way. This module decides WHAT an approver is told about a new approval
 * request; delivering it (a signed webhook, retries) is src/notify/webhook.ts, wired in app.ts.
 *
 * A notice carries a link to the page where the person decides, never a way to decide: clicking a
 * link in a chat or mail is not the person (§8.11 — agents may read those channels), so the
 * decision still needs a sign-in, fresh authentication and, for data-changing grants, a passkey.
 * The agent's `reason` is left out (§9.5: it may hold personal data); the page shows it.
 */
import type { AgentRecord, ApprovalRecord, PerCallRecord, StoreReader } from '../storage/types.js';
import { approvalObject } from './approval-object.js';
import { iso, type ProtocolContext } from './context.js';
import type { ApprovalNotice, PerCallNotice } from './notices.js';

/** What the addressee of a per-call approval is told (read inside its transaction). */
export async function perCallNotice(
  ctx: ProtocolContext,
  tx: StoreReader,
  r: PerCallRecord,
  agent: AgentRecord,
): Promise<PerCallNotice> {
  const hostName = (await tx.host(r.hostId))?.name ?? null;
  const capability = ctx.catalog.get(r.capability);
  const description = capability?.description.split('\n')[0]?.trim();
  return {
    type: 'approval.requested',
    event: 'per_call',
    approval: {
      id: r.id,
      kind: 'per_call',
      url: `${ctx.issuer()}/approvals/calls/${r.id}`,
      created_at: iso(r.createdAt) ?? '',
      expires_at: iso(r.expiresAt) ?? '',
    },
    user_id: r.userId,
    agent: { id: agent.id, name: agent.name, mode: agent.mode },
    host: { id: r.hostId, name: hostName },
    capability: {
      name: r.capability,
      ...(description ? { description } : {}),
      method: capability?.operation.method.toUpperCase() ?? 'POST',
    },
  };
}

/** What the approver is told about a new approval request (read inside its transaction). */
export async function approvalNotice(
  ctx: ProtocolContext,
  tx: StoreReader,
  approval: ApprovalRecord,
  agent: AgentRecord,
): Promise<ApprovalNotice> {
  const host = await tx.host(approval.hostId);
  const ciba = approval.method === 'ciba';
  const url = ciba
    ? `${ctx.issuer()}/approvals`
    : String(approvalObject(ctx, approval).verification_uri_complete);
  return {
    type: 'approval.requested',
    event: ciba ? 'ciba' : 'device',
    approval: {
      id: approval.id,
      kind: approval.kind,
      method: approval.method,
      url,
      ...(ciba ? {} : { user_code: approval.userCode }),
      ...(approval.bindingMessage ? { binding_message: approval.bindingMessage } : {}),
      created_at: iso(approval.createdAt) ?? '',
      expires_at: iso(approval.expiresAt) ?? '',
    },
    user_id: (ciba ? approval.loginHint : null) ?? agent.userId ?? host?.userId ?? null,
    agent: { id: agent.id, name: agent.name, mode: agent.mode },
    host: { id: approval.hostId, name: host?.name ?? null },
    capabilities: approval.capabilities.map((c) => {
      const capability = ctx.catalog.get(c.name);
      const description = capability?.description.split('\n')[0]?.trim();
      return {
        name: c.name,
        ...(description ? { description } : {}),
        ...(capability ? { method: capability.operation.method.toUpperCase() } : {}),
        high_risk: ctx.policy.highRisk.has(c.name),
        ...(c.constraints ? { constraints: c.constraints } : {}),
      };
    }),
  };
}
