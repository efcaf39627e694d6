/**
 * The wire to upstream APIs: one undici Agent (a keep-alive connection pool per origin), no
 * redirects followed (a credential must never reach another origin), a deadline per call,
 * bounded retries with exponential backoff for idempotent methods on connection failures and
 * 502/503/504 only, and a cap on response bodies.
 */
import { Agent, type Dispatcher } from 'undici';
import type { Readable } from 'node:stream';
import { declaredLength, readStream, takeBuffered } from '../util/read-stream.js';
import { Cancellation } from './cancellation.js';
import { errorCode } from './oauth.js';

export interface UpstreamCall {
  /** `https://host:port`, from the API's configured base URL: never from agent input. */
  readonly origin: string;
  /** Path and query, already encoded. */
  readonly path: string;
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Buffer;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly retryBackoffMs: number;
  /**
   * The caller's cancellation, which the call then uses as its own: the caller aborts it to cancel
   * (e.g. the agent disconnected), the client aborts it when the deadline passes. One per request,
   * because each costs on the hot path. Absent: the client makes one.
   */
  readonly controller?: Cancellation;
  /**
   * Runs after a retry's backoff, before it is sent: what allowed the call may have been revoked
   * meanwhile. Throws to send nothing more (the error is the call's).
   */
  readonly beforeRetry?: () => Promise<void> | undefined;
}

export interface UpstreamReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body stream; read it with `readBody` or pipe it (streams). */
  readonly body: Readable;
  /** How many attempts it took (1 = no retry). */
  readonly attempts: number;
  /** Aborts the body when the deadline passes while it is still being read. */
  readonly deadline: Cancellation;
  /** Ends the deadline (a relayed stream has its own limits); called when the body closes. */
  readonly done: () => void;
}

export type UpstreamFailure = 'timeout' | 'unreachable' | 'too_large' | 'aborted';

/** The abort reason of a passed deadline; any other reason is the caller's cancellation. */
const DEADLINE_PASSED = Symbol('deadline passed');

export class UpstreamCallError extends Error {
  constructor(
    readonly kind: UpstreamFailure,
    readonly detail: string,
  ) {
    super(`${kind}: ${detail}`);
  }
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const RETRY_STATUS = new Set([502, 503, 504]);
// Failures that happen before the upstream could have acted on the request.
const CONNECT_FAILURES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

export class UpstreamClient {
  readonly dispatcher: Dispatcher;

  constructor(options: { connections?: number; sleep?: (ms: number) => Promise<void> } = {}) {
    this.dispatcher = new Agent({
      connections: options.connections ?? 128,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      connect: { timeout: 10_000 },
    });
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()));
  }

  private readonly sleep: (ms: number) => Promise<void>;

  async send(call: UpstreamCall): Promise<UpstreamReply> {
    // One cancellation and one timer per call (AbortSignal.timeout/any cost more on the hot path).
    const deadline = call.controller ?? new Cancellation();
    const timer = setTimeout(() => deadline.abort(DEADLINE_PASSED), call.timeoutMs).unref();
    const done = (): void => clearTimeout(timer);
    // The attempts run in this one function: a call is on the hot path, and each async layer
    // costs a promise and a turn of the microtask queue.
    const retries = IDEMPOTENT.has(call.method) ? call.retries : 0;
    for (let attempt = 0; ; attempt++) {
      let res: Dispatcher.ResponseData;
      try {
        res = await this.dispatcher.request({
          origin: call.origin,
          path: call.path,
          method: call.method,
          headers: call.headers,
          ...(call.body !== undefined ? { body: call.body } : {}),
          signal: deadline,
          headersTimeout: call.timeoutMs,
          // No idle cut on the body: the deadline above bounds a data answer as a whole, until its
          // body closes, and an event stream is relayed under its own limits (reply.done), where a
          // model may think for minutes between two events.
          bodyTimeout: 0,
        });
      } catch (err) {
        const failure = classify(err, deadline);
        const connectFailure = CONNECT_FAILURES.has(errorCode(err));
        if (failure.kind === 'unreachable' && connectFailure && attempt < retries && !deadline.aborted) {
          await this.sleep(backoff(call.retryBackoffMs, attempt));
          await stillAllowed(call, done);
          continue;
        }
        done();
        throw failure;
      }
      if (RETRY_STATUS.has(res.statusCode) && attempt < retries && !deadline.aborted) {
        // Destroyed, not drained: an endless body would be read for ever after the retry
        // succeeded, and keep the pool (and a shutdown) waiting on it.
        res.body.on('error', () => undefined);
        res.body.destroy();
        await this.sleep(backoff(call.retryBackoffMs, attempt));
        await stillAllowed(call, done);
        continue;
      }
      res.body.once('close', done);
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body,
        attempts: attempt + 1,
        deadline,
        done,
      };
    }
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}

/**
 * Reads a whole body, failing once it exceeds `maxBytes` (the rest is discarded unread). At once
 * when it has all arrived (`arrived`), else a promise.
 */
export function readBody(reply: UpstreamReply, maxBytes: number): Buffer | Promise<Buffer> {
  const whole = arrived(reply, maxBytes);
  if (whole !== undefined) return whole;
  // A promise chain, not an async function: every execution reads its answer through here.
  return readStream(reply.body, maxBytes).then(
    (read) => {
      if (read.over) {
        throw new UpstreamCallError('too_large', `the upstream response exceeds ${maxBytes} bytes`);
      }
      return read.bytes;
    },
    (err: unknown) => {
      throw classify(err, reply.deadline);
    },
  );
}

/** The first bytes of a body read up to a cap, and whether the cap cut it (there was more). */
export interface CappedBody {
  readonly bytes: Buffer;
  readonly cut: boolean;
}

/**
 * Reads a body up to `maxBytes` and keeps what was read when there is more (an error body, which
 * is echoed only in part). Whether it was cut is said here, from the bytes on the wire: once the
 * body is decoded (Content-Encoding, a charset) its length no longer tells.
 */
export function readCapped(reply: UpstreamReply, maxBytes: number): Promise<CappedBody> {
  const whole = arrived(reply, maxBytes);
  if (whole !== undefined) return Promise.resolve({ bytes: whole, cut: false });
  return readStream(reply.body, maxBytes).then(
    (read) => ({ bytes: read.bytes, cut: read.over }),
    (err: unknown) => {
      throw classify(err, reply.deadline);
    },
  );
}

/** The body when all its declared bytes are buffered already, within the cap (else read as a stream). */
function arrived(reply: UpstreamReply, maxBytes: number): Buffer | undefined {
  const length = declaredLength(reply.headers['content-length']);
  return length > maxBytes ? undefined : takeBuffered(reply.body, length);
}

function classify(err: unknown, deadline: Cancellation): UpstreamCallError {
  // The first abort wins: a deadline that passed stays a timeout if the caller then leaves too.
  if (deadline.aborted && deadline.reason !== DEADLINE_PASSED) {
    return new UpstreamCallError('aborted', 'the caller went away');
  }
  const code = errorCode(err);
  if (
    deadline.aborted ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'TimeoutError'
  ) {
    return new UpstreamCallError('timeout', code);
  }
  return new UpstreamCallError('unreachable', code);
}

/** Exponential backoff with ±20 % jitter, so retrying clients do not move in lockstep. */
/** The call's `beforeRetry`, its timer cleared when that refuses. */
async function stillAllowed(call: UpstreamCall, done: () => void): Promise<void> {
  try {
    await call.beforeRetry?.();
  } catch (err) {
    done();
    throw err;
  }
}

function backoff(baseMs: number, attempt: number): number {
  const ms = baseMs * 2 ** attempt;
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}
