/**
 * §10.10.2 real-time approval notification: an in-process hub that tells listeners an approval
 * was decided (approved, denied) or ended (expired, superseded, closed), and the one event each
 * listener sends. Publishers call `publish` after their transaction commits (ctx.write's `after`), so
 * nothing is announced that did not happen; listeners read the committed state themselves, so a
 * late or repeated publish sends the same, true event.
 *
 * The hub holds only the listeners of open streams (bounded by the stream caps of the route), and
 * knows nothing of HTTP: the route (src/http/routes/approval-events.ts) owns sockets and timers.
 */
import type { ApprovalRecord, ApprovalStatus, StoreReader } from '../storage/types.js';

/** Path of an approval's notification stream, relative to the issuer (§10.10.2). */
export const NOTIFICATION_PATH = '/agent/events';

export type ApprovalListener = () => void;

export class ApprovalEvents {
  readonly #listeners = new Map<string, Set<ApprovalListener>>();

  /** Calls `listener` whenever approval `id` may have changed; the returned function unsubscribes. */
  subscribe(id: string, listener: ApprovalListener): () => void {
    let set = this.#listeners.get(id);
    if (!set) {
      set = new Set();
      this.#listeners.set(id, set);
    }
    set.add(listener);
    return () => {
      const current = this.#listeners.get(id);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.#listeners.delete(id);
    };
  }

  /** Approval `id` changed (committed). Listeners run now; one that throws does not stop the others. */
  publish(id: string): void {
    const set = this.#listeners.get(id);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener();
      } catch {
        // A listener's failure is its stream's problem (it closes itself); the decision stands.
      }
    }
  }

  /** Every approval may have changed (notices from other replicas were lost, or too many to name). */
  publishAll(): void {
    for (const id of [...this.#listeners.keys()]) this.publish(id);
  }

  /** Approvals with listeners (for tests: nothing is left behind once streams close). */
  get listening(): number {
    return this.#listeners.size;
  }
}

/** The absolute notification URL of an approval: on the issuer's own origin (§8.12). */
export function notificationUrl(issuer: string, approvalId: string): string {
  return `${issuer}${NOTIFICATION_PATH}/${encodeURIComponent(approvalId)}`;
}

/** What the stream's one event says: the approval's end state (`event: approval`). */
export type NotificationStatus = 'approved' | 'denied' | 'expired';

/** The final status an approval's listeners hear; undefined while it is still open. */
export function finalStatus(approval: ApprovalRecord, now: number): NotificationStatus | undefined {
  const byStatus: Record<ApprovalStatus, NotificationStatus | undefined> = {
    pending: approval.expiresAt <= now ? 'expired' : undefined,
    approved: 'approved',
    denied: 'denied',
    expired: 'expired',
  };
  return byStatus[approval.status];
}

/**
 * The event's data: the approval, how it ended, and the resulting agent and grant statuses (the
 * same facts a §5.5 status poll gives, compact as in §5.12), so the client need not poll again.
 */
export async function notificationData(
  store: StoreReader,
  approval: ApprovalRecord,
  status: NotificationStatus,
): Promise<Record<string, unknown>> {
  const agent = await store.agent(approval.agentId);
  const requested = new Set(approval.capabilities.map((c) => c.name));
  const grants = (await store.grants(approval.agentId))
    .filter((g) => requested.has(g.capability))
    .map((g) => ({
      capability: g.capability,
      status: g.status,
      ...(g.status === 'denied' && g.reason ? { reason: g.reason } : {}),
    }));
  return {
    approval_id: approval.id,
    status,
    kind: approval.kind,
    agent_id: approval.agentId,
    ...(agent ? { agent_status: agent.status } : {}),
    agent_capability_grants: grants,
  };
}
