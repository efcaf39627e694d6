/** §11 activity records for protocol events (registration, approval, revocation, …). */
import type { ActivityRecord, AgentRecord } from '../storage/types.js';

/**
 * A protocol event: latency and upstream status belong to executions and stay empty; `jti` is
 * the JWT of the request that caused it, when there was one.
 */
export function protocolEvent(
  event: Omit<ActivityRecord, 'id' | 'jti' | 'latencyMs' | 'upstreamStatus'> & { readonly jti?: unknown },
): ActivityRecord {
  return {
    ...event,
    jti: typeof event.jti === 'string' ? event.jti : null,
    latencyMs: null,
    upstreamStatus: null,
  };
}

/** The activity record (§11) of a protocol event that happened to `agent` (under its host and user). */
export function agentEvent(
  agent: Pick<AgentRecord, 'id' | 'hostId' | 'userId'>,
  event: {
    readonly at: number;
    readonly type: string;
    readonly outcome: string;
    readonly detail: Record<string, unknown> | null;
    /** The JWT of the request that caused it, when there was one. */
    readonly jti?: unknown;
  },
): ActivityRecord {
  return protocolEvent({
    ...event,
    agentId: agent.id,
    hostId: agent.hostId,
    userId: agent.userId,
    capability: null,
  });
}

/** What happened to one person's sign-in or passkeys (not to an agent or host). */
export type UserEventType =
  | 'user.passkey_added'
  | 'user.passkey_removed'
  | 'user.passkey_code_issued'
  | 'user.signed_out'
  | 'user.removed';

/** The activity record (§11) of a change to `userId`'s passkeys or sessions. */
export function userEvent(
  type: UserEventType,
  userId: string,
  at: number,
  detail: Readonly<Record<string, unknown>>,
): ActivityRecord {
  return protocolEvent({
    at,
    type,
    agentId: null,
    hostId: null,
    userId,
    capability: null,
    outcome: 'ok',
    detail,
  });
}
