import { Agent } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ServiceCredential } from '../../../src/config/api-execution.js';
import type { SecuritySchemeInfo } from '../../../src/openapi/types.js';
import { ServiceCredentials } from '../../../src/upstream/credentials.js';
import { MIN_REFRESH_INTERVAL_MS, OAuthTokens, TokenError } from '../../../src/upstream/oauth.js';
import { json, TestUpstream } from '../../helpers/upstream.js';

// The service's own credentials, chosen per operation from its OpenAPI `security` requirement.
// OAuth2 client credentials (RFC 6749 §4.4) run against a real token endpoint on 127.0.0.1.

const SCHEMES: Record<string, SecuritySchemeInfo> = {
  headerKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
  queryKey: { type: 'apiKey', in: 'query', name: 'api_key' },
  cookieKey: { type: 'apiKey', in: 'cookie', name: 'session' },
  basicAuth: { type: 'http', scheme: 'basic' },
  bearerAuth: { type: 'http', scheme: 'bearer' },
};

const secret = (value: string): ServiceCredential => ({ kind: 'secret', value });

interface MutableClock {
  t: number;
  now(): number;
}

function clockAt(t: number): MutableClock {
  const clock = {
    t,
    now: () => clock.t,
  };
  return clock;
}

const dispatcher = new Agent({ connections: 4 });
afterAll(() => dispatcher.close());

function credentials(
  configured: Record<string, ServiceCredential>,
  schemes: Record<string, SecuritySchemeInfo> = SCHEMES,
  oauth = new OAuthTokens(clockAt(0), dispatcher),
): ServiceCredentials {
  return new ServiceCredentials('shop', schemes, configured, oauth);
}

describe('ServiceCredentials.apply: choosing an alternative', () => {
  it('uses the first alternative whose schemes all have a credential', async () => {
    const creds = credentials({ queryKey: secret('q-secret'), bearerAuth: secret('b-token') });
    const applied = await creds.apply([{ headerKey: [] }, { queryKey: [] }, { bearerAuth: [] }]);
    expect(applied).toEqual({ headers: {}, query: [['api_key', 'q-secret']], cookies: [] });
  });

  it('requires every scheme of an alternative (AND) and applies them all', async () => {
    const creds = credentials({ headerKey: secret('h-secret'), queryKey: secret('q-secret') });
    expect(await creds.apply([{ headerKey: [], cookieKey: [] }, { queryKey: [] }])).toEqual({
      headers: {},
      query: [['api_key', 'q-secret']],
      cookies: [],
    });
    expect(await creds.apply([{ headerKey: [], queryKey: [] }])).toEqual({
      headers: { 'x-api-key': 'h-secret' },
      query: [['api_key', 'q-secret']],
      cookies: [],
    });
  });

  it('prefers a satisfiable alternative over an earlier empty one ({} = auth optional)', async () => {
    const creds = credentials({ bearerAuth: secret('b-token') });
    const applied = await creds.apply([{}, { bearerAuth: [] }]);
    expect(applied.headers).toEqual({ authorization: 'Bearer b-token' });
  });

  it('sends nothing when only the empty alternative can be satisfied', async () => {
    const creds = credentials({ bearerAuth: secret('b-token') });
    expect(await creds.apply([{ headerKey: [] }, {}])).toEqual({ headers: {}, query: [], cookies: [] });
  });

  it('sends nothing for an operation without security, or when no credential fits', async () => {
    const creds = credentials({ bearerAuth: secret('b-token') });
    expect(await creds.apply([])).toEqual({ headers: {}, query: [], cookies: [] });
    expect(await creds.apply([{ headerKey: [] }])).toEqual({ headers: {}, query: [], cookies: [] });
  });

  it('ignores a credential for a scheme the document does not define', async () => {
    const creds = credentials({ ghost: secret('g') });
    expect(await creds.apply([{ ghost: [] }])).toEqual({ headers: {}, query: [], cookies: [] });
  });
});

describe('ServiceCredentials.apply: without OAuth, one result per requirement list', () => {
  it('answers at once (no promise), the same frozen result for every call of an operation', () => {
    const creds = credentials({ headerKey: secret('h-secret') });
    const security = [{ headerKey: [] }];
    const first = creds.apply(security);
    expect(first).not.toBeInstanceOf(Promise);
    expect(creds.apply(security)).toBe(first);
    expect(first).toEqual({ headers: { 'x-api-key': 'h-secret' }, query: [], cookies: [] });
    expect(Object.isFrozen(first) && Object.isFrozen((first as { headers: object }).headers)).toBe(true);
  });

  it('is per instance: a reload builds new credentials and gets the new secret', () => {
    const security = [{ headerKey: [] }];
    const before = credentials({ headerKey: secret('old') }).apply(security);
    const after = credentials({ headerKey: secret('new') }).apply(security);
    expect(
      [before, after].map((a) => (a as { headers: Record<string, string> }).headers['x-api-key']),
    ).toEqual(['old', 'new']);
  });
});

describe('ServiceCredentials.apply: placement', () => {
  it('puts an apiKey in a header (lower-cased name), the query or a cookie', async () => {
    const creds = credentials({
      headerKey: secret('h-1'),
      queryKey: secret('q-2'),
      cookieKey: secret('c-3'),
    });
    expect(await creds.apply([{ headerKey: [], queryKey: [], cookieKey: [] }])).toEqual({
      headers: { 'x-api-key': 'h-1' },
      query: [['api_key', 'q-2']],
      cookies: [['session', 'c-3']],
    });
  });

  it('builds http basic from username and password', async () => {
    const creds = credentials({ basicAuth: { kind: 'basic', username: 'svc', password: 'pä:ss' } });
    const { headers } = await creds.apply([{ basicAuth: [] }]);
    expect(headers.authorization).toBe(`Basic ${Buffer.from('svc:pä:ss', 'utf8').toString('base64')}`);
  });

  it('builds http basic from a single `user:password` secret', async () => {
    const creds = credentials({ basicAuth: secret('svc:hunter2') });
    const { headers } = await creds.apply([{ basicAuth: [] }]);
    expect(headers.authorization).toBe('Basic c3ZjOmh1bnRlcjI=');
  });

  it('sends a secret for http bearer as a bearer token', async () => {
    const creds = credentials({ bearerAuth: secret('tok-123') });
    expect(await creds.apply([{ bearerAuth: [] }])).toEqual({
      headers: { authorization: 'Bearer tok-123' },
      query: [],
      cookies: [],
    });
  });
});

describe('ServiceCredentials.check', () => {
  it('reports schemes that required operations lack, sorted, once each', () => {
    const creds = credentials({ queryKey: secret('q') });
    const result = creds.check([
      [{ headerKey: [] }],
      [{ queryKey: [] }],
      [{ bearerAuth: [], headerKey: [] }],
      [{ cookieKey: [] }, { queryKey: [] }],
    ]);
    expect(result).toEqual({ missing: ['bearerAuth', 'headerKey'], unknown: [] });
  });

  it('does not report operations without security or with only the empty alternative', () => {
    expect(credentials({}).check([[], [{}]])).toEqual({ missing: [], unknown: [] });
  });

  it('reports configured credentials for schemes the document does not define', () => {
    const creds = credentials({ headerKey: secret('h'), ghost: secret('g'), typo: secret('t') });
    expect(creds.check([[{ headerKey: [] }]])).toEqual({ missing: [], unknown: ['ghost', 'typo'] });
  });
});

describe('ServiceCredentials.conflicts', () => {
  const more: Record<string, SecuritySchemeInfo> = {
    ...SCHEMES,
    otherHeaderKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    authHeaderKey: { type: 'apiKey', in: 'header', name: 'Authorization' },
    otherQueryKey: { type: 'apiKey', in: 'query', name: 'api_key' },
    oauth: { type: 'oauth2', tokenUrl: 'http://127.0.0.1:1/token' },
  };
  const all = credentials(
    {
      headerKey: secret('h'),
      otherHeaderKey: secret('h2'),
      authHeaderKey: secret('a'),
      queryKey: secret('q'),
      otherQueryKey: secret('q2'),
      cookieKey: secret('c'),
      basicAuth: { kind: 'basic', username: 'u', password: 'p' },
      bearerAuth: secret('b'),
      oauth: { kind: 'oauth2', clientId: 'id', clientSecret: 's', scopes: [] },
    },
    more,
  );

  it('reports two schemes of one alternative that both need the Authorization header', () => {
    expect(all.conflicts([[{ basicAuth: [], oauth: [] }]])).toEqual([
      'header authorization: basicAuth, oauth',
    ]);
    expect(all.conflicts([[{ bearerAuth: [], authHeaderKey: [] }]])).toEqual([
      'header authorization: authHeaderKey, bearerAuth',
    ]);
  });

  it('reports one header, query or cookie name used twice, case-insensitively for headers', () => {
    expect(
      all.conflicts([[{ headerKey: [], otherHeaderKey: [] }], [{ queryKey: [], otherQueryKey: [] }]]),
    ).toEqual(['header x-api-key: headerKey, otherHeaderKey', 'query api_key: otherQueryKey, queryKey']);
  });

  it('accepts schemes that go to different places, and alternatives that are never chosen', () => {
    expect(all.conflicts([[{ headerKey: [], queryKey: [], cookieKey: [], bearerAuth: [] }]])).toEqual([]);
    // The first alternative is satisfied, so the conflicting second one is never used.
    expect(all.conflicts([[{ headerKey: [] }, { basicAuth: [], bearerAuth: [] }]])).toEqual([]);
    // Not every scheme of this one is configured: it is never chosen either.
    const partial = credentials({ basicAuth: secret('u:p') });
    expect(partial.conflicts([[{ basicAuth: [], bearerAuth: [] }]])).toEqual([]);
  });
});

describe('OAuth2 client credentials (RFC 6749 §4.4)', () => {
  const CLIENT_SECRET = 'cs-Very$ecret+/ :%é';
  let server: TestUpstream;
  let tokenUrl: string;
  let issued = 0;

  const oauthCredential = (extra: Partial<Extract<ServiceCredential, { kind: 'oauth2' }>> = {}) =>
    ({
      kind: 'oauth2',
      clientId: 'client-1',
      clientSecret: CLIENT_SECRET,
      scopes: [],
      ...extra,
    }) as const;

  beforeAll(async () => {
    server = await TestUpstream.start();
    tokenUrl = `${server.url}/token`;
  });
  afterAll(() => server.close());
  beforeEach(() => {
    server.reset();
    issued = 0;
    server.on('POST /token', (_req, res) => {
      issued++;
      json(res, 200, { access_token: `tok-${issued}`, token_type: 'Bearer', expires_in: 100 });
    });
  });

  async function tokenError(promise: Promise<unknown>): Promise<TokenError> {
    const err = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TokenError);
    const message = (err as TokenError).message;
    expect(message.includes(CLIENT_SECRET)).toBe(false);
    expect(message.includes('cs-Very')).toBe(false);
    return err as TokenError;
  }

  it('fetches a token with client_secret_basic and applies it as a bearer token', async () => {
    const schemes = { oauth: { type: 'oauth2', tokenUrl } };
    const creds = credentials({ oauth: oauthCredential() }, schemes, new OAuthTokens(clockAt(0), dispatcher));
    expect(await creds.apply([{ oauth: ['read', 'write'] }])).toEqual({
      headers: { authorization: 'Bearer tok-1' },
      query: [],
      cookies: [],
      oauthScheme: 'oauth',
    });
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0]!;
    expect(req.headers['content-type']).toBe('application/x-www-form-urlencoded');
    const form = new URLSearchParams(req.body.toString('utf8'));
    expect(Object.fromEntries(form)).toEqual({ grant_type: 'client_credentials', scope: 'read write' });
  });

  it('sends the configured scopes and audience instead of the operation scopes', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    await tokens.token(
      'k',
      oauthCredential({ tokenUrl, scopes: ['admin'], audience: 'https://api' }),
      undefined,
      ['read'],
      false,
    );
    const form = new URLSearchParams(server.requests[0]!.body.toString('utf8'));
    expect(Object.fromEntries(form)).toEqual({
      grant_type: 'client_credentials',
      scope: 'admin',
      audience: 'https://api',
    });
  });

  it('keeps one token per set of scopes: an operation is never sent a token asked for other scopes', async () => {
    server.reset();
    server.on('POST /token', (req, res) => {
      const scope = new URLSearchParams(req.body.toString('utf8')).get('scope');
      json(res, 200, { access_token: `tok-for-${scope}`, token_type: 'Bearer', expires_in: 100 });
    });
    const schemes = { oauth: { type: 'oauth2', tokenUrl } };
    const creds = credentials({ oauth: oauthCredential() }, schemes, new OAuthTokens(clockAt(0), dispatcher));
    expect((await creds.apply([{ oauth: ['a.read'] }])).headers.authorization).toBe('Bearer tok-for-a.read');
    expect((await creds.apply([{ oauth: ['b.read'] }])).headers.authorization).toBe('Bearer tok-for-b.read');
    // The order scopes are listed in does not make another token.
    expect((await creds.apply([{ oauth: ['y', 'x'] }])).headers.authorization).toBe('Bearer tok-for-y x');
    expect((await creds.apply([{ oauth: ['x', 'y'] }])).headers.authorization).toBe('Bearer tok-for-y x');
    expect((await creds.apply([{ oauth: ['a.read'] }])).headers.authorization).toBe('Bearer tok-for-a.read');
    expect(server.requests).toHaveLength(3);
  });

  it('fetches a new token when the client, secret, token URL or audience changes (a reload rotating the client)', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const variants = [
      oauthCredential({ tokenUrl }),
      oauthCredential({ tokenUrl, clientId: 'client-2' }),
      oauthCredential({ tokenUrl, clientId: 'client-2', clientSecret: 'another-secret-123456' }),
      oauthCredential({
        tokenUrl: `${tokenUrl}?v=2`,
        clientId: 'client-2',
        clientSecret: 'another-secret-123456',
      }),
      oauthCredential({ tokenUrl, audience: 'https://api' }),
    ];
    const got = [];
    for (const credential of variants)
      got.push(await tokens.token('shop/oauth', credential, undefined, [], false));
    expect(got).toEqual(['tok-1', 'tok-2', 'tok-3', 'tok-4', 'tok-5']);
    // The same credential again is served from the cache.
    expect(await tokens.token('shop/oauth', oauthCredential({ tokenUrl }), undefined, [], false)).toBe(
      'tok-1',
    );
  });

  it('form-encodes client id and secret before Basic encoding (RFC 6749 §2.3.1)', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const clientId = 'team:a+b c';
    await tokens.token('k', oauthCredential({ tokenUrl, clientId }), undefined, [], false);
    const header = server.requests[0]!.headers.authorization ?? '';
    expect(header.startsWith('Basic ')).toBe(true);
    const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
    // The one unencoded colon separates id from secret; the id's own colon is encoded.
    expect(decoded.split(':')).toHaveLength(2);
    const [id, pass] = decoded.split(':') as [string, string];
    expect(id).toBe('team%3Aa%2Bb%20c');
    const formDecode = (s: string): string => decodeURIComponent(s.replace(/\+/g, ' '));
    expect(formDecode(id)).toBe(clientId);
    expect(formDecode(pass)).toBe(CLIENT_SECRET);
  });

  it('caches the token until 30 s before expires_in runs out', async () => {
    const clock = clockAt(1_000_000);
    const tokens = new OAuthTokens(clock, dispatcher);
    const fetch = () => tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false);
    expect(await fetch()).toBe('tok-1');
    clock.t += 69_999; // expires_in 100 s − 30 s margin = 70 s
    expect(await fetch()).toBe('tok-1');
    expect(server.requests).toHaveLength(1);
    clock.t += 1;
    expect(await fetch()).toBe('tok-2');
    expect(server.requests).toHaveLength(2);
  });

  it('keeps a separate token per key', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    expect(await tokens.token('a', oauthCredential({ tokenUrl }), undefined, [], false)).toBe('tok-1');
    expect(await tokens.token('b', oauthCredential({ tokenUrl }), undefined, [], false)).toBe('tok-2');
    expect(await tokens.token('a', oauthCredential({ tokenUrl }), undefined, [], false)).toBe('tok-1');
    expect([...tokens.currentTokens()].sort()).toEqual(['tok-1', 'tok-2']);
  });

  it('lets concurrent callers share one fetch', async () => {
    server.on('POST /token', async (_req, res) => {
      issued++;
      await new Promise((r) => setTimeout(r, 50));
      json(res, 200, { access_token: `tok-${issued}`, expires_in: 3600 });
    });
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const results = await Promise.all(
      Array.from({ length: 5 }, () => tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false)),
    );
    expect(results).toEqual(['tok-1', 'tok-1', 'tok-1', 'tok-1', 'tok-1']);
    expect(server.requests).toHaveLength(1);
  });

  it('fetches a new token when asked to refresh (after an upstream 401)', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const creds = credentials({ oauth: oauthCredential() }, { oauth: { type: 'oauth2', tokenUrl } }, tokens);
    expect((await creds.apply([{ oauth: [] }])).headers.authorization).toBe('Bearer tok-1');
    expect((await creds.apply([{ oauth: [] }])).headers.authorization).toBe('Bearer tok-1');
    expect((await creds.apply([{ oauth: [] }], true)).headers.authorization).toBe('Bearer tok-2');
    expect((await creds.apply([{ oauth: [] }])).headers.authorization).toBe('Bearer tok-2');
    expect(server.requests).toHaveLength(2);
  });

  it('refreshes on a 401 at most once per 30 s, and keeps replaced tokens for redaction until they expire', async () => {
    const clock = clockAt(0);
    const tokens = new OAuthTokens(clock, dispatcher);
    const get = (refresh: boolean): Promise<string> =>
      tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], refresh);
    expect(await get(false)).toBe('tok-1');
    expect(await get(true)).toBe('tok-2');
    // Another 401 at once keeps the token: agents cannot drive the token endpoint.
    expect(await get(true)).toBe('tok-2');
    clock.t = MIN_REFRESH_INTERVAL_MS - 1;
    expect(await get(true)).toBe('tok-2');
    clock.t = MIN_REFRESH_INTERVAL_MS;
    expect(await get(true)).toBe('tok-3');
    expect(server.requests).toHaveLength(3);
    expect([...tokens.currentTokens()].sort()).toEqual(['tok-1', 'tok-2', 'tok-3']);
    // expires_in 100 s: retired tokens go once the endpoint's expiry has passed.
    clock.t = MIN_REFRESH_INTERVAL_MS + 100_001;
    expect(await get(false)).toBe('tok-4');
    expect(tokens.currentTokens()).toEqual(['tok-4']);
  });

  it('keeps at most 64 replaced tokens per scheme: 32 minutes of forced refreshes', async () => {
    server.reset();
    let n = 0;
    server.on('POST /token', (_req, res) =>
      json(res, 200, { access_token: `tok-${++n}`, expires_in: 36_000 }),
    );
    const clock = clockAt(0);
    const tokens = new OAuthTokens(clock, dispatcher);
    await tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false);
    for (let i = 0; i < 65; i++) {
      clock.t += MIN_REFRESH_INTERVAL_MS;
      await tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], true);
    }
    const held = tokens.currentTokens();
    expect(held).toHaveLength(65);
    expect(held).not.toContain('tok-1');
    expect(held).toContain('tok-2');
    expect(held).toContain('tok-66');
  });

  it('fails on a non-200 answer without echoing the answer or the secret', async () => {
    server.on('POST /token', (_req, res) => json(res, 401, { error: 'invalid_client', got: CLIENT_SECRET }));
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const err = await tokenError(tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false));
    expect(err.message).toContain('401');
    expect(tokens.currentTokens()).toEqual([]);
  });

  it('fails on an answer that is not JSON', async () => {
    server.on('POST /token', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`not json ${CLIENT_SECRET}`);
    });
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const err = await tokenError(tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false));
    expect(err.message).toMatch(/invalid JSON/);
  });

  it('fails on an answer without a usable access_token', async () => {
    const answers = [
      { token_type: 'Bearer' },
      { access_token: '' },
      { access_token: 42 },
      { access_token: 'a\r\nb' },
    ];
    for (const answer of answers) {
      server.on('POST /token', (_req, res) => json(res, 200, answer));
      const tokens = new OAuthTokens(clockAt(0), dispatcher);
      const err = await tokenError(tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false));
      expect(err.message).toMatch(/access_token/);
    }
  });

  it('fails on an answer over 64 KiB', async () => {
    server.on('POST /token', (_req, res) =>
      json(res, 200, { access_token: 'tok', padding: 'x'.repeat(70 * 1024) }),
    );
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const err = await tokenError(tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false));
    expect(err.message).toMatch(/too large/);
  });

  it('fails when the token endpoint is unreachable', async () => {
    const closed = await TestUpstream.start();
    const url = `${closed.url}/token`;
    await closed.close();
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const err = await tokenError(tokens.token('k', oauthCredential({ tokenUrl: url }), undefined, [], false));
    expect(err.message).toMatch(/unreachable/);
  });

  it('fails without a token URL in the credential or the document', async () => {
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    const err = await tokenError(tokens.token('k', oauthCredential(), undefined, [], false));
    expect(err.message).toMatch(/token URL/);
    expect(server.requests).toHaveLength(0);
  });

  it('retries after a failed fetch instead of caching the failure', async () => {
    server.on('POST /token', (_req, res) => json(res, 503, {}));
    const tokens = new OAuthTokens(clockAt(0), dispatcher);
    await tokenError(tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false));
    server.on('POST /token', (_req, res) => json(res, 200, { access_token: 'later' }));
    expect(await tokens.token('k', oauthCredential({ tokenUrl }), undefined, [], false)).toBe('later');
    expect(server.requests).toHaveLength(2);
  });
});
