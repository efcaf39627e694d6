/**
 * Activity retention (§9.2: servers SHOULD define and publish retention for agent activity logs):
 * records older than `audit.retention` are deleted in small batches, yielding to the event loop
 * between them, so a large backlog (a first run on a big database) never holds up requests; what
 * one run leaves is taken by the next.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Clock } from '../clock.js';
import type { Store } from '../storage/types.js';

/** Rows per DELETE: a few milliseconds of work at most. */
export const RETENTION_BATCH = 1000;
/** Batches per run: a run deletes at most this many × RETENTION_BATCH rows. */
export const RETENTION_BATCHES_PER_RUN = 100;

export class ActivityRetention {
  private running = false;

  constructor(
    private readonly store: Pick<Store, 'deleteActivityBefore'>,
    private readonly clock: Clock,
    private readonly retentionMs: number,
  ) {}

  /** Deletes expired records, a batch per event-loop turn; returns how many. Runs never overlap. */
  async prune(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    try {
      const before = this.clock.now() - this.retentionMs;
      let deleted = 0;
      for (let i = 0; i < RETENTION_BATCHES_PER_RUN; i++) {
        const n = await this.store.deleteActivityBefore(before, RETENTION_BATCH);
        deleted += n;
        if (n < RETENTION_BATCH) break;
        await nextTurn();
      }
      return deleted;
    } finally {
      this.running = false;
    }
  }
}
