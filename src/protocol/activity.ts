/** §11 activity records for protocol events (registration, approval, revocation, …). */
import type { ActivityRecord } from '../storage/types.js';

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
