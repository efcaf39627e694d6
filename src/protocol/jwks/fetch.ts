/**
 * The guarded HTTP GET behind JWKS URLs (§8.12): https only (http behind a development flag),
 * DNS resolved once and every address checked, the connection pinned to the checked address
 * (DNS rebinding), at most MAX_REDIRECTS redirects each checked the same way, a size cap and one
 * deadline for the whole fetch. TLS keeps SNI and certificate checks on the URL's own name.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
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
  /** Injectable for tests; the system resolver otherwise. */
  readonly resolve?: (hostname: string) => Promise<readonly ResolvedAddress[]>;
}

export interface FetchedDocument {
  readonly body: unknown;
  readonly cacheControl: string | undefined;
}

/** Every refusal or failure: the message is safe to show the client that supplied the URL. */
export class JwksFetchError extends Error {}

async function systemResolve(hostname: string): Promise<readonly ResolvedAddress[]> {
  const all = await dnsLookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
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
      // The resolver cannot be cancelled: the deadline is raced, so a slow DNS answer is not waited for.
      addresses = await Promise.race([
        (options.resolve ?? systemResolve)(host),
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
