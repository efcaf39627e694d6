/**
 * Request bodies by media type (issue 4, §5.11 execution): JSON, application/x-www-form-urlencoded,
 * multipart/form-data (file parts given as base64), text/plain; success data that echoes a
 * configured secret is scrubbed while binary data is passed untouched; static headers that the
 * HTTP client owns cannot be configured; and one request id ties the log, the upstream and the
 * agent's answer together. Assertions are on the bytes the recording upstream received.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestProtocol } from '../../helpers/protocol.js';
import { json, type RecordedRequest } from '../../helpers/upstream.js';

const HEADER_KEY = 'svc-bodies-header-key-0123456789';
const BEARER = 'svc-bodies-bearer-token-abcdef012';
const BASIC_USER = 'svc-form-user';
const BASIC_PASS = 'svc-form-password-ABCDEFGH';
const SESSION = 'svc-bodies-session-98765432';
const CLIENT_SECRET = 'svc-bodies-client-secret-XYZ-1234';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

const b64 = (bytes: Buffer | string): string =>
  (typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes).toString('base64');

let gw: Gateway;
let agent: Agent;
const logLines: string[] = [];
beforeAll(async () => {
  gw = await startGateway({
    api: [
      '    credentials:',
      `      apiKeyHeader: ${HEADER_KEY}`,
      `      bearerAuth: ${BEARER}`,
      `      basicAuth: {username: ${BASIC_USER}, password: ${BASIC_PASS}}`,
      `      sessionCookie: ${SESSION}`,
      '      oauthClient:',
      '        client_id: c',
      `        client_secret: ${CLIENT_SECRET}`,
      '        token_url: {{upstream}}/oauth/token',
    ].join('\n'),
    logger: createLogger('info', (line) => logLines.push(line)),
  });
  agent = await gw.p.activeAgent([
    'create_item',
    'submit_form',
    'upload_file',
    'put_note',
    'get_item',
    'get_file',
  ]);
});
afterAll(() => gw.close());
afterEach(() => {
  gw.upstream.reset();
});

/** The client credentials token endpoint; reset() removes it after each test, so tests install it. */
function tokenEndpoint(): void {
  let issued = 0;
  gw.upstream.on('POST /oauth/token', (_req, res) => {
    issued += 1;
    json(res, 200, { access_token: `bodies-oauth-token-${issued}`, token_type: 'Bearer', expires_in: 3600 });
  });
}

const exec = (capability: string, args: unknown) =>
  gw.p.execute(agent.agent, agent.agentId, capability, args as Record<string, unknown>);

/** The only request to `prefix` (fails the test if there were none or several). */
function onlyAt(prefix: string): RecordedRequest {
  const seen = gw.upstream.received(prefix);
  expect(seen).toHaveLength(1);
  return seen[0] as RecordedRequest;
}

describe('application/json (§5.11)', () => {
  it('create_item: Content-Type application/json, the exact bytes parse back to the arguments', async () => {
    const args = { name: 'café ☕ "pen"', price: 2.5, currency: 'EUR' };
    const reply = await exec('create_item', args);
    expect(reply.status).toBe(200);
    const r = onlyAt('/v1/items');
    expect(r.method).toBe('POST');
    expect(r.url).toBe('/v1/items');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['content-length']).toBe(String(r.body.length));
    expect(r.body.equals(Buffer.from(JSON.stringify(args), 'utf8'))).toBe(true);
    expect(JSON.parse(r.body.toString('utf8'))).toEqual(args);
    expect(r.headers.authorization).toBe(`Bearer ${BEARER}`);
  });

  it('an optional field left out is not sent (not even as null)', async () => {
    const reply = await exec('create_item', { name: 'pen', price: 0 });
    expect(reply.status).toBe(200);
    expect(JSON.parse(onlyAt('/v1/items').body.toString('utf8'))).toEqual({ name: 'pen', price: 0 });
  });

  it('a body failing the schema (price a string, no coercion) → 400 invalid_request, nothing sent', async () => {
    const reply = await exec('create_item', { name: 'pen', price: '2.5' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('application/x-www-form-urlencoded (§5.11)', () => {
  it('submit_form: labels repeated, count as a string, reserved characters encoded', async () => {
    const reply = await exec('submit_form', { title: 'a b&c=d+é', count: 3, labels: ['x', 'y z'] });
    expect(reply.status).toBe(200);
    const r = onlyAt('/v1/forms');
    expect(r.method).toBe('POST');
    expect(r.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(r.body.toString('latin1')).toBe('title=a%20b%26c%3Dd%2B%C3%A9&count=3&labels=x&labels=y%20z');
    const form = new URLSearchParams(r.body.toString('utf8'));
    expect(form.get('title')).toBe('a b&c=d+é');
    expect(form.get('count')).toBe('3');
    expect(form.getAll('labels')).toEqual(['x', 'y z']);
    expect([...form.keys()]).toEqual(['title', 'count', 'labels', 'labels']);
    expect(r.headers.authorization).toBe(`Basic ${b64(`${BASIC_USER}:${BASIC_PASS}`)}`);
  });

  it('count given as a string is refused by the schema (integer, no coercion), nothing sent', async () => {
    const reply = await exec('submit_form', { count: '3' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('multipart/form-data (§5.11)', () => {
  /** The upstream's own multipart parser (WHATWG fetch), over the bytes it received. */
  async function parts(r: RecordedRequest): Promise<FormData> {
    const response = new Response(r.body, {
      headers: { 'content-type': String(r.headers['content-type']) },
    });
    // The test checks exactly what a plain WHATWG multipart parser reads back; @types/node marks
    // formData() deprecated only as advice for production servers.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    return response.formData();
  }

  /** A part that the parser saw as a file (it had a filename), not as text. */
  function filePart(form: FormData, name: string) {
    const part = form.get(name);
    if (part === null || typeof part === 'string') throw new Error(`${name} is not a file part`);
    return part;
  }

  it('upload_file: the base64 file arrives as the exact bytes in a file part; description as a text part', async () => {
    tokenEndpoint();
    // Every byte value, plus sequences that look like multipart structure.
    const bytes = Buffer.concat([
      Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
      Buffer.from('\r\n--boundary\r\nContent-Disposition: form-data; name="x"\r\n\r\n--\r\n'),
      randomBytes(4096),
    ]);
    const description = 'A "quoted" description\r\nwith a line break and ünïcode';
    const reply = await exec('upload_file', { file: b64(bytes), description });
    expect(reply.status).toBe(200);
    const r = onlyAt('/v1/uploads');
    expect(r.method).toBe('POST');
    expect(String(r.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=[!-~]{1,70}$/);
    expect(r.headers.authorization).toBe('Bearer bodies-oauth-token-1');

    const form = await parts(r);
    expect([...form.keys()]).toEqual(['file', 'description']);
    const file = filePart(form, 'file');
    const received = Buffer.from(await file.arrayBuffer());
    expect(received.length).toBe(bytes.length);
    expect(received.equals(bytes)).toBe(true);
    expect(file.name).toBe('file');
    expect(file.type).toBe('application/octet-stream');
    expect(form.get('description')).toBe(description);
  });

  it('a file alone (description optional)', async () => {
    tokenEndpoint();
    const reply = await exec('upload_file', { file: b64('hello') });
    expect(reply.status).toBe(200);
    const form = await parts(onlyAt('/v1/uploads'));
    expect([...form.keys()]).toEqual(['file']);
    expect(await filePart(form, 'file').text()).toBe('hello');
  });

  it.each([
    ['not base64 at all', 'not base64!'],
    ['missing padding', 'aGVsbG8'],
    ['whitespace inside', 'aGVs bG8='],
    ['the URL-safe alphabet', 'a-_b'],
    ['non-canonical trailing bits', 'aGVsbG9='],
  ])('invalid base64 (%s) → 400 invalid_request, nothing sent', async (_l, file) => {
    tokenEndpoint();
    const reply = await exec('upload_file', { file, description: 'd' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(JSON.stringify(reply.body)).toContain('file');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('invalid base64 is refused before any credential work: no token request either (nothing cached)', async () => {
    const fresh = await startGateway({
      api: [
        '    credentials:',
        '      oauthClient:',
        '        client_id: c',
        `        client_secret: ${CLIENT_SECRET}`,
        '        token_url: {{upstream}}/oauth/token',
      ].join('\n'),
    });
    try {
      fresh.upstream.on('POST /oauth/token', (_req, res) =>
        json(res, 200, { access_token: 'fresh-token-0123456789', token_type: 'Bearer', expires_in: 3600 }),
      );
      const a = await fresh.p.activeAgent(['upload_file']);
      const bad = await fresh.p.execute(a.agent, a.agentId, 'upload_file', { file: '%%%%' });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe('invalid_request');
      expect(fresh.upstream.requests).toHaveLength(0);
      // The same agent with valid base64 does reach both (so the check above can fail).
      const good = await fresh.p.execute(a.agent, a.agentId, 'upload_file', { file: b64('ok') });
      expect(good.status).toBe(200);
      expect(fresh.upstream.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
        'POST /oauth/token',
        'POST /v1/uploads',
      ]);
    } finally {
      await fresh.close();
    }
  });

  it('file missing (required) → 400 invalid_request, nothing sent', async () => {
    tokenEndpoint();
    const reply = await exec('upload_file', { description: 'no file' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('text/plain (§5.11)', () => {
  it('put_note: a string arrives exactly as given', async () => {
    const text = 'line one\nline two, ünïcode ☃\r\n{"not": "json"}';
    const reply = await exec('put_note', { noteId: 'n1', body: text });
    expect(reply.status).toBe(200);
    const r = onlyAt('/v1/notes/n1');
    expect(r.method).toBe('PUT');
    expect(String(r.headers['content-type'])).toMatch(/^text\/plain\b/);
    expect(r.body.equals(Buffer.from(text, 'utf8'))).toBe(true);
    expect(r.headers.cookie).toBe(`session=${SESSION}`);
  });

  it.each([
    ['an object', { a: 1 }],
    ['a number', 42],
    ['an array', ['x']],
    ['null', null],
  ])('a non-string body (%s) → 400 invalid_request from the schema, nothing sent', async (_l, body) => {
    const reply = await exec('put_note', { noteId: 'n1', body });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('secrets echoed in success data are scrubbed; binary data is untouched or withheld (§5.11)', () => {
  it("get_item: the default echo's data.headers['x-api-key'] is [redacted]", async () => {
    const reply = await exec('get_item', { itemId: 'echo' });
    expect(reply.status).toBe(200);
    // The upstream did get the real key …
    expect(onlyAt('/v1/items/echo').headers['x-api-key']).toBe(HEADER_KEY);
    // … and the agent only sees that it was sent.
    expect(reply.body.data.method).toBe('GET');
    expect(reply.body.data.headers['x-api-key']).toBe('[redacted]');
    expect(JSON.stringify(reply.body)).not.toContain(HEADER_KEY);
  });

  it('text data echoing a bearer token and the session cookie is scrubbed', async () => {
    gw.upstream.on('PUT /v1/notes/echo', (req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`cookie=${req.headers.cookie ?? ''}; also ${BEARER}`);
    });
    const reply = await exec('put_note', { noteId: 'echo', body: 'b' });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toBe('cookie=session=[redacted]; also [redacted]');
  });

  it('binary data is passed as exact base64, never rewritten', async () => {
    // Every byte value, including ones that look like '[redacted]' would need rewriting around.
    const bytes = Buffer.concat([randomBytes(32), Buffer.from(Array.from({ length: 256 }, (_, i) => i))]);
    gw.upstream.on('GET /v1/files/blob', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length });
      res.end(bytes);
    });
    const reply = await exec('get_file', { name: 'blob' });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual({
      content_type: 'application/octet-stream',
      base64: bytes.toString('base64'),
    });
    expect(Buffer.from(reply.body.data.base64, 'base64').equals(bytes)).toBe(true);
  });

  it('binary data that contains a secret is withheld whole (502), since base64 would hand it over', async () => {
    const bytes = Buffer.concat([randomBytes(32), Buffer.from(HEADER_KEY), Buffer.from([0, 255, 10])]);
    gw.upstream.on('GET /v1/files/leaky', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length });
      res.end(bytes);
    });
    const reply = await exec('get_file', { name: 'leaky' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 200 });
    expect(reply.body.message).toMatch(/contains a credential of the service/);
    const text = JSON.stringify(reply.body);
    expect(text).not.toContain(HEADER_KEY);
    expect(text).not.toContain(bytes.toString('base64').slice(40, 60));
  });

  it('form-encoded and YAML data, which reach the agent as text, are scrubbed too', async () => {
    for (const [name, type, body] of [
      ['form', 'application/x-www-form-urlencoded', `key=${encodeURIComponent(HEADER_KEY)}&ok=1`],
      ['yaml', 'application/vnd.example+yaml', `key: ${HEADER_KEY}\nok: 1\n`],
    ] as const) {
      gw.upstream.on(`GET /v1/files/${name}`, (_req, res) => {
        res.writeHead(200, { 'content-type': type });
        res.end(body);
      });
      const reply = await exec('get_file', { name });
      expect(reply.status, name).toBe(200);
      expect(reply.body.data, name).toBe(
        body.replace(encodeURIComponent(HEADER_KEY), '[redacted]').replace(HEADER_KEY, '[redacted]'),
      );
      expect(JSON.stringify(reply.body), name).not.toContain(HEADER_KEY);
    }
  });
});

describe('static headers the HTTP client owns stop start-up (RFC 9110 §7.6.1)', () => {
  it.each(['Host', 'Connection', 'Content-Length', 'Transfer-Encoding'])(
    '`headers: {%s: …}` is a start-up error naming the key',
    async (name) => {
      const started = startGateway({ api: `    headers:\n      ${name}: some-value` });
      await expect(started).rejects.toThrow(
        new RegExp(
          `apis\\[0\\]\\.headers\\.${name}: this header is set by the proxy's HTTP client and cannot be configured`,
        ),
      );
    },
  );

  it('lower case is refused too', async () => {
    await expect(startGateway({ api: '    headers:\n      host: evil.example' })).rejects.toThrow(
      /apis\[0\]\.headers\.host: this header is set by the proxy's HTTP client/,
    );
  });
});

describe('one request id: logged, sent upstream as x-request-id, returned to the agent', () => {
  const requestLogs = (): Record<string, unknown>[] =>
    logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((e) => e.msg === 'request' && e.path === '/capability/execute');

  it('the same UUID in all three places, and a new one per execution', async () => {
    const before = requestLogs().length;
    const first = await exec('create_item', { name: 'a', price: 1 });
    const second = await exec('create_item', { name: 'b', price: 2 });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const ids = [first, second].map((r) => r.headers.get('x-request-id'));
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    expect(ids[0]).not.toBe(ids[1]);
    expect(gw.upstream.received('/v1/items').map((r) => r.headers['x-request-id'])).toEqual(ids);
    const logged = requestLogs().slice(before);
    expect(logged.map((e) => e.request_id)).toEqual(ids);
    expect(logged.map((e) => e.status)).toEqual([200, 200]);
  });

  it('also for a refused execution: logged and returned, and nothing sent upstream', async () => {
    const before = requestLogs().length;
    const reply = await exec('put_note', { noteId: 'n1', body: 7 });
    expect(reply.status).toBe(400);
    const id = reply.headers.get('x-request-id');
    expect(id).toBeTruthy();
    const logged = requestLogs().slice(before);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ request_id: id, status: 400 });
    expect(gw.upstream.requests).toHaveLength(0);
  });
});
