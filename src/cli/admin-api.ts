/**
 * The operator API as the admin CLI reaches it: one `call()` that sends the bearer token, reads
 * the JSON reply, and turns failures into typed errors. The token goes into the Authorization
 * header and nowhere else: no message built here contains it.
 */
import { UserError } from '../errors.js';

const TIMEOUT_MS = 30_000;

/** The proxy answered with a §5.13 error body (`{error, message}`). */
export class AdminApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'AdminApiError';
  }
}

/** The proxy could not be reached, or what answered was not the proxy. */
export class ConnectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConnectionError';
  }
}

export interface AdminClient {
  readonly baseUrl: string;
  /** The parsed JSON of a 2xx reply, with its status; throws for anything else. */
  call(
    method: 'GET' | 'POST',
    path: string,
    body?: Record<string, unknown>,
  ): Promise<{ status: number; body: unknown }>;
}

/** `--url` as a base URL: http(s), no credentials, query or fragment; no trailing slash. */
export function parseBaseUrl(value: string, from: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UserError(`${from} ${JSON.stringify(value)}: not a URL (e.g. http://127.0.0.1:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UserError(`${from}: must be an http:// or https:// URL`);
  if (url.username || url.password) throw new UserError(`${from}: must not contain credentials`);
  if (url.search || url.hash) throw new UserError(`${from}: must not have a query or fragment`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

export function adminClient(baseUrl: string, token: string): AdminClient {
  return {
    baseUrl,
    async call(method, path, body) {
      const url = `${baseUrl}${path}`;
      let res: Response;
      try {
        res = await fetch(url, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(TIMEOUT_MS),
          redirect: 'manual',
        });
      } catch (err) {
        throw new ConnectionError(`cannot reach the proxy at ${baseUrl}: ${reason(err)}`);
      }
      const text = await readCapped(res, url);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new ConnectionError(
          `unexpected answer from ${url}: HTTP ${res.status}, not JSON (is ${baseUrl} the proxy?)`,
        );
      }
      if (res.ok) return { status: res.status, body: parsed };
      const e = (parsed ?? {}) as { error?: unknown; message?: unknown };
      if (typeof e.error !== 'string')
        throw new ConnectionError(`unexpected answer from ${url}: HTTP ${res.status} without an error code`);
      throw new AdminApiError(e.error, typeof e.message === 'string' ? e.message : '', res.status);
    },
  };
}

/** Why fetch failed, in words: undici hides the system error in `cause`. */
function reason(err: unknown): string {
  if (err instanceof Error && err.name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1000} s`;
  const cause = err instanceof Error ? err.cause : undefined;
  const code =
    cause !== null && typeof cause === 'object' && 'code' in cause && typeof cause.code === 'string'
      ? cause.code
      : undefined;
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused (is the proxy running?)',
    ENOTFOUND: 'host name not found',
    ECONNRESET: 'connection reset',
    ETIMEDOUT: 'connection timed out',
    EHOSTUNREACH: 'host unreachable',
  };
  if (code !== undefined) return words[code] ?? code;
  return cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
}

/** The largest JSON reply read (§8.12 asks clients to cap what they fetch): more is refused. */
const MAX_REPLY_BYTES = 1024 * 1024;

/** A reply's body as text, at most MAX_REPLY_BYTES; a body cut off or too large is a ConnectionError. */
export async function readCapped(res: Response, url: string): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    // A fetch body yields bytes; its type says any (undici's ReadableStream).
    for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      // Leaving the loop cancels the body: nothing more is read.
      if (size > MAX_REPLY_BYTES) break;
      chunks.push(chunk);
    }
  } catch (err) {
    throw new ConnectionError(`the answer from ${url} broke off: ${reason(err)}`);
  }
  if (size > MAX_REPLY_BYTES) {
    throw new ConnectionError(
      `unexpected answer from ${url}: larger than ${MAX_REPLY_BYTES / 1024 / 1024} MiB`,
    );
  }
  return Buffer.concat(chunks).toString('utf8');
}
