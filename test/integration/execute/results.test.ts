/**
 * §2.15 / §5.11 sync results: what the agent gets back for each kind of upstream success body,
 * and the two ways a success body is refused (invalid JSON, over `max_response_bytes`).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import { json } from '../../helpers/upstream.js';

const MAX_RESPONSE_BYTES = 2048;

let gw: Gateway;
let agent: TestKey;
let agentId: string;

beforeAll(async () => {
  gw = await startGateway({
    api: [`    max_response_bytes: ${MAX_RESPONSE_BYTES}`, '    retries: 0'].join('\n'),
  });
  ({ agent, agentId } = await gw.p.activeAgent(['get_item', 'delete_item', 'get_file', 'list_items']));
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

describe('§5.11 sync results', () => {
  it('2xx JSON → 200 {data} with the parsed body, nothing else (§5.11 sync shape)', async () => {
    const item = { id: 'abc', price: 12.5, tags: ['a', 'b'], nested: { ok: true, none: null } };
    gw.upstream.on('GET /v1/items/abc', (_req, res) => json(res, 200, item));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'abc' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: item });
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    expect(gw.upstream.received('/v1/items/abc')).toHaveLength(1);
  });

  it('a JSON answer is relayed as its own text: no number rounded to a double, no re-serialization', async () => {
    const text = '{"id": 12345678901234567890, "price": 1.10, "big": 1e400, "name": "caf\\u00e9"}';
    gw.upstream.on('GET /v1/items/exact', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(text);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'exact' });
    expect(reply.status).toBe(200);
    expect(reply.text).toBe(`{"data":${text}}`);
    expect(reply.body.data.name).toBe('café');
  });

  it('a JSON scalar or array is data as is (§5.11: data is any)', async () => {
    gw.upstream.on('GET /v1/items', (_req, res) => json(res, 200, [1, 'two', null]));
    gw.upstream.on('GET /v1/items/n', (_req, res) => json(res, 200, 0));
    const list = await gw.p.execute(agent, agentId, 'list_items', {});
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [1, 'two', null] });
    const zero = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'n' });
    expect(zero.status).toBe(200);
    expect(zero.body).toEqual({ data: 0 });
  });

  it('a +json media type (application/problem+json style) is parsed as JSON', async () => {
    gw.upstream.on('GET /v1/items/v', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/vnd.item+json; charset=utf-8' });
      res.end('{"v":2}');
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'v' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: { v: 2 } });
  });

  it('204 No Content → 200 {data: null}', async () => {
    gw.upstream.on('DELETE /v1/items/gone', (_req, res) => {
      res.writeHead(204);
      res.end();
    });
    const reply = await gw.p.execute(agent, agentId, 'delete_item', { itemId: 'gone' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: null });
    expect(gw.upstream.received('/v1/items/gone').map((r) => r.method)).toEqual(['DELETE']);
  });

  it('200 with an empty body (even declared JSON) → {data: null}', async () => {
    gw.upstream.on('GET /v1/items/empty', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '0' });
      res.end();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'empty' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: null });
  });

  it('text/plain → data is the text as a string (not parsed, even when it looks like JSON)', async () => {
    const text = '{"not":"parsed"}\nline two — ünïcödé';
    gw.upstream.on('GET /v1/items/txt', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(text);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'txt' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: text });
  });

  it('binary (application/octet-stream) → {data: {content_type, base64}} round-trips the exact bytes', async () => {
    // Every byte value, including ones that are invalid UTF-8 on their own.
    const bytes = Buffer.from([...Array(256).keys(), 0xff, 0xfe, 0x00, 0xc3]);
    gw.upstream.on('GET /v1/files/blob', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length });
      res.end(bytes);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_file', { name: 'blob' });
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.body)).toEqual(['data']);
    expect(reply.body.data).toEqual({ content_type: 'application/octet-stream', base64: expect.any(String) });
    expect(Buffer.from(reply.body.data.base64, 'base64').equals(bytes)).toBe(true);
    expect(gw.upstream.received('/v1/files/blob')[0]?.headers.accept).toMatch(/application\/octet-stream/);
  });

  it('an image answer keeps its own content type in the envelope', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    gw.upstream.on('GET /v1/files/pic', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(png);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_file', { name: 'pic' });
    expect(reply.status).toBe(200);
    expect(reply.body.data.content_type).toBe('image/png');
    expect(Buffer.from(reply.body.data.base64, 'base64').equals(png)).toBe(true);
  });

  it('invalid JSON under a JSON content type → 502 upstream_error, the broken body not echoed', async () => {
    gw.upstream.on('GET /v1/items/broken', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "abc", SECRET-ISH-BROKEN');
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'broken' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(typeof reply.body.message).toBe('string');
    expect(reply.body.data).toBeUndefined();
    expect(JSON.stringify(reply.body)).not.toContain('SECRET-ISH-BROKEN');
    expect(gw.upstream.received('/v1/items/broken')).toHaveLength(1);
  });

  it(`a body of exactly max_response_bytes (${MAX_RESPONSE_BYTES}) is still accepted`, async () => {
    const payload = JSON.stringify({ pad: 'x'.repeat(MAX_RESPONSE_BYTES - 10) });
    expect(Buffer.byteLength(payload)).toBe(MAX_RESPONSE_BYTES);
    gw.upstream.on('GET /v1/items/edge', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(payload);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'edge' });
    expect(reply.status).toBe(200);
    expect(reply.body.data.pad).toHaveLength(MAX_RESPONSE_BYTES - 10);
  });

  it('a response bigger than max_response_bytes → 502 upstream_error with no huge body', async () => {
    const huge = JSON.stringify({ pad: 'y'.repeat(200_000) });
    gw.upstream.on('GET /v1/items/huge', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(huge) });
      res.end(huge);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'huge' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.data).toBeUndefined();
    expect(JSON.stringify(reply.body).length).toBeLessThan(1024);
    expect(JSON.stringify(reply.body)).not.toContain('yyyy');
  });

  it('the size cap holds for a chunked body with no content-length, written slowly', async () => {
    gw.upstream.on('GET /v1/items/chunked', async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      for (let i = 0; i < 8; i++) {
        if (res.destroyed) return;
        res.write('z'.repeat(512));
        await new Promise((r) => setTimeout(r, 5));
      }
      res.end();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'chunked' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(JSON.stringify(reply.body)).not.toContain('zzzz');
  });

  it('a 4xx whose body exceeds max_response_bytes keeps its status (the error body has its own cap)', async () => {
    const problem = { error: 'not_found', detail: 'd'.repeat(3000) };
    gw.upstream.on('GET /v1/items/missing', (_req, res) => json(res, 404, problem));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'missing' });
    expect(reply.status).toBe(404);
    expect(reply.body).toMatchObject({
      error: 'upstream_error',
      upstream_status: 404,
      upstream_body: problem,
    });
    expect(reply.body.upstream_body_truncated).toBeUndefined();
  });

  it('a 4xx with a body far over max_response_bytes → same status, body capped and flagged truncated', async () => {
    gw.upstream.on('GET /v1/items/noisy', (_req, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('n'.repeat(500_000));
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'noisy' });
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      error: 'upstream_error',
      upstream_status: 400,
      upstream_body_truncated: true,
    });
    expect(reply.body.upstream_body.length).toBeLessThanOrEqual(16 * 1024);
  });

  it('after an oversized answer the proxy still serves the next call (the pool is not poisoned)', async () => {
    gw.upstream.on('GET /v1/items/big', (_req, res) => json(res, 200, { pad: 'q'.repeat(10_000) }));
    gw.upstream.on('GET /v1/items/small', (_req, res) => json(res, 200, { ok: 1 }));
    expect((await gw.p.execute(agent, agentId, 'get_item', { itemId: 'big' })).status).toBe(502);
    const next = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'small' });
    expect(next.status).toBe(200);
    expect(next.body).toEqual({ data: { ok: 1 } });
  });
});
