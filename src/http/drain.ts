/**
 * Graceful shutdown's bookkeeping (SIGTERM): once draining, the server keeps listening but turns
 * new requests away (readiness says 503, so load balancers stop sending; everything else gets
 * `503 temporarily_unavailable` and `Connection: close`), while the requests already running
 * finish. `idle()` resolves when none is left; the composition root bounds the wait by
 * `server.shutdown_grace`.
 */

/** What still answers normally while draining: liveness, and readiness (which says "not ready"). */
const ANSWERED_WHILE_DRAINING: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

export class Drain {
  private active = 0;
  private started = false;
  private wake: (() => void)[] = [];

  get draining(): boolean {
    return this.started;
  }

  /** Requests being answered right now (each counted until its response closes). */
  get inProgress(): number {
    return this.active;
  }

  begin(): void {
    this.started = true;
  }

  /** Counts one more request in progress, until `closed` (its response closed: finished, or gone). */
  opened(): void {
    this.active++;
  }

  closed(): void {
    this.active--;
    if (this.active === 0) for (const wake of this.wake.splice(0)) wake();
  }

  /** Whether a request for `path` is turned away now. */
  refuses(path: string): boolean {
    return this.started && !ANSWERED_WHILE_DRAINING.has(path);
  }

  /** Resolves once no request is in progress. */
  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.wake.push(resolve));
  }
}
