/**
 * Delivers approval notices (src/protocol/notifications.ts) as a signed JSON webhook (issue 11,
 * §7.2): POST to the operator's URL, in the background — the request that created the approval
 * never waits for it.
 *
 * Signature: `X-AgentAuth-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
 * made afresh for each attempt. A receiver recomputes it over the raw body bytes, compares in
 * constant time, refuses a `t` more than 5 minutes from its own clock (the replay window), and
 * drops a repeated `X-AgentAuth-Delivery` id (retries reuse it).
 *
 * Bounds: at most MAX_IN_FLIGHT attempts at once, each `timeout` long; `max_attempts` per notice
 * with exponential backoff (`retry_backoff`, doubling, at most `max_backoff`); at most `max_queue`
 * notices waiting in memory — when full, the oldest waiting one is dropped (logged, counted).
 * Nothing is kept across a restart. Failures are logged (the target's origin, never its path
 * or the secret) and counted in `stats()`.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Agent, type Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { WebhookSettings } from '../config/notifications.js';
import type { Logger } from '../log.js';
import type { ApprovalNotice, ApprovalNotifier, PerCallNotice } from '../protocol/notices.js';

/** Attempts running at once. */
export const MAX_IN_FLIGHT = 4;
/** Bytes of a receiver's answer read (and thrown away) before the connection is given up. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Scheduling, injectable so tests run retries and timeouts without waiting. */
export interface Timers {
  /** Runs `fn` after `ms`; the returned function cancels it. */
  set(fn: () => void, ms: number): () => void;
}

export const systemTimers: Timers = {
  set(fn, ms) {
    const t = setTimeout(fn, ms).unref();
    return () => clearTimeout(t);
  },
};

/** What happened to notices since start-up (an operations issue will export these as metrics). */
export interface NotifierStats {
  /** Accepted for delivery. */
  accepted: number;
  /** Not announced: their kind is not in `events`. */
  skipped: number;
  delivered: number;
  /** Every attempt made, first ones and retries. */
  attempts: number;
  failedAttempts: number;
  retries: number;
  /** Given up after max_attempts, or at once for an answer that retrying cannot change. */
  gaveUp: number;
  /** Dropped because the queue was full, or undelivered at shutdown. */
  dropped: number;
  /** Waiting now (due, or for a retry). */
  waiting: number;
  inFlight: number;
}

interface Delivery {
  readonly seq: number;
  readonly id: string;
  readonly approvalId: string;
  readonly body: string;
  attempt: number;
  /** Set while a retry is scheduled. */
  cancelTimer?: () => void;
}

export interface WebhookDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timers?: Timers;
}

export class WebhookNotifier implements ApprovalNotifier {
  readonly #settings: WebhookSettings;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #timers: Timers;
  readonly #dispatcher: Dispatcher;
  readonly #target: URL;
  /** Waiting deliveries in the order they were accepted: due ones and scheduled retries. */
  readonly #waiting: Delivery[] = [];
  readonly #aborts = new Set<AbortController>();
  readonly #idle: (() => void)[] = [];
  readonly #stats: NotifierStats = {
    accepted: 0,
    skipped: 0,
    delivered: 0,
    attempts: 0,
    failedAttempts: 0,
    retries: 0,
    gaveUp: 0,
    dropped: 0,
    waiting: 0,
    inFlight: 0,
  };
  #seq = 0;
  #closed = false;

  constructor(settings: WebhookSettings, deps: WebhookDeps) {
    this.#settings = settings;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#timers = deps.timers ?? systemTimers;
    this.#target = new URL(settings.url);
    this.#dispatcher = new Agent({ connections: MAX_IN_FLIGHT, keepAliveTimeout: 10_000 });
  }

  /** A copy of the counters. */
  stats(): NotifierStats {
    return { ...this.#stats, waiting: this.#waiting.length };
  }

  approvalRequested(notice: ApprovalNotice | PerCallNotice): void {
    if (this.#closed) return;
    if (!this.#settings.events.has(notice.event)) {
      this.#stats.skipped++;
      return;
    }
    const id = `ntf_${randomBytes(12).toString('base64url')}`;
    const body = JSON.stringify({ id, ...notice, sent_at: new Date(this.#clock.now()).toISOString() });
    if (this.#waiting.length >= this.#settings.maxQueue) this.#drop(this.#waiting.shift() as Delivery);
    this.#waiting.push({ seq: this.#seq++, id, approvalId: notice.approval.id, body, attempt: 0 });
    this.#stats.accepted++;
    this.#pump();
  }

  /** Resolves once no attempt is running or due (scheduled retries may still wait); for tests. */
  whenIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Stops: retries cancelled, attempts aborted; what was not delivered is logged and counted. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const d of this.#waiting) d.cancelTimer?.();
    const undelivered = this.#waiting.length + this.#stats.inFlight;
    this.#stats.dropped += this.#waiting.length;
    this.#waiting.length = 0;
    for (const a of this.#aborts) a.abort();
    if (undelivered > 0) {
      this.#logger.warn('notifications undelivered at shutdown', {
        count: undelivered,
        target: this.#target.origin,
      });
    }
    await this.#dispatcher.close().catch(() => undefined);
    this.#settle();
  }

  #isIdle(): boolean {
    return this.#stats.inFlight === 0 && !this.#waiting.some((d) => d.cancelTimer === undefined);
  }

  #settle(): void {
    if (!this.#isIdle() && !this.#closed) return;
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  #pump(): void {
    while (!this.#closed && this.#stats.inFlight < MAX_IN_FLIGHT) {
      const i = this.#waiting.findIndex((d) => d.cancelTimer === undefined);
      if (i < 0) break;
      const [d] = this.#waiting.splice(i, 1) as [Delivery];
      this.#stats.inFlight++;
      void this.#attempt(d).finally(() => {
        this.#stats.inFlight--;
        this.#pump();
        this.#settle();
      });
    }
  }

  async #attempt(d: Delivery): Promise<void> {
    d.attempt++;
    this.#stats.attempts++;
    const failure = await this.#send(d);
    if (failure === undefined) {
      this.#stats.delivered++;
      this.#logger.info('notification delivered', {
        delivery: d.id,
        approval_id: d.approvalId,
        attempt: d.attempt,
        target: this.#target.origin,
      });
      return;
    }
    this.#stats.failedAttempts++;
    const fields = {
      delivery: d.id,
      approval_id: d.approvalId,
      attempt: d.attempt,
      failure: failure.reason,
      target: this.#target.origin,
    };
    if (!failure.retry || d.attempt >= this.#settings.maxAttempts || this.#closed) {
      this.#stats.gaveUp++;
      this.#logger.error('notification given up', fields);
      return;
    }
    const delay = Math.min(this.#settings.maxBackoffMs, this.#settings.retryBackoffMs * 2 ** (d.attempt - 1));
    this.#stats.retries++;
    this.#logger.warn('notification attempt failed; will retry', { ...fields, retry_in_ms: delay });
    this.#schedule(d, delay);
  }

  /** One notice given up for room: the oldest waiting, when the queue is full (max_queue). */
  #drop(oldest: Delivery): void {
    oldest.cancelTimer?.();
    this.#stats.dropped++;
    this.#logger.warn('notification dropped: the queue is full', {
      delivery: oldest.id,
      approval_id: oldest.approvalId,
      max_queue: this.#settings.maxQueue,
      target: this.#target.origin,
    });
  }

  /**
   * Back into the waiting list in acceptance order, due after `delay`. A full queue keeps its
   * bound here too (attempts in flight are not counted in it): the oldest of them all goes.
   */
  #schedule(d: Delivery, delay: number): void {
    if (this.#waiting.length >= this.#settings.maxQueue) {
      const oldest = this.#waiting[0] as Delivery;
      if (d.seq < oldest.seq) {
        this.#drop(d);
        return;
      }
      this.#drop(this.#waiting.shift() as Delivery);
    }
    const at = this.#waiting.findIndex((w) => w.seq > d.seq);
    this.#waiting.splice(at < 0 ? this.#waiting.length : at, 0, d);
    d.cancelTimer = this.#timers.set(() => {
      delete d.cancelTimer;
      this.#pump();
    }, delay);
  }

  /** One attempt; undefined when the receiver took it (2xx). */
  async #send(d: Delivery): Promise<{ reason: string; retry: boolean } | undefined> {
    const t = Math.floor(this.#clock.now() / 1000);
    const signature = createHmac('sha256', this.#settings.secret).update(`${t}.${d.body}`).digest('hex');
    const controller = new AbortController();
    this.#aborts.add(controller);
    const cancelTimeout = this.#timers.set(() => controller.abort(), this.#settings.timeoutMs);
    try {
      const res = await this.#dispatcher.request({
        origin: this.#target.origin,
        path: `${this.#target.pathname}${this.#target.search}`,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'agent-auth-proxy',
          'x-agentauth-event': 'approval.requested',
          'x-agentauth-delivery': d.id,
          'x-agentauth-signature': `t=${t},v1=${signature}`,
        },
        body: d.body,
        signal: controller.signal,
        // A backstop in real time; the timer above is the deadline.
        headersTimeout: this.#settings.timeoutMs,
        bodyTimeout: this.#settings.timeoutMs,
      });
      await drain(res.body);
      if (res.statusCode >= 200 && res.statusCode < 300) return undefined;
      // 408, 429 and 5xx may pass; any other answer will be the same next time.
      const retry = res.statusCode === 408 || res.statusCode === 429 || res.statusCode >= 500;
      return { reason: `status ${res.statusCode}`, retry };
    } catch (err) {
      const code = controller.signal.aborted ? 'timeout' : errorCode(err);
      return { reason: code, retry: true };
    } finally {
      cancelTimeout();
      this.#aborts.delete(controller);
    }
  }
}

/** Reads and discards a receiver's answer, up to MAX_ANSWER_BYTES. */
async function drain(body: Dispatcher.ResponseData['body']): Promise<void> {
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy();
      return;
    }
  }
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
}
