/**
 * Retention (§9.2: servers SHOULD define and publish retention for agent activity logs; §9.5: the
 * reason fields get the same retention as other PII): activity records older than
 * `audit.retention`, and approval requests closed longer ago than that (they keep the requester's
 * reason and binding message, and whom the request was addressed to), are deleted in small batches, yielding to the event
 * loop between them, so a large backlog (a first run on a big database) never holds up requests;
 * what one run leaves is taken by the next. Pending requests are never deleted here.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Clock } from '../clock.js';
import type { Store } from '../storage/types.js';

/** Rows per DELETE: a few milliseconds of work at most. */
export const RETENTION_BATCH = 1000;
/** Batches per run and kind of row: a run deletes at most this many × RETENTION_BATCH of each. */
export const RETENTION_BATCHES_PER_RUN = 100;

/** What one run deleted. */
export interface Pruned {
  readonly activity: number;
  readonly approvals: number;
}

type Deleter = (before: number, limit: number) => Promise<number>;

export class Retention {
  private running = false;

  constructor(
    private readonly store: Pick<Store, 'deleteActivityBefore' | 'deleteClosedApprovalsBefore'>,
    private readonly clock: Clock,
    private readonly retentionMs: number,
  ) {}

  /** Deletes what is past retention, a batch per event-loop turn. Runs never overlap. */
  async prune(): Promise<Pruned> {
    if (this.running) return { activity: 0, approvals: 0 };
    this.running = true;
    try {
      const before = this.clock.now() - this.retentionMs;
      const activity = await batches(before, (b, n) => this.store.deleteActivityBefore(b, n));
      const approvals = await batches(before, (b, n) => this.store.deleteClosedApprovalsBefore(b, n));
      return { activity, approvals };
    } finally {
      this.running = false;
    }
  }
}

async function batches(before: number, deleteSome: Deleter): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < RETENTION_BATCHES_PER_RUN; i++) {
    const n = await deleteSome(before, RETENTION_BATCH);
    deleted += n;
    if (n < RETENTION_BATCH) break;
    await nextTurn();
  }
  return deleted;
}
