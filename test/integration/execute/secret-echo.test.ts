/**
 * Issue 10, class 12: a service credential echoed back by the upstream never reaches the agent,
 * however it comes back — compressed (Content-Encoding decoded first, within a size cap), base64,
 * base64url, hex, percent- or `\u`-escaped (in any mix), or cut across relayed events — and a
 * secret too short to redact safely is refused at start-up.
 */
import type { ServerResponse } from 'node:http';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { relayedEvents, startGateway, type Gateway } from '../../helpers/gateway.js';
import {
  ECHOED_KEY,
  expectNoRunOf,
  sendBytes,
  startEchoGateway,
  type EchoAgent,
} from '../../helpers/secret-echo.js';

const KEY = ECHOED_KEY;
const MAX_RESPONSE_BYTES = 65536;

let gw: Gateway;
let agent: EchoAgent;

beforeAll(async () => {
  ({ gw, agent } = await startEchoGateway([
    '    retries: 0',
    `    max_response_bytes: ${MAX_RESPONSE_BYTES}`,
  ]));
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

const getItem = (itemId: string) => gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId });

/** The key, or any 8 consecutive characters of it, is nowhere in `text`. */
function expectNoKey(text: string): void {
  expect(text).not.toContain(KEY);
  expectNoRunOf(text);
}

const send = sendBytes;

describe('issue 10 class 12: compressed echoes are decoded before they are redacted', () => {
  const codings: [string, string, (b: Buffer) => Buffer][] = [
    ['gzip', 'gzip', gzipSync],
    ['x-gzip', 'x-gzip', gzipSync],
    ['deflate (zlib)', 'deflate', deflateSync],
    ['deflate sent raw', 'deflate', deflateRawSync],
    ['br', 'br', brotliCompressSync],
    ['gzip then br', 'gzip, br', (b) => brotliCompressSync(gzipSync(b))],
  ];

  it.each(codings)(
    'a %s JSON echo of the key → data decoded, the key redacted',
    async (_name, coding, compress) => {
      gw.upstream.on('GET /v1/items/z', (req, res) =>
        send(
          res,
          200,
          { 'content-type': 'application/json', 'content-encoding': coding },
          compress(Buffer.from(JSON.stringify({ echoed: req.headers['x-api-key'], ok: true }))),
        ),
      );
      const reply = await getItem('z');
      expect(reply.status).toBe(200);
      expect(reply.body).toEqual({ data: { echoed: '[redacted]', ok: true } });
      expect(gw.upstream.received('/v1/items/z')[0]?.headers['x-api-key']).toBe(KEY);
    },
  );

  it('a gzip error body echoing the key keeps its 4xx, decoded and redacted', async () => {
    gw.upstream.on('GET /v1/items/bad', (req, res) =>
      send(
        res,
        403,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        gzipSync(Buffer.from(JSON.stringify({ error: 'denied', key: req.headers['x-api-key'] }))),
      ),
    );
    const reply = await getItem('bad');
    expect(reply.status).toBe(403);
    expect(reply.body.upstream_body).toEqual({ error: 'denied', key: '[redacted]' });
  });

  it('a gzip-compressed binary body holding the key is withheld (502), not handed over in base64', async () => {
    gw.upstream.on('GET /v1/files/blob', (req, res) =>
      send(
        res,
        200,
        { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' },
        gzipSync(
          Buffer.concat([
            Buffer.from([0, 1, 2]),
            Buffer.from(String(req.headers['x-api-key'])),
            Buffer.from([9]),
          ]),
        ),
      ),
    );
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_file', { name: 'blob' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expectNoKey(JSON.stringify(reply.body));
  });

  it.each(['zstd', 'compress', 'x-secret-coding'])(
    'a content coding the proxy cannot decode (%s) → 502, the body never passed through',
    async (coding) => {
      gw.upstream.on('GET /v1/items/odd', (req, res) =>
        send(
          res,
          200,
          { 'content-type': 'application/json', 'content-encoding': coding },
          Buffer.from(JSON.stringify({ key: req.headers['x-api-key'] })),
        ),
      );
      const reply = await getItem('odd');
      expect(reply.status).toBe(502);
      expect(reply.body.error).toBe('upstream_error');
      expectNoKey(JSON.stringify(reply.body));
    },
  );

  it('a gzip bomb (a few KB expanding past max_response_bytes) → 502 upstream_error, not 500', async () => {
    const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(MAX_RESPONSE_BYTES);
    gw.upstream.on('GET /v1/items/bomb', (_req, res) =>
      send(res, 200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' }, bomb),
    );
    const reply = await getItem('bomb');
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.message).toMatch(/exceeds 65536 bytes once decoded/);
  });

  it('a corrupt gzip body → 502 upstream_error', async () => {
    gw.upstream.on('GET /v1/items/corrupt', (_req, res) =>
      send(
        res,
        200,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        Buffer.from('not gzip'),
      ),
    );
    const reply = await getItem('corrupt');
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
  });
});

describe('issue 10 class 12: encoded echoes', () => {
  const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
  const b64url = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');
  const hex = (s: string): string => Buffer.from(s, 'utf8').toString('hex');
  const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('latin1');
  const unhex = (s: string): string => Buffer.from(s.replace(/[^0-9a-f]/gi, ''), 'hex').toString('latin1');
  const pctAll = (s: string, lower: boolean): string =>
    [...Buffer.from(s)]
      .map((b) => '%' + b.toString(16).padStart(2, '0')[lower ? 'toLowerCase' : 'toUpperCase']())
      .join('');
  const uAll = (s: string): string =>
    Array.from(s)
      .map(
        (c, i) =>
          `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')[i % 2 ? 'toUpperCase' : 'toLowerCase']()}`,
      )
      .join('');
  const safeUnescape = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };

  /** [name, the raw JSON text of the upstream's `value`, how an agent would decode what it gets]. */
  const cases: [string, (k: string) => string, (got: string) => string][] = [
    ['base64', (k) => JSON.stringify(b64(k)), unb64],
    ['base64 one byte into a longer blob', (k) => JSON.stringify(b64(`x${k}tail`)), unb64],
    ['base64 two bytes into a longer blob', (k) => JSON.stringify(b64(`xy${k}tail`)), unb64],
    [
      'base64url',
      (k) => JSON.stringify(b64url(`q${k}`)),
      (g) => Buffer.from(g, 'base64url').toString('latin1'),
    ],
    ['hex, lower case', (k) => JSON.stringify(hex(k)), unhex],
    ['hex, upper case', (k) => JSON.stringify(hex(`a${k}`).toUpperCase()), unhex],
    ['every byte percent-encoded, lower-case hex', (k) => JSON.stringify(pctAll(k, true)), safeUnescape],
    ['every byte percent-encoded, upper-case hex', (k) => JSON.stringify(pctAll(k, false)), safeUnescape],
    ['every character \\u-escaped, mixed case', (k) => `"${uAll(k)}"`, (g) => g],
    [
      'a mix of literal, %XX and \\uXXXX characters',
      (k) => `"${k.slice(0, 5)}${pctAll(k.slice(5, 12), true)}${uAll(k.slice(12, 20))}${k.slice(20)}"`,
      (g) => safeUnescape(g),
    ],
    [
      'JSON inside JSON, \\u-escaped',
      (k) => JSON.stringify(JSON.stringify({ k: uAll(k) }).replaceAll('\\\\', '\\')),
      (g) => {
        try {
          return String((JSON.parse(g) as { k: unknown }).k);
        } catch {
          return g;
        }
      },
    ],
    [
      'percent-encoded base64',
      (k) => JSON.stringify(encodeURIComponent(b64(`zz${k}`))),
      (g) => unb64(safeUnescape(g)),
    ],
  ];

  it.each(cases)('%s → redacted in data', async (_name, encode, reveal) => {
    gw.upstream.on('GET /v1/items/enc', (req, res) => {
      const body = Buffer.from(`{"value":${encode(String(req.headers['x-api-key']))}}`);
      send(res, 200, { 'content-type': 'application/json' }, body);
    });
    const reply = await getItem('enc');
    expect(reply.status).toBe(200);
    const value = String(reply.body.data.value);
    expect(value).toContain('[redacted]');
    expectNoKey(value);
    expectNoKey(reveal(value));
  });

  it('text that only resembles the key (its first few characters) is left alone', async () => {
    gw.upstream.on('GET /v1/items/near', (_req, res) =>
      send(
        res,
        200,
        { 'content-type': 'application/json' },
        Buffer.from(JSON.stringify({ v: 'sk-live-9f8e', w: 'ok' })),
      ),
    );
    const reply = await getItem('near');
    expect(reply.body).toEqual({ data: { v: 'sk-live-9f8e', w: 'ok' } });
  });

  it('a binary body holding the key base64-encoded (at any alignment) is withheld', async () => {
    for (const prefix of ['', 'a', 'ab']) {
      gw.upstream.on('GET /v1/files/b64', (req, res) =>
        send(
          res,
          200,
          { 'content-type': 'application/octet-stream' },
          Buffer.from(`\x00\x01${b64(prefix + String(req.headers['x-api-key']))}\x02`, 'latin1'),
        ),
      );
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_file', { name: 'b64' });
      expect(reply.status, prefix).toBe(502);
    }
  });
});

describe('issue 10 class 12: a key cut across relayed events', () => {
  async function stream(
    write: (res: ServerResponse, key: string) => void,
    headers: Record<string, string> = {},
  ): Promise<string> {
    const { status, text } = await relayedEvents(gw, agent, write, headers);
    expect(status).toBe(200);
    return text;
  }

  /** The data of every relayed event, joined as an agent rebuilding the text would. */
  function joinedData(text: string): string {
    return text
      .split('\n\n')
      .flatMap((block) =>
        block
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6)),
      )
      .join('');
  }

  it('cut in two at every position, the agent never gets the key (nor 8 characters of it) by joining the events', async () => {
    const text = await stream((res, key) => {
      for (let i = 1; i < key.length; i++) {
        res.write(`data: part ${key.slice(0, i)}\n\n`);
        res.write(`data: ${key.slice(i)} end\n\n`);
        res.write('data: ---------------------------------\n\n');
      }
      res.end();
    });
    expect(text).toContain('data: part ');
    expectNoKey(joinedData(text));
    expectNoKey(text.replaceAll('\n', '').replaceAll('data: ', ''));
  });

  it('cut into single characters, one event each, the key does not come out whole', async () => {
    const text = await stream((res, key) => {
      for (const c of key) res.write(`data: ${c}\n\n`);
      res.end('data: after\n\n');
    });
    expectNoKey(joinedData(text));
    expect(joinedData(text)).toContain('after');
  });

  it('cut across JSON deltas ({"delta": …}) with other fields between, the joined deltas hold no key', async () => {
    const text = await stream((res, key) => {
      const parts = [key.slice(0, 6), key.slice(6, 13), key.slice(13, 21), key.slice(21)];
      parts.forEach((part, i) => res.write(`id: ${i}\ndata: ${JSON.stringify({ seq: i, delta: part })}\n\n`));
      res.end(`data: ${JSON.stringify({ seq: 9, delta: ' done' })}\n\n`);
    });
    const deltas = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => (JSON.parse(l.slice(6)) as { delta?: string }).delta ?? '')
      .join('');
    expectNoKey(deltas);
    expect(deltas).toContain('[redacted]');
    expect(deltas.endsWith(' done')).toBe(true);
  });

  it('a gzip-compressed event stream is decoded, then redacted across events', async () => {
    const text = await stream(
      (res, key) =>
        res.end(
          gzipSync(Buffer.from(`data: a ${key.slice(0, 14)}\n\ndata: ${key.slice(14)} b\n\ndata: plain\n\n`)),
        ),
      { 'content-encoding': 'gzip' },
    );
    expect(joinedData(text)).toContain('plain');
    expectNoKey(joinedData(text));
  });

  it('an event stream in a coding the proxy cannot decode → 502 before anything is relayed', async () => {
    gw.upstream.on('GET /v1/events', (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'zstd' });
      res.end(`data: ${String(req.headers['x-api-key'])}\n\n`);
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'stream_events', {});
    expect(reply.status).toBe(502);
    expectNoKey(JSON.stringify(reply.body));
  });
});

describe('issue 10 class 12: secrets too short to redact safely stop start-up', () => {
  it.each([
    [
      'an apiKey credential',
      '    credentials:\n      apiKeyHeader: short07',
      /apis\[0\]\.credentials\.apiKeyHeader: the secret is 7 characters long/,
    ],
    [
      'a basic password',
      '    credentials:\n      basicAuth: {username: admin, password: hunter2}',
      /apis\[0\]\.credentials\.basicAuth\.password: the secret is 7 characters long/,
    ],
    [
      'an OAuth client secret',
      '    credentials:\n      oauthClient: {client_id: app, client_secret: abc}',
      /apis\[0\]\.credentials\.oauthClient\.client_secret: the secret is 3 characters long/,
    ],
    [
      'a static header read from the environment',
      '    headers:\n      X-Secret: {env: GW_SHORT}',
      /apis\[0\]\.headers\.X-Secret: the secret is 5 characters long/,
    ],
  ])('%s shorter than 8 characters is refused, naming its config key', async (_what, api, message) => {
    await expect(startGateway({ api, env: { GW_SHORT: 'short' } })).rejects.toThrow(message);
  });

  it('the refusal never shows the secret itself', async () => {
    const started = startGateway({ api: '    credentials:\n      apiKeyHeader: short07' });
    await expect(started).rejects.toThrow(/at least 8/);
    await started.catch((err: unknown) => expect(String(err)).not.toContain('short07'));
  });

  it('an inline static header shorter than 8 characters is configuration, not a secret: accepted, sent and not rewritten', async () => {
    const short = await startGateway({ api: '    headers:\n      X-Tenant: acme' });
    try {
      short.upstream.on('GET /v1/items/t', (req, res) =>
        send(
          res,
          200,
          { 'content-type': 'application/json' },
          Buffer.from(JSON.stringify({ tenant: req.headers['x-tenant'] })),
        ),
      );
      const { agent: a, agentId } = await short.p.activeAgent(['get_item']);
      const reply = await short.p.execute(a, agentId, 'get_item', { itemId: 't' });
      expect(reply.body).toEqual({ data: { tenant: 'acme' } });
    } finally {
      await short.close();
    }
  });
});
