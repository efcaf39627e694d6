/**
 * OAuth 2.0 client credentials (RFC 6749 §4.4) for upstream APIs: one token per scheme, fetched
 * on first use, cached until shortly before it expires, refreshed at most once per 401. Concurrent
 * callers share one fetch. Token values never leave this module except into the Authorization
 * header of their own API's requests.
 */
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { ServiceCredential } from '../config/api-execution.js';

type OAuthCredential = Extract<ServiceCredential, { kind: 'oauth2' }>;

// Refresh this long before `expires_in` runs out, so a token never expires in flight.
const EXPIRY_MARGIN_MS = 30_000;
// Without `expires_in` the token is reused for this long (then fetched again, or on a 401).
const DEFAULT_LIFETIME_MS = 5 * 60_000;
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

export class TokenError extends Error {}

interface CachedToken {
  readonly value: string;
  readonly expiresAt: number;
}

const NO_TOKENS: readonly string[] = Object.freeze([]);

/**
 * Replaced tokens kept for redaction per scheme, newest last. An answer read after a refresh may
 * echo the token its request was sent with, which the upstream still honours until it expires.
 */
const MAX_RETIRED_PER_KEY = 4;

export class OAuthTokens {
  private readonly cache = new Map<string, CachedToken>();
  private readonly inflight = new Map<string, Promise<CachedToken>>();
  /** Tokens replaced by a refresh, until they expire at the token endpoint's word. */
  private readonly retired = new Map<string, CachedToken[]>();

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

  async token(
    key: string,
    credential: OAuthCredential,
    documentTokenUrl: string | undefined,
    scopes: readonly string[],
    refresh: boolean,
  ): Promise<string> {
    const cached = this.cache.get(key);
    if (!refresh && cached && cached.expiresAt > this.clock.now()) return cached.value;
    if (refresh) this.cache.delete(key);
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.fetch(credential, documentTokenUrl, scopes).finally(() => this.inflight.delete(key));
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

  private async fetch(
    credential: OAuthCredential,
    documentTokenUrl: string | undefined,
    operationScopes: readonly string[],
  ): Promise<CachedToken> {
    const tokenUrl = credential.tokenUrl ?? documentTokenUrl;
    if (!tokenUrl) throw new TokenError('no token URL: set token_url in the credential or the document');
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    const scopes = credential.scopes.length > 0 ? credential.scopes : operationScopes;
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
    const text = await readCapped(res);
    if (res.statusCode !== 200) throw new TokenError(`token endpoint answered ${res.statusCode}`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new TokenError('token endpoint answered with invalid JSON');
    }
    const value = (body as { access_token?: unknown }).access_token;
    // eslint-disable-next-line no-control-regex -- a token with control characters could split a header
    if (typeof value !== 'string' || value === '' || /[\0-\x1f\x7f]/.test(value)) {
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
