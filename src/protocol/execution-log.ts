/**
 * §11 activity for executions, group-committed: execute is the hot path, so a record is queued
 * rather than written with its request, and queued records are written together, in one
 * transaction through one prepared statement (Store.appendActivities). A batch is committed
 * when the first record in it has waited `commitWindowMs`, or as soon as it holds `maxBatch`
 * records, and on shutdown (SIGTERM) whatever is queued is committed before the store closes.
 *
 * The bound this gives: a SIGKILL loses at most the records of the last commit window (plus
 * the few milliseconds a busy event loop may delay the timer), never a grant or a status, which
 * are committed before their response. Idle, nothing runs: the timer is armed by a record.
 *
 * A batch the store refuses (a locked SQLite file, a PostgreSQL outage: issue 13) is kept, ahead
 * of newer records, and retried every RETRY_MS: the records are the audit trail (§11), and an
 * outage is transient. Kept, not unbounded: at most MAX_BACKLOG records wait (plus the batch in
 * flight); past that new ones are dropped, counted, and the count logged at the next flush. After
 * the outage the backlog goes in statements of at most MAX_WRITE records, each within the
 * statement timeout. A write whose answer was lost (it timed out, yet committed) is retried too: a
 * record may then be stored twice, never lost. A crash while the database is down loses what
 * waits, as a SIGKILL loses one commit window at any time. The first failure and the recovery are
 * logged, not every retry.
 *
 * A batch the store refuses for what it holds (a value it cannot store) is not an outage: retried
 * as it is, it would fail for ever and hold back every record behind it. It is split in halves
 * until the records refused are found alone; those are dropped and logged, the rest written.
 */
import type { Logger } from '../log.js';
import { isRefusedValue } from '../storage/errors.js';
import type { ActivityRecord, Store } from '../storage/types.js';

export interface GroupCommit {
  /** Longest a record waits for its commit: what a SIGKILL can lose. */
  readonly commitWindowMs: number;
  /** A batch this large is committed at once, without waiting for the window. */
  readonly maxBatch: number;
}

export const DEFAULT_GROUP_COMMIT: GroupCommit = Object.freeze({ commitWindowMs: 20, maxBatch: 256 });

// Past this the store is not keeping up: drop rather than grow without bound, and say so.
const MAX_BACKLOG = 100_000;
// After a failed commit (a busy or locked database), wait this long before trying again: each
// attempt can block the event loop for the store's busy timeout.
const RETRY_MS = 1_000;
// Records per statement when a backlog is written: one statement stays well within its timeout.
const MAX_WRITE = 5_000;

export class ExecutionLog {
  private queue: ActivityRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private dropped = 0;
  private started = false;
  /** performance.now() when the first record of the queued batch arrived. */
  private batchStartedAt = 0;
  private failing = false;
  /** Failed commits in a row, for the recovery's log line. */
  private failures = 0;
  /** Batches handed to the store and not yet settled (stop waits for them). */
  private readonly writing = new Set<Promise<void>>();
  private readonly options: GroupCommit;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    options: GroupCommit = DEFAULT_GROUP_COMMIT,
  ) {
    const { commitWindowMs, maxBatch } = options;
    if (!Number.isSafeInteger(commitWindowMs) || commitWindowMs < 1) {
      throw new RangeError(`Invalid commit window: ${commitWindowMs} ms`);
    }
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1)
      throw new RangeError(`Invalid batch size: ${maxBatch}`);
    this.options = options;
  }

  /** Commits on the window from now on (before this, only a full batch or `flush` commits). */
  start(): void {
    this.started = true;
    if (this.queue.length > 0) this.arm(this.options.commitWindowMs);
  }

  record(record: ActivityRecord): void {
    if (this.queue.length >= MAX_BACKLOG) {
      this.dropped++;
      return;
    }
    const now = performance.now();
    if (this.queue.length === 0) this.batchStartedAt = now;
    this.queue.push(record);
    // One pending commit at a time: while the store refuses a batch, a retry per record would
    // block the event loop (busy_timeout) again and again.
    if (this.failing) return;
    if (this.started && now - this.batchStartedAt >= this.options.commitWindowMs) {
      // The window is over but the timer has not run yet (a busy event loop runs timers late):
      // commit now rather than let the batch outlive its bound.
      void this.flush();
    } else if (this.queue.length >= this.options.maxBatch) {
      this.immediate ??= setImmediate(() => {
        this.immediate = undefined;
        void this.flush();
      });
    } else if (this.started) {
      this.arm(this.options.commitWindowMs);
    }
  }

  /**
   * Commits every queued record now: in one transaction, or a backlog in several of MAX_WRITE.
   * Settles when the store has them, and those of batches already being written (a reader that
   * flushes first, such as the activity listing, must see a record whose batch the timer just
   * handed to a slow store); never rejects (a failure is logged, and what failed kept for the next
   * attempt).
   */
  flush(): Promise<void> {
    this.disarm();
    if (this.dropped > 0) {
      this.logger.warn('execution records dropped (database too slow)', { dropped: this.dropped });
      this.dropped = 0;
    }
    const earlier = [...this.writing];
    return Promise.all([...earlier, this.writeQueued()]).then(() => undefined);
  }

  /** Hands what is queued now to the store (then any rest of a backlog); never rejects. */
  private writeQueued(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    const batch = this.queue.length <= MAX_WRITE ? this.queue : this.queue.slice(0, MAX_WRITE);
    this.queue = this.queue.length <= MAX_WRITE ? [] : this.queue.slice(MAX_WRITE);
    const rest = this.queue.length > 0; // only when the batch was cut at MAX_WRITE
    const written = this.commit(batch).then((unwritten) => {
      if (unwritten.failure === undefined) {
        if (this.failing) {
          this.logger.info('execution records written again', { failed_commits: this.failures });
        }
        this.failing = false;
        this.failures = 0;
        // The rest of a backlog, at once: flush's promise settles once all of it is written.
        return rest ? this.writeQueued() : undefined;
      }
      // Keep what was not written for the next attempt (a busy or unreachable database is transient).
      this.queue = unwritten.records.concat(this.queue);
      if (this.failures++ === 0) {
        this.logger.error('writing execution records failed', { error: unwritten.failure });
      }
      this.failing = true;
      if (this.started) this.arm(RETRY_MS);
      return undefined;
    });
    this.writing.add(written);
    void written.finally(() => this.writing.delete(written));
    return written;
  }

  /**
   * Writes `batch`, finding and dropping records the store refuses for their values. What could not
   * be written for any other reason (an outage) is returned, in order, with the failure's message.
   */
  private async commit(batch: ActivityRecord[]): Promise<{ records: ActivityRecord[]; failure?: string }> {
    try {
      await this.store.appendActivities(batch);
      return { records: [] };
    } catch (err) {
      if (!isRefusedValue(err))
        return { records: batch, failure: err instanceof Error ? err.message : String(err) };
      if (batch.length === 1) {
        this.logger.error('execution record refused by the database, dropped', {
          agent_id: batch[0]?.agentId,
          error: err instanceof Error ? err.message : String(err),
        });
        return { records: [] };
      }
      const half = Math.ceil(batch.length / 2);
      const second = batch.slice(half);
      const first = await this.commit(batch.slice(0, half));
      if (first.failure !== undefined)
        return { records: first.records.concat(second), failure: first.failure };
      return this.commit(second);
    }
  }

  /** Commits what is queued and stops the timer; await it before the store closes (SIGTERM). */
  async stop(): Promise<void> {
    this.started = false;
    await Promise.all(this.writing);
    await this.flush();
    this.disarm();
  }

  /** Arms the commit timer unless one is pending: the window runs from the batch's first record. */
  private arm(delayMs: number): void {
    // unref: a pending commit does not keep the process alive; shutdown commits through stop().
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs).unref();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
  }
}
