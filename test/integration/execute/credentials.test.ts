/**
 * The service's own credentials (issue 4, §5.11 execution with the service's authority): chosen
 * per operation by its OpenAPI `security`, read from env, files or the config, never shown to the
 * agent (responses, error bodies, activity records, logs), and bound to the API's origin
 * (no redirects followed, server variables fixed by config).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { writeTempSpec } from '../../helpers/proxy.js';
import { json, TestUpstream, type RecordedRequest } from '../../helpers/upstream.js';

const HEADER_KEY = 'svc-header-key-0123456789';
const QUERY_KEY = 'svc-query-key-abcdef012345';
const SESSION = 'svc-session-cookie-98765432';
const BEARER = 'svc-bearer-token-from-file-5555';
const BASIC_USER = 'svc-user';
const BASIC_PASS = 'svc-basic-password-ABCDEFGH';
const CLIENT_ID = 'svc-client';
const CLIENT_SECRET = 'svc-client-secret-XYZ-123456';
const SINGLE_BASIC = 'single-user:single-pass-7777777';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

function secretFile(value: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-secret-')), 'secret.txt');
  writeFileSync(file, `${value}\n`);
  return file;
}

/** Every credential kind of the fixture, one source of each sort (env, file, `value`, inline). */
function allCredentials(): string {
  return [
    '    credentials:',
    '      apiKeyHeader: {env: GW_HEADER_KEY}',
    `      apiKeyQuery: ${QUERY_KEY}`,
    `      sessionCookie: {value: ${SESSION}}`,
    `      bearerAuth: {file: ${JSON.stringify(secretFile(BEARER))}}`,
    `      basicAuth: {username: ${BASIC_USER}, password: {env: GW_BASIC_PASS}}`,
    '      oauthClient:',
    `        client_id: ${CLIENT_ID}`,
    '        client_secret: {env: GW_CLIENT_SECRET}',
    '        token_url: {{upstream}}/oauth/token',
  ].join('\n');
}

const ENV = { GW_HEADER_KEY: HEADER_KEY, GW_BASIC_PASS: BASIC_PASS, GW_CLIENT_SECRET: CLIENT_SECRET };

/** Answers the client credentials grant with `oauth-access-token-1`, `-2`, … */
function tokenEndpoint(upstream: TestUpstream, expiresIn = 3600): { tokens: () => RecordedRequest[] } {
  let issued = 0;
  upstream.on('POST /oauth/token', (_req, res) => {
    issued += 1;
    json(res, 200, {
      access_token: `oauth-access-token-${issued}`,
      token_type: 'Bearer',
      expires_in: expiresIn,
    });
  });
  return { tokens: () => upstream.received('/oauth/token') };
}

const ALL_CAPABILITIES = [
  'get_item',
  'search_by_key',
  'put_note',
  'create_item',
  'submit_form',
  'upload_file',
  'ping',
];

describe('service credentials chosen by the operation security requirement (§5.11)', () => {
  let gw: Gateway;
  let agent: Awaited<ReturnType<TestProtocol['activeAgent']>>;
  beforeAll(async () => {
    gw = await startGateway({ api: allCredentials(), env: ENV });
    agent = await gw.p.activeAgent(ALL_CAPABILITIES);
    tokenEndpoint(gw.upstream);
  });
  afterAll(() => gw.close());
  afterEach(() => {
    gw.upstream.requests.length = 0;
  });

  const noOtherCredential = (r: RecordedRequest | undefined, except: string[]): void => {
    const present = {
      'x-api-key': r?.headers['x-api-key'],
      authorization: r?.headers.authorization,
      cookie: r?.headers.cookie,
      api_key: r?.query.get('api_key') ?? undefined,
    };
    for (const [name, value] of Object.entries(present)) {
      if (!except.includes(name)) expect(value, name).toBeUndefined();
    }
  };

  it('apiKey in a header (from an env variable): get_item sends X-Api-Key', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'i1' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items/i1');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers['x-api-key']).toBe(HEADER_KEY);
    noOtherCredential(seen[0], ['x-api-key']);
  });

  it('apiKey in the query (inline): search_by_key sends api_key', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'search_by_key', { term: 'books' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/search');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.query.get('api_key')).toBe(QUERY_KEY);
    expect(seen[0]?.query.get('term')).toBe('books');
    noOtherCredential(seen[0], ['api_key']);
  });

  it('apiKey in a cookie ({value}): put_note sends the session cookie', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'put_note', { noteId: 'n1', body: 'hello' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/notes/n1');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.method).toBe('PUT');
    expect(seen[0]?.headers.cookie).toBe(`session=${SESSION}`);
    noOtherCredential(seen[0], ['cookie']);
  });

  it('http bearer (from a file, trailing newline trimmed): create_item sends Authorization: Bearer', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'create_item', { name: 'pen', price: 2 });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${BEARER}`);
    noOtherCredential(seen[0], ['authorization']);
  });

  it('http basic with {username, password}: submit_form sends Authorization: Basic', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'submit_form', { title: 't' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/forms');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers.authorization).toBe(`Basic ${b64(`${BASIC_USER}:${BASIC_PASS}`)}`);
    noOtherCredential(seen[0], ['authorization']);
  });

  it('oauth2 client credentials: upload_file sends the fetched token as Bearer', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('bytes') });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/uploads');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers.authorization).toMatch(/^Bearer oauth-access-token-\d+$/);
    noOtherCredential(seen[0], ['authorization']);
  });

  it('an operation without security (ping, `security: []`) gets no credential at all', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping');
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/public/ping');
    expect(seen).toHaveLength(1);
    noOtherCredential(seen[0], []);
    expect(gw.upstream.received('/oauth/token')).toHaveLength(0);
  });
});

describe('http basic with a single secret', () => {
  it('"user:pass" is sent as Basic base64(user:pass)', async () => {
    const gw = await startGateway({
      api: `    credentials:\n      basicAuth: ${JSON.stringify(SINGLE_BASIC)}`,
    });
    try {
      const { agent, agentId } = await gw.p.activeAgent(['submit_form']);
      const reply = await gw.p.execute(agent, agentId, 'submit_form', { title: 't' });
      expect(reply.status).toBe(200);
      const seen = gw.upstream.received('/v1/forms');
      expect(seen).toHaveLength(1);
      expect(seen[0]?.headers.authorization).toBe(`Basic ${b64(SINGLE_BASIC)}`);
    } finally {
      await gw.close();
    }
  });
});

describe('oauth2 client credentials (RFC 6749 §4.4)', () => {
  let gw: Gateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  async function start(clock?: TestClock): Promise<{ gw: Gateway; agent: any }> {
    gw = await startGateway({
      api: [
        '    credentials:',
        '      oauthClient:',
        `        client_id: ${CLIENT_ID}`,
        '        client_secret: {env: GW_CLIENT_SECRET}',
        '        token_url: {{upstream}}/oauth/token',
      ].join('\n'),
      env: ENV,
      ...(clock ? { clock } : {}),
    });
    const agent = await gw.p.activeAgent(['upload_file']);
    return { gw, agent };
  }

  it('fetches a token with grant_type=client_credentials, HTTP Basic client auth and the scope', async () => {
    const { gw, agent } = await start();
    const { tokens } = tokenEndpoint(gw.upstream);
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(reply.status).toBe(200);
    expect(tokens()).toHaveLength(1);
    const t = tokens()[0] as RecordedRequest;
    expect(t.method).toBe('POST');
    expect(t.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(t.headers.authorization).toBe(`Basic ${b64(`${CLIENT_ID}:${CLIENT_SECRET}`)}`);
    const form = new URLSearchParams(t.body.toString('utf8'));
    expect(form.get('grant_type')).toBe('client_credentials');
    expect(form.get('scope')).toBe('files.write');
    // The client secret goes in the Authorization header only, not in the form too.
    expect(form.has('client_secret')).toBe(false);
    expect(t.body.toString('utf8')).not.toContain(CLIENT_SECRET);
    const uploads = gw.upstream.received('/v1/uploads');
    expect(uploads).toHaveLength(1);
    expect(uploads[0]?.headers.authorization).toBe('Bearer oauth-access-token-1');
  });

  it('caches the token across executions until it expires', async () => {
    const clock = new TestClock();
    const { gw, agent } = await start(clock);
    const { tokens } = tokenEndpoint(gw.upstream, 120);
    for (let i = 0; i < 3; i++) {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64(`f${i}`) });
      expect(reply.status).toBe(200);
    }
    expect(tokens()).toHaveLength(1);
    expect(gw.upstream.received('/v1/uploads').map((r) => r.headers.authorization)).toEqual([
      'Bearer oauth-access-token-1',
      'Bearer oauth-access-token-1',
      'Bearer oauth-access-token-1',
    ]);
    // Past expires_in (120 s) the next execution fetches a new token.
    clock.advance(121_000);
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('later') });
    expect(reply.status).toBe(200);
    expect(tokens()).toHaveLength(2);
    expect(gw.upstream.received('/v1/uploads').at(-1)?.headers.authorization).toBe(
      'Bearer oauth-access-token-2',
    );
  });

  it('refreshes the token once when the API answers 401 to the cached one', async () => {
    const { gw, agent } = await start();
    const { tokens } = tokenEndpoint(gw.upstream);
    gw.upstream.on('POST /v1/uploads', (req, res) => {
      if (req.headers.authorization === 'Bearer oauth-access-token-1')
        json(res, 401, { error: 'token revoked' });
      else json(res, 200, { stored: true });
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: { stored: true } });
    expect(tokens()).toHaveLength(2);
    expect(gw.upstream.received('/v1/uploads').map((r) => r.headers.authorization)).toEqual([
      'Bearer oauth-access-token-1',
      'Bearer oauth-access-token-2',
    ]);
    // The new token is cached: the next execution needs no token request.
    expect((await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('y') })).status).toBe(
      200,
    );
    expect(tokens()).toHaveLength(2);
  });

  it('refreshes at most once: a second 401 reaches the agent, with the echoed token scrubbed', async () => {
    const { gw, agent } = await start();
    const { tokens } = tokenEndpoint(gw.upstream);
    gw.upstream.on('POST /v1/uploads', (req, res) => {
      json(res, 401, { error: 'invalid_token', got: req.headers.authorization });
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(reply.status).toBe(401);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(401);
    expect(gw.upstream.received('/v1/uploads')).toHaveLength(2);
    expect(tokens()).toHaveLength(2);
    const text = JSON.stringify(reply.body);
    expect(text).not.toContain('oauth-access-token');
    expect(reply.body.upstream_body.got).toBe('Bearer [redacted]');
  });

  it('a token endpoint that breaks off its answer is 502 upstream_unavailable too, not a 500', async () => {
    const { gw, agent } = await start();
    gw.upstream.on('POST /oauth/token', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '500' });
      res.write('{"access_token":"abc');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect({ status: reply.status, error: reply.body.error }).toEqual({
      status: 502,
      error: 'upstream_unavailable',
    });
    expect(gw.upstream.received('/v1/uploads')).toHaveLength(0);
  });

  it('401s refresh the token at most once per 30 s: an agent cannot drive the token endpoint', async () => {
    const { gw, agent } = await start();
    const { tokens } = tokenEndpoint(gw.upstream);
    gw.upstream.on('POST /v1/uploads', (_req, res) => json(res, 401, { error: 'invalid_token' }));
    for (let i = 0; i < 10; i++) {
      expect(
        (await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64(`x${i}`) })).status,
      ).toBe(401);
    }
    expect(tokens()).toHaveLength(2);
    gw.p.clock.advance(30_000);
    await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('later') });
    expect(tokens()).toHaveLength(3);
  });

  it('a failing token endpoint is 502 upstream_unavailable and leaks no secret', async () => {
    const { gw, agent } = await start();
    gw.upstream.on('POST /oauth/token', (req, res) => {
      // A misbehaving authorization server echoing the client's credentials back.
      json(res, 500, { error: 'server_error', auth: req.headers.authorization, secret: CLIENT_SECRET });
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_unavailable');
    const text = JSON.stringify(reply.body);
    expect(text).not.toContain(CLIENT_SECRET);
    expect(text).not.toContain(b64(`${CLIENT_ID}:${CLIENT_SECRET}`));
    expect(gw.upstream.received('/oauth/token')).toHaveLength(1);
    expect(gw.upstream.received('/v1/uploads')).toHaveLength(0);
  });

  it('a token endpoint refusing the client (400 invalid_client) is 502 upstream_unavailable', async () => {
    const { gw, agent } = await start();
    gw.upstream.on('POST /oauth/token', (_req, res) => json(res, 400, { error: 'invalid_client' }));
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_unavailable');
    expect(gw.upstream.received('/v1/uploads')).toHaveLength(0);
  });
});

describe('credential configuration is checked at start-up', () => {
  it('a missing environment variable stops start-up, naming the key path', async () => {
    const started = startGateway({ api: '    credentials:\n      apiKeyHeader: {env: GW_NOT_SET_ANYWHERE}' });
    await expect(started).rejects.toThrow(
      /apis\[0\]\.credentials\.apiKeyHeader: environment variable GW_NOT_SET_ANYWHERE is not set/,
    );
  });

  it('a missing secret file stops start-up, naming the key path', async () => {
    const missing = join(tmpdir(), 'aap-no-such-dir', 'secret.txt');
    const started = startGateway({
      api: `    credentials:\n      basicAuth: {username: u, password: {file: ${JSON.stringify(missing)}}}`,
    });
    await expect(started).rejects.toThrow(
      /apis\[0\]\.credentials\.basicAuth\.password: .*not found or not readable/,
    );
  });

  it('credentials for a scheme the document does not define stop start-up', async () => {
    const started = startGateway({ api: '    credentials:\n      noSuchScheme: some-secret-value-1234' });
    await expect(started).rejects.toThrow(/credentials\.noSuchScheme names no security scheme/);
  });

  it('two configured schemes that an operation needs together in Authorization stop start-up', async () => {
    const spec = writeTempSpec({
      openapi: '3.0.3',
      info: { title: 'Two in one header', version: '1' },
      paths: {
        '/both': {
          get: {
            operationId: 'getBoth',
            security: [{ basic: [], bearer: [] }],
            responses: { '200': { description: 'ok' } },
          },
        },
      },
      components: {
        securitySchemes: {
          basic: { type: 'http', scheme: 'basic' },
          bearer: { type: 'http', scheme: 'bearer' },
        },
      },
    });
    const config = join(mkdtempSync(join(tmpdir(), 'aap-conflict-')), 'proxy.yaml');
    writeFileSync(
      config,
      [
        'apis:',
        `  - spec: ${JSON.stringify(spec)}`,
        '    upstream: http://127.0.0.1:9/v1',
        '    credentials:',
        '      basic: {username: svc, password: conflict-password-1234}',
        '      bearer: conflict-bearer-token-5678',
      ].join('\n'),
    );
    const started = startProtocol({ overrides: { config } });
    await expect(started).rejects.toThrow(
      /operations require security schemes that are sent in one place \(header authorization: basic, bearer\)/,
    );
    await expect(started).rejects.not.toThrow(/conflict-password|conflict-bearer/);
  });

  it('a secret with CR/LF (header injection) stops start-up, without echoing the value', async () => {
    const value = 'key-part-one\r\nX-Injected: yes';
    const started = startGateway({
      api: '    credentials:\n      apiKeyHeader: {env: GW_CRLF}',
      env: { GW_CRLF: value },
    });
    await expect(started).rejects.toThrow(
      /apis\[0\]\.credentials\.apiKeyHeader: the value contains control characters/,
    );
    await expect(started).rejects.not.toThrow(/key-part-one|X-Injected/);
  });

  it('a line feed in an inline credential (YAML escape) also stops start-up', async () => {
    const started = startGateway({ api: '    credentials:\n      bearerAuth: "token-line-one\\nline-two"' });
    await expect(started).rejects.toThrow(
      /apis\[0\]\.credentials\.bearerAuth: the value contains control characters/,
    );
  });
});

describe('agents never see the service credentials (§5.11, §11)', () => {
  let gw: Gateway;
  let agent: Awaited<ReturnType<TestProtocol['activeAgent']>>;
  const logLines: string[] = [];
  const SECRETS = [
    HEADER_KEY,
    QUERY_KEY,
    SESSION,
    BEARER,
    BASIC_PASS,
    b64(`${BASIC_USER}:${BASIC_PASS}`),
    CLIENT_SECRET,
    b64(`${CLIENT_ID}:${CLIENT_SECRET}`),
    'oauth-access-token',
  ];
  beforeAll(async () => {
    gw = await startGateway({
      api: allCredentials(),
      env: ENV,
      logger: createLogger('debug', (line) => logLines.push(line)),
    });
    agent = await gw.p.activeAgent(ALL_CAPABILITIES);
    tokenEndpoint(gw.upstream);
  });
  afterAll(() => gw.close());

  const expectNoSecret = (text: string, where: string): void => {
    for (const secret of SECRETS) expect(text, `${where} contains ${secret}`).not.toContain(secret);
  };
  const replyText = (reply: { status: number; headers: Headers; body: unknown }): string =>
    JSON.stringify({ status: reply.status, headers: [...reply.headers.entries()], body: reply.body });

  it('not in responses, activity records or logs, for every credential kind', async () => {
    // The upstream answers without echoing anything, but adds a response header of its own.
    const quiet = (_req: RecordedRequest, res: import('node:http').ServerResponse): void =>
      json(res, 200, { ok: true }, { 'x-upstream-debug': HEADER_KEY, 'set-cookie': `session=${SESSION}` });
    for (const route of [
      'GET /v1/items/i1',
      'GET /v1/search',
      'PUT /v1/notes/n1',
      'POST /v1/items',
      'POST /v1/forms',
      'POST /v1/uploads',
      'GET /v1/public/ping',
    ]) {
      gw.upstream.on(route, quiet);
    }
    const calls: [string, Record<string, unknown>][] = [
      ['get_item', { itemId: 'i1' }],
      ['search_by_key', { term: 'x' }],
      ['put_note', { noteId: 'n1', body: 'note' }],
      ['create_item', { name: 'pen', price: 1 }],
      ['submit_form', { title: 't' }],
      ['upload_file', { file: b64('f') }],
      ['ping', {}],
    ];
    for (const [capability, args] of calls) {
      const reply = await gw.p.execute(agent.agent, agent.agentId, capability, args);
      expect(reply.status, capability).toBe(200);
      expect(reply.body).toEqual({ data: { ok: true } });
      expect(reply.headers.get('set-cookie')).toBeNull();
      expect(reply.headers.get('x-upstream-debug')).toBeNull();
      expectNoSecret(replyText(reply), `${capability} response`);
    }
    // Every credential was really used (so the absence above means something).
    expect(gw.upstream.received('/v1/items/i1').at(-1)?.headers['x-api-key']).toBe(HEADER_KEY);
    expect(gw.upstream.received('/oauth/token')).toHaveLength(1);

    await gw.p.proxy.flushActivity();
    const activity = await gw.p.admin('GET', `/admin/activity?agent_id=${agent.agentId}`);
    expect(activity.status).toBe(200);
    expect(activity.body.activity.length).toBeGreaterThanOrEqual(calls.length);
    expectNoSecret(JSON.stringify(activity.body), 'activity');

    expect(logLines.length).toBeGreaterThan(0);
    expectNoSecret(logLines.join('\n'), 'log');
  });

  it('scrubbed from 4xx error bodies that echo a credential back', async () => {
    gw.upstream.on('GET /v1/items/echo', (req, res) => {
      json(res, 403, { error: 'forbidden', key: req.headers['x-api-key'], note: `you sent ${HEADER_KEY}` });
    });
    gw.upstream.on('POST /v1/forms', (req, res) => {
      json(res, 400, { error: 'bad form', authorization: req.headers.authorization });
    });
    gw.upstream.on('GET /v1/search', (req, res) => {
      res.writeHead(422, { 'content-type': 'text/plain' });
      res.end(`bad request to ${req.url}`);
    });
    gw.upstream.on('PUT /v1/notes/echo', (req, res) => json(res, 409, { cookie: req.headers.cookie }));
    gw.upstream.on('POST /v1/items', (req, res) => json(res, 401, { got: req.headers.authorization }));

    const item = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'echo' });
    expect(item.status).toBe(403);
    expect(item.body.error).toBe('upstream_error');
    expect(item.body.upstream_status).toBe(403);
    expect(item.body.upstream_body).toEqual({
      error: 'forbidden',
      key: '[redacted]',
      note: 'you sent [redacted]',
    });

    const form = await gw.p.execute(agent.agent, agent.agentId, 'submit_form', { title: 't' });
    expect(form.status).toBe(400);
    expect(form.body.upstream_body).toEqual({ error: 'bad form', authorization: 'Basic [redacted]' });

    const search = await gw.p.execute(agent.agent, agent.agentId, 'search_by_key', { term: 'q' });
    expect(search.status).toBe(422);
    expect(search.body.upstream_body).toBe('bad request to /v1/search?term=q&api_key=[redacted]');

    const note = await gw.p.execute(agent.agent, agent.agentId, 'put_note', { noteId: 'echo', body: 'b' });
    expect(note.status).toBe(409);
    expect(note.body.upstream_body).toEqual({ cookie: 'session=[redacted]' });

    const created = await gw.p.execute(agent.agent, agent.agentId, 'create_item', { name: 'n', price: 1 });
    expect(created.status).toBe(401);
    expect(created.body.upstream_body).toEqual({ got: 'Bearer [redacted]' });

    for (const reply of [item, form, search, note, created]) expectNoSecret(replyText(reply), 'error reply');
    await gw.p.proxy.flushActivity();
    const activity = await gw.p.admin('GET', `/admin/activity?agent_id=${agent.agentId}`);
    expectNoSecret(JSON.stringify(activity.body), 'activity');
    expectNoSecret(logLines.join('\n'), 'log');
  });

  it('scrubbed from 5xx error bodies (502 upstream_error)', async () => {
    gw.upstream.on('GET /v1/items/boom', (req, res) => {
      json(res, 500, { error: 'crash', headers: req.headers });
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'boom' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(500);
    expect(reply.body.upstream_body.headers['x-api-key']).toBe('[redacted]');
    expectNoSecret(replyText(reply), '5xx reply');
  });
});

describe('a single basic secret is scrubbed in its encoded form too', () => {
  it('an upstream echoing Authorization: Basic base64(user:pass) in a 4xx body does not leak it', async () => {
    const gw = await startGateway({
      api: `    credentials:\n      basicAuth: ${JSON.stringify(SINGLE_BASIC)}`,
    });
    try {
      gw.upstream.on('POST /v1/forms', (req, res) =>
        json(res, 400, { authorization: req.headers.authorization }),
      );
      const { agent, agentId } = await gw.p.activeAgent(['submit_form']);
      const reply = await gw.p.execute(agent, agentId, 'submit_form', { title: 't' });
      expect(reply.status).toBe(400);
      expect(JSON.stringify(reply.body)).not.toContain(b64(SINGLE_BASIC));
      expect(reply.body.upstream_body).toEqual({ authorization: 'Basic [redacted]' });
    } finally {
      await gw.close();
    }
  });
});

describe('credentials are bound to the API origin', () => {
  let gw: Gateway;
  let other: TestUpstream;
  let agent: Awaited<ReturnType<TestProtocol['activeAgent']>>;
  beforeAll(async () => {
    gw = await startGateway({ api: '    credentials:\n      apiKeyHeader: {env: GW_HEADER_KEY}', env: ENV });
    other = await TestUpstream.start();
    agent = await gw.p.activeAgent(['get_item']);
  });
  afterAll(async () => {
    await gw.close();
    await other.close();
  });

  it('a redirect to another origin is not followed: 502 upstream_error, the other origin gets nothing', async () => {
    gw.upstream.on('GET /v1/items/moved', (_req, res) => {
      res.writeHead(302, { location: `${other.url}/v1/items/moved` });
      res.end();
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'moved' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(302);
    expect(other.requests).toHaveLength(0);
    expect(gw.upstream.received('/v1/items/moved')).toHaveLength(1);
  });

  it('a redirect on the same origin is not followed either', async () => {
    gw.upstream.on('GET /v1/items/here', (_req, res) => {
      res.writeHead(307, { location: '/v1/items/there' });
      res.end();
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'here' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(307);
    expect(gw.upstream.received('/v1/items/there')).toHaveLength(0);
  });
});

describe('server URL variables fixed by config (no `upstream`)', () => {
  let upstream: TestUpstream;
  let p: TestProtocol | undefined;
  beforeAll(async () => {
    upstream = await TestUpstream.start();
  });
  afterEach(async () => {
    await p?.close();
    p = undefined;
  });
  afterAll(() => upstream.close());

  const port = (): string => new URL(upstream.url).port;

  function configFor(serverVariables: Record<string, string>, portVariable: Record<string, unknown>): string {
    const spec = writeTempSpec({
      openapi: '3.0.3',
      info: { title: 'Variables', version: '1' },
      servers: [
        { url: 'http://127.0.0.1:{port}/{base}', variables: { port: portVariable, base: { default: 'v1' } } },
      ],
      security: [{ key: [] }],
      paths: {
        '/things/{id}': {
          get: {
            operationId: 'getThing',
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            responses: {
              '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
            },
          },
        },
      },
      components: { securitySchemes: { key: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } } },
    });
    const vars = Object.entries(serverVariables)
      .map(([k, v]) => `      ${k}: ${JSON.stringify(v)}`)
      .join('\n');
    const file = join(mkdtempSync(join(tmpdir(), 'aap-vars-')), 'proxy.yaml');
    writeFileSync(
      file,
      [
        'apis:',
        `  - spec: ${JSON.stringify(spec)}`,
        '    server_variables:',
        vars,
        '    credentials:',
        `      key: ${HEADER_KEY}`,
      ].join('\n'),
    );
    return file;
  }

  const start = (config: string): Promise<TestProtocol> =>
    startProtocol({ policy: 'rate_limits:\n  unknown_host_registration: null\n', overrides: { config } });

  it("reaches the origin built from the document's server and the configured variables", async () => {
    p = await start(configFor({ port: port() }, { default: '1' }));
    const { agent, agentId } = await p.activeAgent(['get_thing']);
    const reply = await p.execute(agent, agentId, 'get_thing', { id: 't1' });
    expect(reply.status).toBe(200);
    const seen = upstream.received('/v1/things/t1');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers['x-api-key']).toBe(HEADER_KEY);
    expect(seen[0]?.headers.host).toBe(`127.0.0.1:${port()}`);
  });

  it('a value allowed by the enum is accepted', async () => {
    p = await start(configFor({ port: port() }, { default: '1', enum: ['1', port()] }));
    const { agent, agentId } = await p.activeAgent(['get_thing']);
    expect((await p.execute(agent, agentId, 'get_thing', { id: 't2' })).status).toBe(200);
    expect(upstream.received('/v1/things/t2')).toHaveLength(1);
  });

  it('a value outside the enum stops start-up', async () => {
    const started = start(configFor({ port: port() }, { default: '1', enum: ['1', '2'] }));
    await expect(started).rejects.toThrow(/server_variables\.port: .* is not one of 1, 2/);
  });

  it('a variable the server does not declare stops start-up', async () => {
    const started = start(configFor({ port: port(), host: 'evil.example' }, { default: '1' }));
    await expect(started).rejects.toThrow(/server_variables\.host: the server .* has no such variable/);
  });
});
