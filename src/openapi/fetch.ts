/**
 * A guarded fetcher for OpenAPI documents given as URLs (`--spec https://…` and, when the operator
 * allows it, remote `$ref`s). §8.12 asks client-side fetches of OpenAPI specs to be HTTPS only, to
 * cap response sizes (10 MB for specs), to enforce connect and read timeouts and to follow at most
 * 3 redirects; a malicious URL could otherwise probe the local network or exhaust memory. A
 * remote document's `$ref`s are fetched public-only besides (public-address.ts).
 * Dependency-free on purpose: only node's own modules, so every rule is visible here.
 */
import { shownUrl } from '../util/shown-url.js';
import http from 'node:http';
import https from 'node:https';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { UserError } from '../errors.js';
import { isPublicAddress, NotPublicError, publicOnlyLookup } from './public-address.js';

export interface FetchLimits {
  /** false → only https:// URLs; true → http:// as well. */
  allowHttp: boolean;
  /** Response body cap in bytes. */
  maxBytes: number;
  /** Time allowed for DNS lookup, TCP connect and TLS handshake. */
  connectTimeoutMs: number;
  /** Longest silence allowed between bytes once connected. */
  readTimeoutMs: number;
  /**
   * Longest a whole fetch may take, redirects included: the read timeout alone is one on silence,
   * and a server sending a byte now and then would hold a reload (and every one queued behind it)
   * for as long as the size cap lets it.
   */
  deadlineMs: number;
  /** Redirects followed before giving up. */
  maxRedirects: number;
  /** true → only public addresses, every hop (public-address.ts): for a remote document's `$ref`s. */
  publicOnly: boolean;
  /**
   * Bytes shared with other fetches (one document's remote `$ref`s, fetched at once): each chunk
   * is taken from it as it arrives, and the fetch fails once it is spent.
   */
  shared?: SharedBytes;
}

export interface SharedBytes {
  /** Takes `bytes`; false once the total would pass what is shared. */
  take(bytes: number): boolean;
  /** Says what was shared, for the message of a fetch that found it spent. */
  readonly description: string;
}

/** The example values of §8.12 for OpenAPI specs. */
export const DEFAULT_FETCH_LIMITS: FetchLimits = Object.freeze({
  allowHttp: false,
  maxBytes: 10 * 1024 * 1024,
  connectTimeoutMs: 5000,
  readTimeoutMs: 5000,
  deadlineMs: 30_000,
  maxRedirects: 3,
  publicOnly: false,
});

export interface FetchedDocument {
  /** The URL the document was finally read from, after redirects. */
  url: string;
  body: Buffer;
  contentType?: string;
  /** The IP address it was read from. */
  address?: string;
}

// Only Accept: no cookies, no Authorization, nothing that could leak to whoever serves the URL.
const REQUEST_HEADERS = { accept: 'application/json, application/yaml, text/yaml, */*;q=0.1' } as const;

const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

export async function fetchDocument(
  url: string,
  limits: Partial<FetchLimits> = {},
): Promise<FetchedDocument> {
  const effective = withDefaults(limits);
  let current = checkUrl(parseUrl(url), effective);
  const deadline = Date.now() + effective.deadlineMs;
  for (let redirects = 0; ; redirects++) {
    const hop = await exchange(current, effective, deadline);
    if (hop.kind === 'document') {
      return { url: current.href, body: hop.body, contentType: hop.contentType, address: hop.address };
    }
    // §8.12: follow at most `maxRedirects` redirects.
    if (redirects >= effective.maxRedirects) {
      throw new UserError(
        `Fetching ${shownUrl(url)} failed: more than ${effective.maxRedirects} redirects (the last one from ${shownUrl(current.href)}).`,
      );
    }
    // Every redirect target passes the same checks as the original URL, so https cannot be
    // downgraded to http, nor redirected to another scheme, behind the operator's back.
    current = checkUrl(parseUrl(hop.location, current), effective, current);
  }
}

/** Explicit `undefined`s in `limits` keep the default rather than erasing it. */
function withDefaults(limits: Partial<FetchLimits>): FetchLimits {
  const defined = Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined));
  return { ...DEFAULT_FETCH_LIMITS, ...defined };
}

function parseUrl(raw: string, base?: URL): URL {
  try {
    return new URL(raw, base);
  } catch {
    const where = base ? ` (redirect from ${shownUrl(base.href)})` : '';
    throw new UserError(`"${shownUrl(raw)}"${where} is not a valid URL.`);
  }
}

/** Rejects what may not be fetched; `from` is the URL that redirected here, if any. */
function checkUrl(url: URL, limits: FetchLimits, from?: URL): URL {
  const subject = from
    ? `${shownUrl(from.href)} redirected to ${shownUrl(url.href)}, which`
    : shownUrl(url.href);
  // Credentials in a spec URL would end up in logs and be sent to whoever the URL points at.
  if (url.username !== '' || url.password !== '') {
    throw new UserError(
      `${subject} contains credentials (user:password@); spec URLs must not carry credentials — ` +
        'download the document and pass its local path instead.',
    );
  }
  // A name is checked when it is resolved (publicOnlyLookup); an address literal never is.
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (limits.publicOnly && isIP(literal) !== 0 && !isPublicAddress(literal)) {
    throw new NotPublicFetch(`${subject} is not a public address`);
  }
  if (url.protocol === 'https:') return url;
  if (url.protocol === 'http:') {
    // §8.12: HTTPS only, unless the operator explicitly opted in.
    if (limits.allowHttp) return url;
    throw new UserError(
      `${subject} is http; use an https:// URL, or pass --allow-http-specs to allow plain-HTTP spec URLs.`,
    );
  }
  throw new UserError(
    `${subject} uses the unsupported scheme "${url.protocol}"; only https:// (and, with ` +
      '--allow-http-specs, http://) URLs can be fetched — for a local file, pass its path instead.',
  );
}

type Hop =
  | { kind: 'redirect'; location: string }
  | { kind: 'document'; body: Buffer; contentType?: string; address?: string };

/**
 * One GET request: resolves with the redirect target or the document, rejects with a UserError.
 * The timer and the connection are released when it settles, whichever way.
 */
function exchange(url: URL, limits: FetchLimits, deadline: number): Promise<Hop> {
  return new Promise<Hop>((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    // agent: false: a fresh connection per request, nothing pooled or shared with other code.
    const req: ClientRequest = client.request(url, {
      method: 'GET',
      headers: REQUEST_HEADERS,
      agent: false,
      ...(limits.publicOnly ? { lookup: publicOnlyLookup } : {}),
    });
    let settled = false;
    let connectTimer: NodeJS.Timeout | undefined;
    const deadlineTimer = setTimeout(
      () => {
        fail(failure(url, `the fetch took longer than ${limits.deadlineMs} ms`));
      },
      Math.max(0, deadline - Date.now()),
    );
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(deadlineTimer);
      // Closes the connection, dropping unread bodies of redirects, errors and oversized documents.
      req.destroy();
      outcome();
    };
    const done = (hop: Hop): void => {
      settle(() => {
        resolve(hop);
      });
    };
    const fail = (err: UserError): void => {
      settle(() => {
        reject(err);
      });
    };

    req.on('socket', (socket: Socket) => {
      // §8.12: connect timeout, covering DNS lookup, TCP connect and (for https) the TLS handshake.
      connectTimer = setTimeout(() => {
        fail(failure(url, `connect timeout after ${limits.connectTimeoutMs} ms`));
      }, limits.connectTimeoutMs);
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        clearTimeout(connectTimer);
        // §8.12: read timeout; the socket's idle timer restarts with every byte.
        socket.setTimeout(limits.readTimeoutMs);
      });
      socket.on('timeout', () => {
        fail(failure(url, `read timeout, no data for ${limits.readTimeoutMs} ms`));
      });
    });
    req.on('error', (err) => {
      fail(connectionError(url, err));
    });
    req.on('response', (res) => {
      handleResponse(url, res, limits, done, fail);
    });
    req.end();
  });
}

function handleResponse(
  url: URL,
  res: IncomingMessage,
  limits: FetchLimits,
  done: (hop: Hop) => void,
  fail: (err: UserError) => void,
): void {
  const status = res.statusCode ?? 0;
  if (REDIRECT_STATUSES.has(status)) {
    const location = res.headers.location;
    if (location === undefined || location === '') {
      fail(failure(url, `HTTP ${status} redirect without a Location header`));
    } else {
      done({ kind: 'redirect', location });
    }
    return;
  }
  // Only the status: the body is whatever the remote server chose to send, never quoted.
  if (status < 200 || status > 299) {
    fail(failure(url, `the server answered HTTP ${status}`));
    return;
  }

  const tooLarge = (): UserError =>
    failure(url, `the document exceeds the ${formatBytes(limits.maxBytes)} limit`);
  // §8.12: cap response sizes; refuse an announced oversized body before reading any of it.
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBytes) {
    fail(tooLarge());
    return;
  }

  const chunks: Buffer[] = [];
  let total = 0;
  res.on('data', (chunk: Buffer) => {
    total += chunk.length;
    // Content-Length may be absent (chunked) or wrong, so count what actually arrives.
    if (total > limits.maxBytes) fail(tooLarge());
    else if (limits.shared && !limits.shared.take(chunk.length)) {
      fail(failure(url, limits.shared.description));
    } else chunks.push(chunk);
  });
  res.on('end', () => {
    done({
      kind: 'document',
      body: Buffer.concat(chunks, total),
      contentType: res.headers['content-type'],
      address: res.socket.remoteAddress,
    });
  });
  res.on('error', (err) => {
    fail(connectionError(url, err));
  });
}

function failure(url: URL, reason: string): UserError {
  return new UserError(`Fetching ${shownUrl(url.href)} failed: ${reason}.`);
}

/** A public-only fetch that would have reached a private address (public-address.ts). */
export class NotPublicFetch extends UserError {}

/** Names the cause by its code (ECONNREFUSED, ENOTFOUND, …), never with a stack. */
function connectionError(url: URL, err: Error): UserError {
  if (err instanceof NotPublicError)
    return new NotPublicFetch(`Fetching ${shownUrl(url.href)} failed: ${err.message}.`);
  const code = (err as NodeJS.ErrnoException).code;
  return failure(url, code ?? err.message);
}

/** 10485760 → "10 MiB", 1536 → "1.5 KiB", 100 → "100 bytes". */
export function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB'];
  if (bytes < 1024) return `${bytes} bytes`;
  let value = bytes;
  let unit = 'bytes';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${unit}`;
}
