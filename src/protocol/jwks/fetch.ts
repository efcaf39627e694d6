/**
 * The guarded HTTP GET behind JWKS URLs (§8.12): https only (http behind a development flag),
 * DNS resolved once and every address checked, the connection pinned to the checked address
 * (DNS rebinding), at most MAX_REDIRECTS redirects each checked the same way, a size cap and one
 * deadline for the whole fetch. TLS keeps SNI and certificate checks on the URL's own name.
 */
import { Resolver } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import type { AddressGuard } from './address-guard.js';

export const MAX_REDIRECTS = 3;

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

export interface JwksFetchOptions {
  readonly guard: AddressGuard;
  /** Development only: accept http:// URLs (§8.12 says https only). */
  readonly allowHttp: boolean;
  /** Extra trusted CA certificates (PEM) for private PKIs; the system store otherwise. */
  readonly ca?: string;
  readonly timeoutMs: number;
  readonly maxBytes: number;
  /** Injectable for tests; DNS queries otherwise (dnsResolve). */
  readonly resolve?: (hostname: string, deadline: AbortSignal) => Promise<readonly ResolvedAddress[]>;
}

export interface FetchedDocument {
  readonly body: unknown;
  readonly cacheControl: string | undefined;
}

/** Every refusal or failure: the message is safe to show the client that supplied the URL. */
export class JwksFetchError extends Error {}

/** RFC 6761 §6.3: a localhost name is the loopback address, whatever DNS would say. */
const LOCALHOST = /^(?:[^.]+\.)*localhost\.?$/i;

/**
 * A and AAAA queries (c-ares), cancelled at the deadline. Not dns.lookup: getaddrinfo runs on
 * libuv's pool of 4 threads, and a stranger's URL whose name server never answers held a thread
 * for the system resolver's whole timeout (20 s), past the fetch's own deadline; eight of them
 * stalled the pool, and with it every lookup of the upstream (an execute took 31 s and failed),
 * the replay journal's writes and decompression. So /etc/hosts is not read for JWKS URLs.
 */
async function dnsResolve(hostname: string, deadline: AbortSignal): Promise<readonly ResolvedAddress[]> {
  if (LOCALHOST.test(hostname)) return [{ address: '127.0.0.1', family: 4 }];
  const resolver = new Resolver({ tries: 1 });
  const cancel = (): void => resolver.cancel();
  deadline.addEventListener('abort', cancel, { once: true });
  try {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    const found: ResolvedAddress[] = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
    ];
    if (found.length === 0) throw new Error(`${hostname} does not resolve`);
    return found;
  } finally {
    deadline.removeEventListener('abort', cancel);
  }
}

/** Resolves once and checks every address: one private answer refuses the URL (§8.12). */
async function checkedAddress(
  url: URL,
  options: JwksFetchOptions,
  deadline: AbortSignal,
): Promise<ResolvedAddress> {
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && options.allowHttp)) {
    throw new JwksFetchError(`${url.protocol}// URLs are refused: JWKS URLs must use https (§8.12)`);
  }
  if (url.username !== '' || url.password !== '')
    throw new JwksFetchError('JWKS URLs must not carry credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = isIP(host);
  let addresses: readonly ResolvedAddress[];
  if (literal !== 0) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      // Raced with the deadline as well, so an injected resolver is not waited for either.
      addresses = await Promise.race([
        (options.resolve ?? dnsResolve)(host, deadline),
        new Promise<never>((_resolve, reject) => {
          deadline.addEventListener('abort', () => reject(new Error('deadline')), { once: true });
        }),
      ]);
    } catch {
      if (deadline.aborted)
        throw new JwksFetchError(`the JWKS URL did not answer within ${options.timeoutMs} ms`);
      throw new JwksFetchError(`the JWKS host ${host} does not resolve`);
    }
  }
  const first = addresses[0];
  if (first === undefined) throw new JwksFetchError(`the JWKS host ${host} does not resolve`);
  for (const { address } of addresses) {
    const refusal = options.guard.refusal(address);
    if (refusal !== undefined) throw new JwksFetchError(`the JWKS URL is refused: ${refusal}`);
  }
  return first;
}

/** A lookup that answers only the checked address: undici never re-resolves (§8.12 rebinding). */
function pinnedLookup(pinned: ResolvedAddress): LookupFunction {
  return (_hostname, options, callback) => {
    if (typeof options === 'object' && options.all === true) {
      (callback as unknown as (e: null, a: readonly ResolvedAddress[]) => void)(null, [pinned]);
    } else {
      callback(null, pinned.address, pinned.family);
    }
  };
}

export async function fetchJwksDocument(rawUrl: string, options: JwksFetchOptions): Promise<FetchedDocument> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new JwksFetchError('the JWKS URL is not a valid absolute URL');
  }
  try {
    for (let hop = 0; ; hop += 1) {
      const pinned = await checkedAddress(url, options, deadline);
      const agent = new Agent({
        connect: {
          lookup: pinnedLookup(pinned),
          timeout: options.timeoutMs,
          ...(options.ca ? { ca: options.ca } : {}),
        },
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      });
      try {
        const res = await request(url, {
          dispatcher: agent,
          method: 'GET',
          signal: deadline,
          headers: { accept: 'application/jwk-set+json, application/json' },
        });
        const location = res.headers.location;
        if (res.statusCode >= 300 && res.statusCode < 400 && typeof location === 'string') {
          await res.body.dump();
          if (hop >= MAX_REDIRECTS) throw new JwksFetchError(`more than ${MAX_REDIRECTS} redirects (§8.12)`);
          url = new URL(location, url);
          continue;
        }
        if (res.statusCode !== 200) {
          await res.body.dump();
          throw new JwksFetchError(`the JWKS URL answered HTTP ${res.statusCode}`);
        }
        const text = await readCapped(res.body, options.maxBytes);
        const cacheControl = res.headers['cache-control'];
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          throw new JwksFetchError('the JWKS document is not valid JSON');
        }
        return { body, cacheControl: typeof cacheControl === 'string' ? cacheControl : undefined };
      } finally {
        void agent.destroy();
      }
    }
  } catch (err) {
    if (err instanceof JwksFetchError) throw err;
    if (deadline.aborted)
      throw new JwksFetchError(`the JWKS URL did not answer within ${options.timeoutMs} ms`);
    throw new JwksFetchError(
      `the JWKS URL could not be fetched: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** Stops reading, and drops the connection, as soon as the body passes the cap (§8.12). */
async function readCapped(
  body: AsyncIterable<Buffer> & { destroy(): void },
  maxBytes: number,
): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new JwksFetchError(`the JWKS document is larger than ${maxBytes} bytes (§8.12)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
