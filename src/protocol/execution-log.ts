/**
 * §11 activity for executions without a database write per request: records are queued and
 * written in one transaction per second (or per 256 records), and on shutdown. A crash loses at
 * most the last second of execution records, never a grant or a status.
 */
import type { Logger } from '../log.js';
import type { ActivityRecord, Store } from '../storage/types.js';

const MAX_QUEUED = 256;
// Past this the store is not keeping up: drop rather than grow without bound, and say so.
const MAX_BACKLOG = 100_000;

export class ExecutionLog {
  private queue: ActivityRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  private dropped = 0;
  private flushScheduled = false;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
  ) {}

  start(intervalMs = 1_000): void {
    this.timer ??= setInterval(() => this.flush(), intervalMs).unref();
  }

  record(record: ActivityRecord): void {
    if (this.queue.length >= MAX_BACKLOG) {
      this.dropped++;
      return;
    }
    this.queue.push(record);
    // One pending flush at a time: while the store refuses a batch, a retry per record would
    // block the event loop (busy_timeout) again and again.
    if (this.queue.length >= MAX_QUEUED && !this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
  }

  flush(): void {
    if (this.dropped > 0) {
      this.logger.warn('execution records dropped (database too slow)', { dropped: this.dropped });
      this.dropped = 0;
    }
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    try {
      this.store.appendActivities(batch);
    } catch (err) {
      // Keep the batch for the next attempt (a busy database is transient).
      this.queue = batch.concat(this.queue);
      this.logger.error('writing execution records failed', {
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.flush();
  }
}
