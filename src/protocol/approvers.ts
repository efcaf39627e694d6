/**
 * The policy's `approval.approvers`: the users CIBA reaches (§7.2), and who may decide what is
 * addressed to approvers rather than to one user (per-call approvals of an agent that acts for
 * nobody). One question, asked in one place.
 */
import type { ProtocolContext } from './context.js';

export function isApprover(ctx: ProtocolContext, userId: string): boolean {
  return ctx.policy.approval.approvers.includes(userId);
}
