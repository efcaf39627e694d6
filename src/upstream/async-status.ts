/**
 * Reading an upstream's async answers (§2.15, §5.11): where a 202 says its status lives, what a
 * status answer means (pending, completed with a result, failed), and the Retry-After worth
 * passing on. Pure: nothing here fetches anything (status-target.ts decides what may be fetched).
 */
import type { UpstreamReply } from './client.js';
import { decodeData } from './results.js';

/** §5.11 async states as the proxy reports them to a polling agent. */
export type AsyncState =
  | { readonly status: 'pending'; readonly retryAfter?: string }
  | { readonly status: 'completed'; readonly result: unknown }
  | { readonly status: 'failed'; readonly error: Record<string, unknown> };

const PENDING_WORDS = new Set([
  'pending',
  'queued',
  'running',
  'in_progress',
  'inprogress',
  'processing',
  'accepted',
  'started',
]);
const FAILED_WORDS = new Set(['failed', 'failure', 'error', 'errored', 'cancelled', 'canceled', 'rejected']);
const LOCATION_HEADERS = ['location', 'operation-location', 'content-location'];
const ASYNC_URL_FIELDS = ['status_url', 'statusUrl', 'monitor', 'href'];

/** The status URL a 202 names, in a header or a body field; undefined when it names none. */
export function asyncLocation(reply: UpstreamReply, contentType: string, body: Buffer): string | undefined {
  for (const name of LOCATION_HEADERS) {
    const v = headerValue(reply.headers[name]);
    if (v) return v;
  }
  const data = body.length > 0 ? safeJson(contentType, body) : undefined;
  if (data && typeof data === 'object' && !Array.isArray(data)) {
    for (const field of ASYNC_URL_FIELDS) {
      const v = (data as Record<string, unknown>)[field];
      if (typeof v === 'string' && v !== '') return v;
    }
  }
  return undefined;
}

/** A 2xx status answer's (redacted) data as a state: a status word decides, else it is the result. */
export function pollState(data: unknown, retryAfter: string | undefined): AsyncState {
  if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
    const record = data as Record<string, unknown>;
    const word = typeof record.status === 'string' ? record.status.toLowerCase() : undefined;
    if (word !== undefined && PENDING_WORDS.has(word)) {
      return { status: 'pending', ...(retryAfter ? { retryAfter } : {}) };
    }
    if (word !== undefined && FAILED_WORDS.has(word)) {
      return {
        status: 'failed',
        error: { error: 'upstream_error', message: failureMessage(record.error), upstream_body: record },
      };
    }
    if (word !== undefined && 'result' in record) return { status: 'completed', result: record.result };
  }
  return { status: 'completed', result: data };
}

function failureMessage(error: unknown): string {
  if (typeof error === 'string') return error;
  const message = (error as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : 'The upstream operation failed.';
}

const DELAY_SECONDS = /^\d{1,9}$/;
const HTTP_DATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * The upstream's Retry-After, passed on to the agent only when it is what RFC 9110 §10.2.3 allows
 * (delay-seconds or an IMF-fixdate): a header is text of the upstream's choosing, and anything
 * else in it (an echoed credential, say) must not reach the agent.
 */
export function retryAfterOf(headers: UpstreamReply['headers']): string | undefined {
  const value = headerValue(headers['retry-after'])?.trim();
  if (value === undefined) return undefined;
  return DELAY_SECONDS.test(value) || (HTTP_DATE.test(value) && !Number.isNaN(Date.parse(value)))
    ? value
    : undefined;
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function safeJson(contentType: string, body: Buffer): unknown {
  try {
    return decodeData(contentType, body);
  } catch {
    return undefined;
  }
}
