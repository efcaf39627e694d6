/**
 * Regressions in what comes back from the upstream to the agent (issue 10, class 12, and the
 * limits of §5.11 execution), each named after what broke: a cut compressed error body, a static
 * `Authorization` header echoed as its token alone, stream pieces the cross-event redaction did
 * not join (object keys, escapes, ids), a silent stream cut at the call's timeout, and compressed
 * files handed over unchecked.
 */
import type { ServerResponse } from 'node:http';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { relayedEvents, startGateway, type Gateway } from '../../helpers/gateway.js';
import { expectNoRunOf, sendBytes, startEchoGateway, type EchoAgent } from '../../helpers/secret-echo.js';
import { json } from '../../helpers/upstream.js';

let gw: Gateway;
let agent: EchoAgent;

beforeAll(async () => {
  ({ gw, agent } = await startEchoGateway([
    '    retries: 0',
    '    timeout: 2s',
    '    max_response_bytes: 65536',
  ]));
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

const expectNone = expectNoRunOf;
const send = sendBytes;

const getItem = (itemId: string) => gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId });
const getFile = (name: string) => gw.p.execute(agent.agent, agent.agentId, 'get_file', { name });

/** Streams what `write` sends as the upstream's event stream; the relayed text. */
async function relayed(write: (res: ServerResponse, key: string) => void): Promise<string> {
  const { status, text } = await relayedEvents(gw, agent, write);
  expect(status).toBe(200);
  return text;
}

/** The values of one field of every relayed event, in order. */
function fieldValues(text: string, field: 'data' | 'id'): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${field}: `))
    .map((l) => l.slice(field.length + 2));
}

describe('a compressed error body cut at its read cap showed all but the last character of the key', () => {
  it('gzip (stored) of UTF-16 text, the key across the 20 KiB read cap: none of it shows', async () => {
    gw.upstream.on('GET /v1/items/cut', (req, res) => {
      const key = String(req.headers['x-api-key']);
      // 20,480 compressed bytes are read; stored blocks decode them to 20,465 bytes, 10,232 UTF-16
      // units, fewer than the cap: the cut could not be told from the decoded length.
      const text = 'x'.repeat(10232 - 27) + key + 'y'.repeat(20000);
      const body = gzipSync(Buffer.from(text, 'utf16le'), { level: 0 });
      send(res, 400, { 'content-type': 'text/plain; charset=utf-16le', 'content-encoding': 'gzip' }, body);
    });
    const reply = await getItem('cut');
    expect(reply.status).toBe(400);
    expect(reply.body.upstream_body_truncated).toBe(true);
    expect(String(reply.body.upstream_body)).toMatch(/^x+$/);
    expectNone(reply.text);
  });

  it('a gzip error body the upstream itself cut short, ending in the key: none of it shows', async () => {
    gw.upstream.on('GET /v1/items/short', (req, res) => {
      const key = String(req.headers['x-api-key']);
      const whole = gzipSync(Buffer.from(`{"error":"bad","echo":"${key}"}`), { level: 0 });
      // Without gzip's trailer (8 bytes) and the last 3 characters (`w"}`): a whole body on the
      // wire, a cut one inside, ending in all but the last character of the key.
      const cut = whole.subarray(0, whole.length - 11);
      send(res, 401, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, cut);
    });
    const reply = await getItem('short');
    expect(reply.status).toBe(401);
    expectNone(reply.text);
  });

  it('a whole gzip error body is not cut: its JSON is parsed and redacted', async () => {
    gw.upstream.on('GET /v1/items/whole', (req, res) =>
      send(
        res,
        403,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        gzipSync(JSON.stringify({ error: 'denied', key: req.headers['x-api-key'] })),
      ),
    );
    const reply = await getItem('whole');
    expect(reply.status).toBe(403);
    expect(reply.body.upstream_body).toEqual({ error: 'denied', key: '[redacted]' });
    expect(reply.body).not.toHaveProperty('upstream_body_truncated');
  });
});

describe('a static `Authorization` header was redacted only as the whole value', () => {
  const TOKEN = 'sk-live-abcdef0123456789XYZ';
  const PASSWORD = 'pw-0123456789-secret';

  it.each([
    ['Bearer', `Bearer ${TOKEN}`, TOKEN],
    ['Basic (the password)', `Basic ${Buffer.from(`svc:${PASSWORD}`).toString('base64')}`, PASSWORD],
    ['Basic (user:pass)', `Basic ${Buffer.from(`svc:${PASSWORD}`).toString('base64')}`, `svc:${PASSWORD}`],
  ])('%s: the credential alone, echoed in a 401, is redacted', async (_name, header, echoed) => {
    const g = await startGateway({
      api: ['    retries: 0', '    headers:', '      Authorization: {env: GW_AUTH}'].join('\n'),
      env: { GW_AUTH: header },
    });
    try {
      const x = await g.p.activeAgent(['get_item']);
      g.upstream.on('GET /v1/items/a', (req, res) => {
        expect(req.headers.authorization).toBe(header);
        json(res, 401, { error: 'invalid_token', message: `token ${echoed} has expired` });
      });
      const reply = await g.p.execute(x.agent, x.agentId, 'get_item', { itemId: 'a' });
      expect(reply.status).toBe(401);
      expect(reply.body.upstream_body).toEqual({
        error: 'invalid_token',
        message: 'token [redacted] has expired',
      });
      expectNone(reply.text, echoed);
    } finally {
      await g.close();
    }
  });
});

describe('event streams: pieces of the key the cross-event redaction did not join', () => {
  it('JSON object keys: the joined keys hold no 8 characters of the key', async () => {
    const text = await relayed((res, k) => {
      res.write(`data: {"${k.slice(0, 14)}":1}\n\n`);
      res.end(`data: {"${k.slice(14)}":1}\n\n`);
    });
    const keys = fieldValues(text, 'data')
      .filter((d) => d.startsWith('{'))
      .map((d) => Object.keys(JSON.parse(d) as object).join(''));
    expect(keys).toHaveLength(2);
    expectNone(keys.join(''));
  });

  it('a percent-escape in the first piece: the decoded joined data holds no 8 characters of the key', async () => {
    const text = await relayed((res, k) => {
      const escaped = `%73${k.slice(1)}`;
      res.write(`data: ${escaped.slice(0, 12)}\n\n`);
      res.end(`data: ${escaped.slice(12)}\n\n`);
    });
    const joined = fieldValues(text, 'data').join('');
    expectNone(joined);
    expectNone(decodeURIComponent(joined.replaceAll('[redacted]', '')));
  });

  it('ids: an id holding all but the last character of the key shows none of it', async () => {
    const text = await relayed((res, k) => {
      res.write(`id: ${k.slice(0, -1)}\ndata: one\n\n`);
      res.end(`id: ${k.slice(-1)}\ndata: two\n\n`);
    });
    expect(fieldValues(text, 'data')).toEqual(expect.arrayContaining(['one', 'two']));
    expectNone(fieldValues(text, 'id').join(''));
  });
});

describe('a stream silent for longer than `timeout` was cut as upstream_unavailable', () => {
  it('an event 3 s after the last (timeout 2 s) is still relayed, the stream ends normally', async () => {
    const started = Date.now();
    const text = await relayed((res) => {
      res.write('data: first\n\n');
      setTimeout(() => res.end('data: second\n\n'), 3000);
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(fieldValues(text, 'data')).toEqual(['first', 'second', '']);
    expect(text).not.toContain('event: error');
  });
});

describe('a compressed file holding the key was handed over in base64, unchecked', () => {
  // Padded: brotli stores a short input as it is, where the key would be found in its bytes anyway.
  const dump = (key: string): Buffer =>
    Buffer.from(JSON.stringify({ headers: { 'x-api-key': key }, log: 'line '.repeat(200) }));

  it.each([
    ['application/gzip', (b: Buffer) => gzipSync(b)],
    ['application/x-gzip', (b: Buffer) => gzipSync(b)],
    ['application/x-brotli', (b: Buffer) => brotliCompressSync(b)],
    ['application/octet-stream (gzip by its bytes)', (b: Buffer) => gzipSync(b)],
    ['application/gzip, gzip inside gzip', (b: Buffer) => gzipSync(gzipSync(b))],
  ])('%s → 502 upstream_error, withheld', async (type, compress) => {
    gw.upstream.on('GET /v1/files/packed', (req, res) =>
      send(
        res,
        200,
        { 'content-type': type.split(' ')[0] as string },
        compress(dump(String(req.headers['x-api-key']))),
      ),
    );
    const reply = await getFile('packed');
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.message).toMatch(/contains a credential/);
    expectNone(reply.text);
  });

  it('a clean gzip file is handed over unchanged', async () => {
    const file = gzipSync(Buffer.from('just a log line\n'.repeat(100)));
    gw.upstream.on('GET /v1/files/logs', (_req, res) =>
      send(res, 200, { 'content-type': 'application/gzip' }, file),
    );
    const reply = await getFile('logs');
    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual({ content_type: 'application/gzip', base64: file.toString('base64') });
  });

  it('a gzip file larger than max_response_bytes once decoded is withheld: it could not be checked', async () => {
    gw.upstream.on('GET /v1/files/bomb', (_req, res) =>
      send(res, 200, { 'content-type': 'application/gzip' }, gzipSync(Buffer.alloc(1 << 20))),
    );
    const reply = await getFile('bomb');
    expect(reply.status).toBe(502);
    expect(reply.body.message).toMatch(/could not check/);
  });
});
