/**
 * The operator API under `/admin/`, mounted only when an admin token is configured. Every route
 * starts with the admin token step (admin-steps.ts); each resource's routes are their own module.
 */
import type { ProtocolContext } from '../../protocol/context.js';
import type { Router } from '../router.js';
import type { TokenStepOptions } from '../steps/tokens.js';
import { adminActivityRoutes } from './admin-activity.js';
import { adminAgentRoutes } from './admin-agents.js';
import { adminApprovalRoutes } from './admin-approvals.js';
import { adminHostRoutes } from './admin-hosts.js';
import { adminPerCallRoutes } from './admin-per-call.js';
import { adminSteps } from './admin-steps.js';
import { adminUserRoutes } from './admin-users.js';

export interface AdminRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly adminToken: string;
  readonly maxBodyBytes: number;
  /** Writes queued execution records first, so the activity listing is never behind. */
  readonly flushActivity?: () => Promise<void>;
  /** How long after its claim a per-call approval's call could still be running (per-call-decide.ts). */
  readonly perCallUnknownAfterMs: () => number;
  /** sign_in.first_passkey is operator_code: the operator issues first-passkey enrolment codes. */
  readonly firstPasskeyNeedsCode: boolean;
}

export function adminRoutes(router: Router, options: AdminRouteOptions): void {
  const { ctx } = options;
  const steps = adminSteps(options);
  adminApprovalRoutes(router, ctx, steps);
  adminHostRoutes(router, ctx, steps);
  adminAgentRoutes(router, ctx, steps);
  adminPerCallRoutes(router, {
    ctx,
    read: steps.read,
    change: steps.change,
    reasonOf: (x) => steps.stringOf(x, 'reason'),
    unknownAfterMs: options.perCallUnknownAfterMs,
  });
  adminUserRoutes(router, { ctx, firstPasskeyNeedsCode: options.firstPasskeyNeedsCode, ...steps });
  adminActivityRoutes(router, ctx, steps, options.flushActivity);
}
