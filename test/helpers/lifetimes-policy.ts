/** The policy of the agent lifecycle tests: lifetimes short enough to walk through with the TestClock, and only `pending_cleanup` set by the file. */

/**
 * Delegated and autonomous modes; session_ttl 10m, max_lifetime 1h, absolute_lifetime 3h and
 * pending_cleanup `pendingCleanup`; list_pets a default (and the autonomous grant), delete_pet and
 * place_order high-risk (never auto-approved, §8.10); the per-IP and unknown-host registration
 * rate limits off (they are not what is tested).
 */
export function lifetimesPolicy(pendingCleanup: string): string {
  return `
modes: [delegated, autonomous]
lifetimes:
  session_ttl: 10m
  max_lifetime: 1h
  absolute_lifetime: 3h
  pending_cleanup: ${pendingCleanup}
capabilities:
  defaults: [list_pets]
  high_risk: [delete_pet, place_order]
autonomous:
  grants: [list_pets]
rate_limits:
  per_ip: null
  unknown_host_registration: null
`;
}
