/**
 * OAuth 2.0 client credentials (RFC 6749 §4.4) for upstream APIs: one token per scheme, fetched
 * on first use, cached until shortly before it expires, refreshed on a 401, but at most once per
 * MIN_REFRESH_INTERVAL_MS for each token (then the 401 stands). Concurrent callers share one fetch. Token values never leave this module except into the Authorization
 * header of their own API's requests.
 */
import { createHash } from 'node:crypto';
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { ServiceCredential } from '../config/api-execution.js';
import { hasControlCharacter } from '../util/control-characters.js';

type OAuthCredential = Extract<ServiceCredential, { kind: 'oauth2' }>;

// Refresh this long before `expires_in` runs out, so a token never expires in flight.
const EXPIRY_MARGIN_MS = 30_000;
// Without `expires_in` the token is reused for this long (then fetched again, or on a 401).
const DEFAULT_LIFETIME_MS = 5 * 60_000;
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
/**
 * 401s refresh a token at most this often. Every upstream 401 (which an agent's own calls can
 * cause) would otherwise fetch a token: the token endpoint driven at an agent's execute rate, and
 * a token still in use by a slow call pushed out of the retired list within seconds.
 */
export const MIN_REFRESH_INTERVAL_MS = 30_000;

export class TokenError extends Error {}

interface CachedToken {
  readonly value: string;
  readonly expiresAt: number;
}

const NO_TOKENS: readonly string[] = Object.freeze([]);

/**
 * Replaced tokens kept for redaction per scheme, newest last. An answer read after a refresh may
 * echo the token its request was sent with, which the upstream still honours until it expires.
 * With refreshes at most every MIN_REFRESH_INTERVAL_MS, 64 cover 32 minutes of forced refreshes,
 * longer than any call is in flight.
 */
const MAX_RETIRED_PER_KEY = 64;

export class OAuthTokens {
  private readonly cache = new Map<string, CachedToken>();
  private readonly inflight = new Map<string, Promise<CachedToken>>();
  /** Tokens replaced by a refresh, until they expire at the token endpoint's word. */
  private readonly retired = new Map<string, CachedToken[]>();
  /** When a 401 last replaced the token of each key. */
  private readonly refreshedAt = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly dispatcher: Dispatcher,
    private readonly timeoutMs = 10_000,
  ) {}

  /**
   * The tokens held now and those replaced that may still be honoured, so that upstream bodies
   * echoing one can be scrubbed, also when the token was refreshed while the call was in flight.
   */
  currentTokens(): readonly string[] {
    // Every answer's redaction asks, and most deployments hold no token at all: no array then.
    if (this.cache.size === 0 && this.retired.size === 0) return NO_TOKENS;
    const now = this.clock.now();
    const tokens = [...this.cache.values()].map((t) => t.value);
    for (const [key, list] of this.retired) {
      // expiresAt is EXPIRY_MARGIN_MS before the endpoint's expiry: the token is honoured till then.
      const live = list.filter((t) => t.expiresAt + EXPIRY_MARGIN_MS > now);
      if (live.length === 0) this.retired.delete(key);
      else if (live.length !== list.length) this.retired.set(key, live);
      for (const t of live) tokens.push(t.value);
    }
    return tokens;
  }

  private retire(key: string, token: CachedToken): void {
    const list = this.retired.get(key) ?? [];
    list.push(token);
    if (list.length > MAX_RETIRED_PER_KEY) list.shift();
    this.retired.set(key, list);
  }

  /**
   * The token for `scheme` (an API's scheme name) with this credential and these scopes. A token
   * is only reused for the same client, token URL, audience and scopes: a reload that rotates the
   * client must not keep sending the old client's token, and an operation needing other scopes
   * must not be sent a token lacking them.
   */
  async token(
    scheme: string,
    credential: OAuthCredential,
    documentTokenUrl: string | undefined,
    operationScopes: readonly string[],
    refresh: boolean,
  ): Promise<string> {
    const scopes = credential.scopes.length > 0 ? credential.scopes : operationScopes;
    const key = tokenKey(scheme, credential, documentTokenUrl, scopes);
    const cached = this.cache.get(key);
    const now = this.clock.now();
    if (cached && cached.expiresAt > now) {
      if (!refresh) return cached.value;
      const last = this.refreshedAt.get(key);
      if (last !== undefined && now - last < MIN_REFRESH_INTERVAL_MS) return cached.value;
    }
    if (refresh) {
      this.cache.delete(key);
      this.refreshedAt.set(key, now);
    }
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.fetch(credential, documentTokenUrl, scopes).finally(() => this.inflight.delete(key));
      this.dropExpired();
      this.inflight.set(key, pending);
    }
    const token = await pending;
    const replaced = this.cache.get(key) ?? cached;
    if (replaced && replaced.value !== token.value && !this.retired.get(key)?.includes(replaced)) {
      this.retire(key, replaced);
    }
    this.cache.set(key, token);
    return token.value;
  }

  /**
   * Forgets cached tokens past their time, so that keys left behind by reloads and by scope sets
   * no longer asked for do not pile up. Runs only when a token is fetched, off the hot path.
   */
  private dropExpired(): void {
    const now = this.clock.now();
    for (const [key, token] of this.cache) {
      if (token.expiresAt + EXPIRY_MARGIN_MS <= now && !this.inflight.has(key)) {
        this.cache.delete(key);
        this.refreshedAt.delete(key);
      }
    }
  }

  private async fetch(
    credential: OAuthCredential,
    documentTokenUrl: string | undefined,
    scopes: readonly string[],
  ): Promise<CachedToken> {
    const tokenUrl = credential.tokenUrl ?? documentTokenUrl;
    if (!tokenUrl) throw new TokenError('no token URL: set token_url in the credential or the document');
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scopes.length > 0) form.set('scope', scopes.join(' '));
    if (credential.audience) form.set('audience', credential.audience);
    // RFC 6749 §2.3.1: client_secret_basic, with both parts form-urlencoded first.
    const basic = Buffer.from(
      `${encodeURIComponent(credential.clientId)}:${encodeURIComponent(credential.clientSecret)}`,
    ).toString('base64');
    const started = this.clock.now();
    let res: Dispatcher.ResponseData;
    try {
      res = await request(tokenUrl, {
        method: 'POST',
        dispatcher: this.dispatcher,
        headers: {
          authorization: `Basic ${basic}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new TokenError(`token endpoint unreachable (${errorCode(err)})`);
    }
    let text: string;
    try {
      text = await readCapped(res);
    } catch (err) {
      // A reset, or the deadline, while the answer was read: unreachable as much as before it.
      throw err instanceof TokenError
        ? err
        : new TokenError(`token endpoint answer unreadable (${errorCode(err)})`);
    }
    if (res.statusCode !== 200) throw new TokenError(`token endpoint answered ${res.statusCode}`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new TokenError('token endpoint answered with invalid JSON');
    }
    const value = (body as { access_token?: unknown }).access_token;
    // A token with control characters could split a header.
    if (typeof value !== 'string' || value === '' || hasControlCharacter(value)) {
      throw new TokenError('token endpoint answer has no usable access_token');
    }
    const expiresIn = (body as { expires_in?: unknown }).expires_in;
    const lifetime =
      typeof expiresIn === 'number' && expiresIn > 0
        ? expiresIn * 1000 - EXPIRY_MARGIN_MS
        : DEFAULT_LIFETIME_MS;
    return { value, expiresAt: started + Math.max(lifetime, 0) };
  }
}

/**
 * What a cached token is valid for. The secret enters only as a digest, so the key held in memory
 * does not carry it; scopes are sorted, as the order asked in does not change the token.
 */
function tokenKey(
  scheme: string,
  credential: OAuthCredential,
  documentTokenUrl: string | undefined,
  scopes: readonly string[],
): string {
  const client = JSON.stringify([
    credential.clientId,
    credential.clientSecret,
    credential.tokenUrl ?? documentTokenUrl ?? null,
    credential.audience ?? null,
    [...scopes].sort(),
  ]);
  return `${scheme} ${createHash('sha256').update(client).digest('base64url')}`;
}

async function readCapped(res: Dispatcher.ResponseData): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > MAX_TOKEN_RESPONSE_BYTES) {
      res.body.destroy();
      throw new TokenError('token endpoint answer too large');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function errorCode(err: unknown): string {
  if (err && typeof err === 'object') {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const name = (err as { name?: unknown }).name;
    if (typeof name === 'string') return name;
  }
  return 'error';
}
