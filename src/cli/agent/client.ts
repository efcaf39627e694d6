/**
 * The agent CLI's HTTP side: discovery (§5.1) and one `call()` that sends a bearer JWT, bounds
 * the wait, and turns a §5.13 error body into a ProxyError. Nothing here signs or decides.
 */
import { ConnectionError } from '../admin-api.js';

/** Every request is bounded: a smoke test must end even when the proxy hangs. */
const TIMEOUT_MS = 30_000;

/** The proxy answered with a §5.13 error body (`{error, message}`). */
export class ProxyError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'ProxyError';
  }
}

export interface Discovery {
  readonly issuer: string;
  /** §5.1: the execute URL, the `aud` of an agent JWT for execution (§4.3). */
  readonly defaultLocation: string;
  readonly endpoints: Readonly<Record<string, string>>;
}

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
  /** A §5.11 event stream's text, read to its end (within the timeout). */
  readonly stream?: string;
}

/** `GET /.well-known/agent-configuration` at the base URL (§5.1). */
export async function discover(baseUrl: string): Promise<Discovery> {
  const { body } = await call('GET', `${baseUrl}/.well-known/agent-configuration`);
  const { issuer, default_location: location, endpoints } = body;
  if (typeof issuer !== 'string' || typeof endpoints !== 'object' || endpoints === null) {
    throw new ConnectionError(`${baseUrl} has no agent configuration with an issuer: is it the proxy?`);
  }
  const paths = Object.fromEntries(
    Object.entries(endpoints).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
  return {
    issuer,
    defaultLocation: typeof location === 'string' ? location : `${issuer}/capability/execute`,
    endpoints: paths,
  };
}

/** §5.1: endpoint paths are relative to the issuer; the name's usual path if one is missing. */
export function endpoint(d: Discovery, name: string, fallback: string): string {
  const path = d.endpoints[name] ?? fallback;
  return /^https?:\/\//.test(path) ? path : `${d.issuer}${path}`;
}

/** The parsed JSON object of a 2xx reply with its status; throws for anything else. */
export async function call(
  method: 'GET' | 'POST',
  url: string,
  token?: string,
  body?: Record<string, unknown>,
): Promise<Reply> {
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: {
        accept: 'application/json',
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(TIMEOUT_MS),
      redirect: 'manual',
    });
  } catch (err) {
    throw new ConnectionError(`cannot reach ${url}: ${reason(err)}`);
  }
  const text = await res.text();
  if (res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    return { status: res.status, body: {}, stream: text };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConnectionError(`unexpected answer from ${url}: HTTP ${res.status}, not JSON`);
  }
  const object = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed);
  const record = (object ? parsed : {}) as Record<string, unknown>;
  if (res.ok && object) return { status: res.status, body: record };
  if (typeof record.error === 'string') {
    throw new ProxyError(record.error, typeof record.message === 'string' ? record.message : '', res.status);
  }
  throw new ConnectionError(`unexpected answer from ${url}: HTTP ${res.status} without an error code`);
}

/** Why fetch failed, in words: undici hides the system error in `cause`. */
function reason(err: unknown): string {
  if (err instanceof Error && err.name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1000} s`;
  const cause = err instanceof Error ? err.cause : undefined;
  if (cause !== null && typeof cause === 'object' && 'code' in cause && typeof cause.code === 'string') {
    return cause.code === 'ECONNREFUSED' ? 'connection refused (is the proxy running?)' : cause.code;
  }
  return cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
}
