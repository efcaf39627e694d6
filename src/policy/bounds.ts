/** Policy sections that bound what strangers can make the proxy store or remember. */
import type { Problems } from './problems.js';
import type { Policy } from '../protocol/resolved-policy.js';
import type { PolicyFile } from './types.js';

export function resolveBounds(
  raw: Pick<PolicyFile, 'capability_requests' | 'pending_hosts' | 'replay'>,
  problems: Problems,
): Pick<Policy, 'capabilityRequests' | 'pendingHosts' | 'replay'> {
  if (raw.replay.max_entries_per_identity > raw.replay.max_entries) {
    problems.add(
      'replay.max_entries_per_identity',
      `must not exceed replay.max_entries (${raw.replay.max_entries})`,
    );
  }
  return {
    capabilityRequests: Object.freeze({
      maxEntries: raw.capability_requests.max_entries,
      maxConstraintBytes: raw.capability_requests.max_constraint_bytes,
      maxConstraintDepth: raw.capability_requests.max_constraint_depth,
    }),
    pendingHosts: Object.freeze({
      maxHosts: raw.pending_hosts.max_hosts,
      maxAgents: raw.pending_hosts.max_agents,
      maxOpenApprovals: raw.pending_hosts.max_open_approvals,
    }),
    replay: Object.freeze({
      maxEntries: raw.replay.max_entries,
      maxEntriesPerIdentity: raw.replay.max_entries_per_identity,
    }),
  };
}
