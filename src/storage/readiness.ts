/**
 * Whether the database answers, for `/readyz` (issue 13: during a database outage a replica stays
 * up and live but reports unready, and becomes ready again by itself once the database is back).
 *
 * The design: a ping (Store.ping, `SELECT 1` on a connection of its own) at most once per
 * `intervalMs`, its answer cached; probes meanwhile share the cached answer or the ping in flight,
 * and none waits more than `timeoutMs` for it: a ping still running then counts as down (a load
 * balancer's probe has its own timeout, one second by default in Kubernetes). So a replica costs
 * its database at most one ping per interval however often it is probed, an outage shows on the
 * first probe after the cached answer ages, and the return needs no request to be noticed.
 * Flipping readiness on the requests' StoreUnavailableError instead would tie it to traffic: an
 * idle replica would never notice an outage, and one marked down would need a probe anyway to
 * come back.
 */
import type { Store } from './types.js';

export interface ReadinessOptions {
  /** How long an answer is reused before the next probe pings again. */
  readonly intervalMs: number;
  /** How long a probe waits for a ping: one that has not answered by then counts as down. */
  readonly timeoutMs: number;
  /** The answer changed (up → down or back): for the log. */
  readonly onChange?: (up: boolean) => void;
}

/** Defaults: a ping a second at most; `/readyz` answers within half a second. */
export const DEFAULT_READINESS: ReadinessOptions = Object.freeze({ intervalMs: 1_000, timeoutMs: 500 });

export class DatabaseReadiness {
  #answer: { readonly up: boolean; readonly at: number } | undefined;
  #ping: Promise<boolean> | undefined;

  constructor(
    private readonly store: Pick<Store, 'ping'>,
    private readonly options: ReadinessOptions = DEFAULT_READINESS,
  ) {}

  /** Whether the database answered (now, or within the last interval). Never rejects. */
  async up(): Promise<boolean> {
    const answer = this.#answer;
    if (answer && performance.now() - answer.at < this.options.intervalMs) return answer.up;
    this.#ping ??= this.store.ping().then(
      () => this.#settle(true),
      () => this.#settle(false),
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), this.options.timeoutMs);
      timer.unref();
    });
    const up = await Promise.race([this.#ping, late]);
    clearTimeout(timer);
    // Too slow counts as down until the ping settles (or the next one is due).
    if (!up && this.#ping !== undefined) this.#record(false);
    return up;
  }

  #settle(up: boolean): boolean {
    this.#ping = undefined;
    this.#record(up);
    return up;
  }

  #record(up: boolean): void {
    const before = this.#answer?.up;
    this.#answer = { up, at: performance.now() };
    // A first answer is news only when it is "down".
    if (up !== (before ?? true)) this.options.onChange?.(up);
  }
}
