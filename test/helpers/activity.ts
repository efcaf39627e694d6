/** A bare activity record (§11) of `type` at `at`, for tests that fill the activity table directly. */
import type { ActivityRecord } from '../../src/storage/types.js';

export function activityRecord(at: number, type: string): ActivityRecord {
  return {
    at,
    type,
    agentId: null,
    hostId: null,
    userId: null,
    capability: null,
    outcome: 'success',
    detail: null,
    jti: null,
    latencyMs: null,
    upstreamStatus: null,
  };
}
