/**
 * Keys from JWKS URLs in JWT verification (§4.2, §4.5, §4.5.1, §8.7): which key of a JWKS-based
 * host or agent signs a JWT, by the header's `kid`. The keys come from the in-memory cache
 * (jwks/cache.ts), so a request fetches only on a `kid` miss or an expired set, bounded per URL.
 */
import { ProtocolError } from '../errors.js';
import type { AgentRecord, HostRecord } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { JwksKeyError } from './jwks/cache.js';
import type { UnverifiedJwt } from './jwt.js';
import { thumbprint, type Ed25519PublicJwk } from './keys.js';

/**
 * The longest JWKS URL stored, in UTF-8 bytes (a URL is an identifier here, §4.2, not a document):
 * counted in characters, 1,500 CJK ones passed and made a key PostgreSQL's unique index cannot
 * hold (2,704 bytes at most), a 500 there.
 */
const MAX_URL_BYTES = 2048;

function invalid(message: string): ProtocolError {
  return new ProtocolError('invalid_jwt', message);
}

/** A client-supplied JWKS URL: a string the fetcher may try. The fetch itself applies §8.12. */
export function jwksUrlClaim(ctx: ProtocolContext, value: unknown, claim: string): string {
  if (!ctx.jwks) {
    throw new ProtocolError('invalid_request', `${claim} is not enabled on this server; send an inline key.`);
  }
  if (typeof value !== 'string' || Buffer.byteLength(value) > MAX_URL_BYTES || !URL.canParse(value)) {
    throw new ProtocolError('invalid_request', `${claim} must be an absolute https URL (§4.2).`);
  }
  return value;
}

/**
 * The key `kid` names at `url`. A failure (unknown kid, URL refused or unusable) is the JWT's
 * fault (401 invalid_jwt), or the request's at registration (400 invalid_request).
 */
export async function keyFromUrl(
  ctx: ProtocolContext,
  url: string,
  kid: string,
  code: 'invalid_jwt' | 'invalid_request' = 'invalid_jwt',
): Promise<Ed25519PublicJwk> {
  if (!ctx.jwks) throw new ProtocolError('invalid_request', 'JWKS URLs are not enabled on this server.');
  try {
    return await ctx.jwks.key(url, kid);
  } catch (err) {
    if (err instanceof JwksKeyError) throw new ProtocolError(code, `${err.message} (§8.12)`);
    throw err;
  }
}

export interface RegisteredAgentKey {
  readonly jwk: Ed25519PublicJwk;
  readonly jwksUrl: string | null;
  readonly jwksKid: string | null;
}

/** §4.2, §5.3: `agent_jwks_url` with `agent_kid`, at another URL than the host's; the key is fetched now. */
export async function agentKeyFromUrl(
  ctx: ProtocolContext,
  claims: Readonly<Record<string, unknown>>,
  hostJwksUrl: string | undefined,
): Promise<RegisteredAgentKey> {
  if (claims.agent_public_key !== undefined) {
    throw new ProtocolError('invalid_request', 'Send agent_public_key or agent_jwks_url, not both (§4.2).');
  }
  const url = jwksUrlClaim(ctx, claims.agent_jwks_url, 'agent_jwks_url');
  const kid = claims.agent_kid;
  if (typeof kid !== 'string' || kid === '') {
    throw new ProtocolError(
      'invalid_request',
      'agent_jwks_url needs agent_kid, the key ID in that set (§4.2).',
    );
  }
  if (hostJwksUrl !== undefined && endpointOf(url) === endpointOf(hostJwksUrl)) {
    throw new ProtocolError(
      'invalid_request',
      'Host and agent JWKS URLs must point to different endpoints (§4.2).',
    );
  }
  return { jwk: await keyFromUrl(ctx, url, kid, 'invalid_request'), jwksUrl: url, jwksKid: kid };
}

/**
 * The endpoint a URL names, for telling two spellings of one apart (§4.2): parsed as WHATWG URLs
 * are (scheme and host case, default port, dot segments), without the fragment (never sent), with
 * percent-encoded unreserved characters decoded and other escapes upper-cased (RFC 3986 §6.2.2).
 */
export function endpointOf(url: string): string {
  const parsed = new URL(url);
  parsed.hash = '';
  return parsed.href.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return /[A-Za-z0-9\-._~]/.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}

function headerKid(jwt: UnverifiedJwt): string | undefined {
  const kid = jwt.header.kid;
  return typeof kid === 'string' && kid !== '' ? kid : undefined;
}

export interface JwksHostKey {
  /** Found by `iss`, or by the URL when the host rotated (then `rotated`); absent: a new host. */
  readonly host: HostRecord | undefined;
  readonly key: Ed25519PublicJwk;
  readonly url: string;
  readonly rotated: boolean;
}

/**
 * §4.5.1 steps 3–4 for a host JWT carrying `host_jwks_url`: the host by `iss`, else by the URL
 * (a rotation, §8.7), else a new host. The key is always the one the header's `kid` names in the
 * current set, so a key removed from the set stops verifying once the set is refreshed, and its
 * thumbprint must be `iss` (§4.2).
 */
export async function jwksHostKey(
  ctx: ProtocolContext,
  jwt: UnverifiedJwt,
  iss: string,
  byThumbprint: HostRecord | undefined,
  allowUnknown: boolean,
  admitUnknown?: () => void | Promise<void>,
): Promise<JwksHostKey> {
  const url = jwksUrlClaim(ctx, jwt.payload.host_jwks_url, 'host_jwks_url');
  if (jwt.payload.host_public_key !== undefined) {
    throw new ProtocolError('invalid_request', 'Send host_public_key or host_jwks_url, not both (§4.2).');
  }
  const kid = headerKid(jwt);
  if (kid === undefined)
    throw invalid('A host JWT using host_jwks_url must name its key in the kid header (§4.2).');
  let host = byThumbprint;
  let rotated = false;
  if (!host) {
    host = await ctx.store.hostByJwksUrl(url);
    rotated = host !== undefined;
  }
  // Before any fetch: only registration and listing may make the server fetch a URL it does not
  // know (§8.12), and only within the client's budget for new hosts.
  if (!host && !allowUnknown) throw invalid('Unknown host: no host is registered with this key.');
  if (!host) await admitUnknown?.();
  // §8.7: the key delivery mode is fixed at registration.
  if (host && host.jwksUrl !== url) {
    throw new ProtocolError(
      'invalid_request',
      host.jwksUrl
        ? 'host_jwks_url is not the URL this host registered with.'
        : 'This host registered with an inline key; it cannot switch to host_jwks_url (§8.7).',
    );
  }
  const key = await keyFromUrl(ctx, url, kid);
  if ((await thumbprint(key)) !== iss) {
    throw invalid('iss is not the JWK thumbprint (RFC 7638, SHA-256) of the key kid names (§4.2).');
  }
  return { host, key, url, rotated };
}

/** A known JWKS-based host presenting no key claim: its stored URL, by the header's `kid`. */
export async function storedHostKey(
  ctx: ProtocolContext,
  jwt: UnverifiedJwt,
  host: HostRecord & { jwksUrl: string },
): Promise<Ed25519PublicJwk> {
  if (jwt.payload.host_public_key !== undefined) {
    throw new ProtocolError(
      'invalid_request',
      'This host registered with host_jwks_url; it cannot present an inline key (§8.7).',
    );
  }
  const kid = headerKid(jwt);
  if (kid === undefined) throw invalid('A JWKS-based host must name its key in the kid header (§4.2).');
  const key = await keyFromUrl(ctx, host.jwksUrl, kid);
  if ((await thumbprint(key)) !== host.thumbprint) throw invalid('The key kid names is not this host’s key.');
  return key;
}

/** §4.5 step 7: the agent's stored key, or for a JWKS-based agent the key its `kid` names. */
export async function agentKey(
  ctx: ProtocolContext,
  jwt: UnverifiedJwt,
  agent: AgentRecord,
): Promise<Ed25519PublicJwk> {
  if (!agent.jwksUrl) return agent.publicJwk;
  const kid = headerKid(jwt) ?? agent.jwksKid;
  if (!kid) throw invalid('A JWKS-based agent must name its key in the kid header (§4.2).');
  return keyFromUrl(ctx, agent.jwksUrl, kid);
}
