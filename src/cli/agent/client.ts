/**
 * The agent CLI's HTTP side: discovery (§5.1) and one `call()` that sends a signed JWT, bounds
 * the wait, and turns a §5.13 error body into a ProxyError. Nothing here signs or decides.
 */
import { ConnectionError, readCapped } from '../admin-api.js';

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
  /**
   * A §5.11 event stream, relayed as it arrives to `write` until it ends: a stream may last the
   * proxy's `execution.stream_max_duration` (an hour), so neither the timeout nor memory holds it.
   */
  readonly stream?: (write: (text: string) => void) => Promise<void>;
}

/**
 * `GET /.well-known/agent-configuration` at the base URL (§5.1). Every token the client signs is
 * addressed (`aud`) to the issuer and sent to the issuer's endpoints, so the document must name
 * the server it came from as its issuer, and every URL in it must be on that server: otherwise
 * the server could have the client sign tokens for another one and hand them to it (§8.18), or
 * send them elsewhere.
 */
export async function discover(baseUrl: string): Promise<Discovery> {
  const { body } = await call('GET', `${baseUrl}/.well-known/agent-configuration`);
  const { issuer, default_location: location, endpoints } = body;
  if (typeof issuer !== 'string' || typeof endpoints !== 'object' || endpoints === null) {
    throw new ConnectionError(`${baseUrl} has no agent configuration with an issuer: is it the proxy?`);
  }
  if (!sameServer(issuer, baseUrl)) {
    throw new ConnectionError(
      `${baseUrl} names another server as its issuer (${issuer}); the agent signs tokens only for the server it talks to: pass that issuer as --url if it is the proxy`,
    );
  }
  const paths = Object.fromEntries(
    Object.entries(endpoints).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
  const defaultLocation = typeof location === 'string' ? location : `${issuer}/capability/execute`;
  onIssuer(issuer, defaultLocation, 'its default_location');
  return { issuer, defaultLocation, endpoints: paths };
}

/** §5.1: endpoint paths are relative to the issuer; the name's usual path if one is missing. */
export function endpoint(d: Discovery, name: string, fallback: string): string {
  const path = d.endpoints[name] ?? fallback;
  const url = /^https?:\/\//i.test(path) ? path : `${d.issuer}${path}`;
  return onIssuer(d.issuer, url, `its ${name} endpoint`);
}

/**
 * `url` when it is on the issuer's origin (§8.12: a URL a server returns is followed only there);
 * a ConnectionError naming `what` otherwise.
 */
export function onIssuer(issuer: string, url: string, what: string): string {
  if (originOf(url) !== originOf(issuer)) {
    throw new ConnectionError(`${issuer} gave ${what} on another server (${url}); it is not followed`);
  }
  return url;
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** The same origin and path (a trailing slash aside): the URL the client was given is the issuer. */
function sameServer(a: string, b: string): boolean {
  try {
    const [x, y] = [new URL(a), new URL(b)];
    return x.origin === y.origin && x.pathname.replace(/\/+$/, '') === y.pathname.replace(/\/+$/, '');
  } catch {
    return false;
  }
}

/** How a request is signed: a bearer JWT, or a DPoP-bound JWT with its proof for it (§4.4). */
export type Credential = string | { readonly jwt: string; readonly proof: string };

function authorization(credential: Credential): Record<string, string> {
  return typeof credential === 'string'
    ? { authorization: `Bearer ${credential}` }
    : { authorization: `DPoP ${credential.jwt}`, dpop: credential.proof };
}

/** The parsed JSON object of a 2xx reply with its status; throws for anything else. */
export async function call(
  method: 'GET' | 'POST',
  url: string,
  credential?: Credential,
  body?: Record<string, unknown>,
): Promise<Reply> {
  let res: Response;
  // The timeout covers the answer's head and a JSON body; an event stream, once it began, none.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new DOMException('timed out', 'TimeoutError')), TIMEOUT_MS);
  try {
    res = await fetch(url, {
      method,
      headers: {
        accept: 'application/json',
        ...(credential !== undefined ? authorization(credential) : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: abort.signal,
      redirect: 'manual',
    });
  } catch (err) {
    clearTimeout(timer);
    throw new ConnectionError(`cannot reach ${url}: ${reason(err)}`);
  }
  if (res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    clearTimeout(timer);
    return { status: res.status, body: {}, stream: (write) => relay(res, url, write) };
  }
  let text: string;
  try {
    text = await readCapped(res, url);
  } finally {
    clearTimeout(timer);
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

/** An event stream's body, written out as it arrives; a stream cut off is a ConnectionError. */
async function relay(res: Response, url: string, write: (text: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  try {
    // A fetch body yields bytes; its type says any (undici's ReadableStream).
    for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
      write(decoder.decode(chunk, { stream: true }));
    }
    write(decoder.decode());
  } catch (err) {
    throw new ConnectionError(`the event stream from ${url} broke off: ${reason(err)}`);
  }
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
