/** §11: the activity record of one execution attempt, whatever its outcome. */
import type { ActivityRecord } from '../storage/types.js';
import { printable } from '../util/control-characters.js';
import type { AgentAuth } from './authenticate.js';
import type { ProtocolContext } from './context.js';

/** What one execution attempt leaves in the activity log. */
export interface ExecutionAttempt {
  readonly auth: AgentAuth;
  /** The capability name as the agent sent it: it may not exist in the catalog. */
  readonly capability: string;
  readonly args: Readonly<Record<string, unknown>>;
  /** `success`, or the error code. */
  readonly outcome: string;
  readonly latencyMs: number;
  readonly upstreamStatus: number | null;
  readonly requestId: string;
  readonly message?: string;
  /** More of what happened, e.g. the async job a status poll read (§5.11). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

export function executionRecord(ctx: ProtocolContext, attempt: ExecutionAttempt): ActivityRecord {
  const { auth } = attempt;
  return {
    at: ctx.clock.now(),
    type: 'execute',
    agentId: auth.agent.id,
    hostId: auth.host.id,
    userId: auth.agent.userId,
    // Bounded and printable: the name is the agent's and may be anything, a NUL included, which
    // PostgreSQL's text refuses (one refused record would hold back the batch it is in).
    capability: printable(attempt.capability.slice(0, 128)),
    outcome: attempt.outcome,
    detail: {
      request_id: attempt.requestId,
      ...(attempt.message !== undefined ? { message: attempt.message } : {}),
      ...attempt.extra,
      // §11: arguments can hold personal data; recorded only when the policy says so.
      ...(ctx.policy.audit.logArguments ? { arguments: attempt.args } : {}),
    },
    jti: typeof auth.claims.jti === 'string' ? auth.claims.jti : null,
    latencyMs: Math.round(attempt.latencyMs * 1000) / 1000,
    upstreamStatus: attempt.upstreamStatus,
  };
}
