/**
 * Sweeps in bounded batches (issue 17): better-sqlite3 is synchronous, so one DELETE of a large
 * backlog (a first run on a big database, an outage's worth of expired rows) would hold every
 * request until it ends. Each batch is one short statement or transaction; between batches the
 * sweep yields to the event loop, and what a run leaves is taken by the next (as activity
 * retention does, retention.ts).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Rows per DELETE of expired sessions or async jobs: a few milliseconds of work at most. */
export const SWEEP_BATCH = 500;
/** Pending agents (and hosts) per batch: each deletion cascades to its grants, approvals, jobs. */
export const PENDING_BATCH = 100;
/** Overdue approvals expired per transaction (each denies its grants and announces itself). */
export const EXPIRY_BATCH = 100;
/** Batches per run: a run does at most this many batches. */
export const SWEEP_BATCHES_PER_RUN = 100;

/**
 * Runs `step` (one batch of at most `batch` items, returning how many it did) until a batch comes
 * back short or the run's budget is spent, yielding to the event loop between batches.
 */
export async function inBatches(step: () => Promise<number>, batch: number): Promise<number> {
  let total = 0;
  for (let i = 0; i < SWEEP_BATCHES_PER_RUN; i++) {
    const n = await step();
    total += n;
    if (n < batch) break;
    await nextTurn();
  }
  return total;
}
