/**
 * Why a grant no longer lets its agent act (issue 16 §5, the account page): derived from the
 * grant's status and expiry (§3.3) and its agent's status (§2.4–§2.6), never stored, so it cannot
 * disagree with what execution enforces.
 *
 * Extension point: per-call approvals (another branch) end a one-use grant once it was used; they
 * add their condition in `grantEnding` below, returning 'used', and its text to the page's table.
 */
import type { AgentRecord, GrantRecord } from '../storage/types.js';

export type GrantEnding =
  /** The grant itself was revoked (reactivation reset, host unlinked or revoked, claimed). */
  | 'revoked'
  /** The grant's own `expires_at` passed (§3.3). */
  | 'expired'
  /** The user (or the approval's expiry) denied it. */
  | 'denied'
  /** A one-use grant was used (per-call approvals). */
  | 'used'
  /** The grant stands, but its agent was revoked, rejected or claimed: it can never be used. */
  | 'agent_revoked'
  /** The agent's session expired (§2.4): reactivation resets its grants to the host's defaults. */
  | 'agent_expired';

/** Why `grant` ended, or null while it is allowed or still asked for. */
export function grantEnding(grant: GrantRecord, agent: AgentRecord, now: number): GrantEnding | null {
  if (grant.status === 'denied') return 'denied';
  if (grant.status === 'revoked') return 'revoked';
  if (grant.status === 'pending') return null;
  // Active from here on.
  if (grant.expiresAt !== null && grant.expiresAt <= now) return 'expired';
  if (agent.status === 'revoked' || agent.status === 'rejected' || agent.status === 'claimed') {
    return 'agent_revoked';
  }
  if (agent.status === 'expired') return 'agent_expired';
  return null;
}
