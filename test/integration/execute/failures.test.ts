/**
 * §5.11 / §5.13: upstream failures as the agent sees them. A 4xx keeps its status as
 * `upstream_error` with the upstream's (size-capped) body, a 5xx becomes 502, a timeout 504
 * `upstream_timeout`, an unreachable upstream 502 `upstream_unavailable`; retries are bounded and
 * only for idempotent methods on connection failures and 502/503/504.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GATEWAY_SPEC, startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';
import { json, type UpstreamHandler } from '../../helpers/upstream.js';
import { MAX_ANSWER_DEPTH } from '../../../src/upstream/results.js';

const SERVICE_KEY = 'service-key-failures-0123456789';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('§5.11 upstream errors keep their meaning', () => {
  let gw: Gateway;
  let agent: TestKey;
  let agentId: string;
  beforeAll(async () => {
    gw = await startGateway({
      api: ['    retries: 0', '    credentials:', '      apiKeyHeader: {env: GW_KEY}'].join('\n'),
      env: { GW_KEY: SERVICE_KEY },
    });
    ({ agent, agentId } = await gw.p.activeAgent(['get_item', 'list_items']));
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  it('404 with a JSON body → 404 {error: upstream_error, message, upstream_status: 404, upstream_body: parsed}', async () => {
    const problem = { code: 'not_found', detail: 'no item abc', fields: ['itemId'] };
    gw.upstream.on('GET /v1/items/abc', (_req, res) => json(res, 404, problem));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'abc' });
    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({
      error: 'upstream_error',
      message: expect.any(String),
      upstream_status: 404,
      upstream_body: problem,
    });
    expect(gw.upstream.received('/v1/items/abc')).toHaveLength(1);
  });

  it('422 with a text body → 422 with upstream_body as the text', async () => {
    gw.upstream.on('GET /v1/items/bad', (_req, res) => {
      res.writeHead(422, { 'content-type': 'text/plain' });
      res.end('price must be positive');
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'bad' });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(422);
    expect(reply.body.upstream_body).toBe('price must be positive');
    expect(reply.body.upstream_body_truncated).toBeUndefined();
  });

  it('a 4xx with an empty body → upstream_body null', async () => {
    gw.upstream.on('GET /v1/items/nobody', (_req, res) => {
      res.writeHead(409);
      res.end();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'nobody' });
    expect(reply.status).toBe(409);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 409, upstream_body: null });
  });

  it('a huge 4xx body is capped and flagged upstream_body_truncated', async () => {
    const huge = 'E'.repeat(300_000);
    gw.upstream.on('GET /v1/items/huge', (_req, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(huge);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'huge' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_status).toBe(400);
    expect(reply.body.upstream_body_truncated).toBe(true);
    expect(typeof reply.body.upstream_body).toBe('string');
    expect(reply.body.upstream_body.length).toBeGreaterThan(0);
    expect(reply.body.upstream_body.length).toBeLessThanOrEqual(16 * 1024);
    expect(JSON.stringify(reply.body).length).toBeLessThan(20_000);
  });

  it('a 4xx body that repeats the service credential has it redacted', async () => {
    gw.upstream.on('GET /v1/items/leak', (req, res) =>
      json(res, 401, { error: 'bad key', key: req.headers['x-api-key'] }),
    );
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'leak' });
    expect(gw.upstream.received('/v1/items/leak')[0]?.headers['x-api-key']).toBe(SERVICE_KEY);
    expect(reply.status).toBe(401);
    expect(reply.body.upstream_status).toBe(401);
    expect(JSON.stringify(reply.body)).not.toContain(SERVICE_KEY);
  });

  it.each([500, 503])('%i → 502 upstream_error with upstream_status %i', async (status) => {
    gw.upstream.on('GET /v1/items/boom', (_req, res) => json(res, status, { oops: status }));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'boom' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({
      error: 'upstream_error',
      upstream_status: status,
      upstream_body: { oops: status },
    });
    expect(gw.upstream.received('/v1/items/boom')).toHaveLength(1);
  });

  it('a redirect is not followed → 502 upstream_error with upstream_status 302', async () => {
    gw.upstream.on('GET /v1/items/moved', (_req, res) => {
      res.writeHead(302, { location: '/v1/items/elsewhere' });
      res.end();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'moved' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 302 });
    expect(gw.upstream.requests.map((r) => r.path)).toEqual(['/v1/items/moved']);
  });
});

describe('JSON from the upstream nested past MAX_ANSWER_DEPTH', () => {
  let gw: Gateway;
  let agent: TestKey;
  let agentId: string;
  beforeAll(async () => {
    gw = await startGateway({ api: '    retries: 0' });
    ({ agent, agentId } = await gw.p.activeAgent(['get_item']));
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  // 16,000 bytes nest 8,000 deep: JSON.stringify overflows the stack on it, which in the error's
  // answer ended the whole process.
  const deep = '['.repeat(8000) + ']'.repeat(8000);

  it('an error body nested 8,000 deep is echoed as text, and the proxy answers the next call', async () => {
    gw.upstream.on('GET /v1/items/deep', (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(deep);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'deep' });
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 400, upstream_body: deep });
    gw.upstream.on('GET /v1/items/next', (_req, res) => json(res, 200, { ok: true }));
    const next = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'next' });
    expect(next.body).toEqual({ data: { ok: true } });
  });

  it(`an error body nested ${MAX_ANSWER_DEPTH} deep is still parsed`, async () => {
    const body = '['.repeat(MAX_ANSWER_DEPTH) + ']'.repeat(MAX_ANSWER_DEPTH);
    gw.upstream.on('GET /v1/items/deepish', (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(body);
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'deepish' });
    expect(reply.body.upstream_body).toEqual(JSON.parse(body));
  });

  it(`a success answer nested deeper than ${MAX_ANSWER_DEPTH} → 502 upstream_error naming the depth; one at it passes`, async () => {
    const nested = (n: number): string => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    gw.upstream.on('GET /v1/items/deep', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(nested(MAX_ANSWER_DEPTH + 1));
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'deep' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 200 });
    expect(reply.body.message).toContain(`more than ${MAX_ANSWER_DEPTH} levels deep`);
    gw.upstream.on('GET /v1/items/at', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(nested(MAX_ANSWER_DEPTH));
    });
    const at = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'at' });
    expect(at.status).toBe(200);
    expect(JSON.stringify(at.body)).toBe(`{"data":${nested(MAX_ANSWER_DEPTH)}}`);
  });
});

describe('§5.11 timeouts → 504 upstream_timeout', () => {
  let gw: Gateway;
  let agent: TestKey;
  let agentId: string;
  beforeAll(async () => {
    gw = await startGateway({
      api: [
        '    timeout: 300ms',
        '    retries: 2',
        '    retry_backoff: 10ms',
        '    operations:',
        '      list_items:',
        '        timeout: 1500ms',
      ].join('\n'),
    });
    ({ agent, agentId } = await gw.p.activeAgent(['get_item', 'list_items']));
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  it('an upstream that never answers → 504 upstream_timeout within bounded time, not retried', async () => {
    gw.upstream.on('GET /v1/items/hang', () => new Promise<void>(() => undefined));
    const started = Date.now();
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'hang' });
    const elapsed = Date.now() - started;
    expect(reply.status).toBe(504);
    expect(reply.body.error).toBe('upstream_timeout');
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1200);
    expect(gw.upstream.received('/v1/items/hang')).toHaveLength(1);
  });

  it('an answer that comes after the timeout → 504 upstream_timeout', async () => {
    gw.upstream.on('GET /v1/items/late', async (_req, res) => {
      await sleep(700);
      if (!res.destroyed) json(res, 200, { late: true });
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'late' });
    expect(reply.status).toBe(504);
    expect(reply.body.error).toBe('upstream_timeout');
  });

  it('a body that stalls after the headers → 504 upstream_timeout (the deadline covers the whole exchange)', async () => {
    gw.upstream.on('GET /v1/items/stall', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"partial":');
    });
    const started = Date.now();
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'stall' });
    expect(reply.status).toBe(504);
    expect(reply.body.error).toBe('upstream_timeout');
    expect(Date.now() - started).toBeLessThan(1200);
  });

  it('operations.{name}.timeout overrides the API timeout (list_items may take 600 ms)', async () => {
    gw.upstream.on('GET /v1/items', async (_req, res) => {
      await sleep(600);
      json(res, 200, { slow: 'ok' });
    });
    const reply = await gw.p.execute(agent, agentId, 'list_items', {});
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: { slow: 'ok' } });
  });
});

describe('§5.11 unreachable upstream → 502 upstream_unavailable', () => {
  let p: TestProtocol;
  let port: number;
  beforeAll(async () => {
    // A port that was just free and is closed now: connections are refused.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const file = join(mkdtempSync(join(tmpdir(), 'aap-unreach-')), 'proxy.yaml');
    writeFileSync(
      file,
      [
        'apis:',
        `  - spec: ${JSON.stringify(GATEWAY_SPEC)}`,
        `    upstream: http://127.0.0.1:${port}/v1`,
        '    retries: 1',
        '    retry_backoff: 10ms',
      ].join('\n'),
    );
    p = await startProtocol({
      policy: 'rate_limits:\n  unknown_host_registration: null\n',
      overrides: { config: file, db: tempDbFile() },
    });
  });
  afterAll(() => p.close());

  it('a closed port → 502 upstream_unavailable, quickly, without revealing the upstream address', async () => {
    const { agent, agentId } = await p.activeAgent(['get_item']);
    const started = Date.now();
    const reply = await p.execute(agent, agentId, 'get_item', { itemId: 'x' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_unavailable');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(JSON.stringify(reply.body)).not.toContain(String(port));
  });
});

describe('§5.11 retries: bounded, idempotent methods only, on 502/503/504 and connection failures', () => {
  let gw: Gateway;
  let agent: TestKey;
  let agentId: string;
  beforeAll(async () => {
    gw = await startGateway({ api: ['    retries: 2', '    retry_backoff: 10ms'].join('\n') });
    ({ agent, agentId } = await gw.p.activeAgent(['get_item', 'delete_item', 'create_item', 'list_items']));
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  /** Answers `failures` times with `status`, then calls `then`. */
  function failThen(status: number, failures: number, then: UpstreamHandler): UpstreamHandler {
    let seen = 0;
    return async (req, res) => {
      seen += 1;
      if (seen <= failures) json(res, status, { attempt: seen });
      else await then(req, res);
    };
  }

  it('GET answering 503 twice then 200 → 200, the upstream saw exactly 3 requests', async () => {
    gw.upstream.on(
      'GET /v1/items/flaky',
      failThen(503, 2, (_req, res) => json(res, 200, { ok: true })),
    );
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'flaky' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: { ok: true } });
    expect(gw.upstream.received('/v1/items/flaky')).toHaveLength(3);
  });

  it('the body of a retried 503 is dropped, not read: an endless one closes and the upstream stops sending', async () => {
    let attempts = 0;
    let firstClosed: Promise<void> = Promise.resolve();
    gw.upstream.on('GET /v1/items/endless', (_req, res) => {
      attempts += 1;
      if (attempts > 1) {
        json(res, 200, { ok: true });
        return;
      }
      res.writeHead(503, { 'content-type': 'text/plain' });
      firstClosed = new Promise((resolve) => res.once('close', () => resolve()));
      const chunk = 'y'.repeat(64 * 1024);
      const pump = (): void => {
        while (!res.destroyed) if (!res.write(chunk)) return void res.once('drain', pump);
      };
      pump();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'endless' });
    expect(reply.body).toEqual({ data: { ok: true } });
    // Drained, the first answer was read for as long as the upstream wrote: it never closed.
    await firstClosed;
    expect(attempts).toBe(2);
  });

  it('the retried requests carry the same request id', async () => {
    gw.upstream.on(
      'GET /v1/items/rid',
      failThen(502, 1, (_req, res) => json(res, 200, {})),
    );
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'rid' });
    expect(reply.status).toBe(200);
    const ids = gw.upstream.received('/v1/items/rid').map((r) => r.headers['x-request-id']);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[0]).toBe(reply.headers.get('x-request-id'));
  });

  it('DELETE is idempotent and retried too (504 then 204)', async () => {
    gw.upstream.on(
      'DELETE /v1/items/d1',
      failThen(504, 1, (_req, res) => {
        res.writeHead(204);
        res.end();
      }),
    );
    const reply = await gw.p.execute(agent, agentId, 'delete_item', { itemId: 'd1' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: null });
    expect(gw.upstream.received('/v1/items/d1').map((r) => r.method)).toEqual(['DELETE', 'DELETE']);
  });

  it('POST answering 503 is NOT retried (exactly 1 request) → 502 upstream_error', async () => {
    gw.upstream.on('POST /v1/items', (_req, res) => json(res, 503, { busy: true }));
    const reply = await gw.p.execute(agent, agentId, 'create_item', { name: 'pen', price: 1 });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 503 });
    expect(gw.upstream.received('/v1/items')).toHaveLength(1);
  });

  it('retries are bounded: always 503 → exactly 1 + retries (3) requests, then 502 with upstream_status 503', async () => {
    gw.upstream.on('GET /v1/items/down', (_req, res) => json(res, 503, { down: true }));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'down' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({
      error: 'upstream_error',
      upstream_status: 503,
      upstream_body: { down: true },
    });
    expect(gw.upstream.received('/v1/items/down')).toHaveLength(3);
  });

  it.each([400, 404, 409, 429])('a %i is never retried', async (status) => {
    gw.upstream.on('GET /v1/items/client', (_req, res) => json(res, status, { status }));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'client' });
    expect(reply.status).toBe(status);
    expect(reply.body.upstream_status).toBe(status);
    expect(gw.upstream.received('/v1/items/client')).toHaveLength(1);
  });

  it('a 500 is not a retry status (only 502/503/504): exactly 1 request', async () => {
    gw.upstream.on('GET /v1/items/err', (_req, res) => json(res, 500, {}));
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'err' });
    expect(reply.status).toBe(502);
    expect(reply.body.upstream_status).toBe(500);
    expect(gw.upstream.received('/v1/items/err')).toHaveLength(1);
  });

  it('a connection failure (socket destroyed) is retried for GET: 2 attempts → 200', async () => {
    let attempts = 0;
    gw.upstream.on('GET /v1/items/reset', (_req, res) => {
      attempts += 1;
      if (attempts === 1) res.socket?.destroy();
      else json(res, 200, { attempt: attempts });
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'reset' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ data: { attempt: 2 } });
    expect(attempts).toBe(2);
    expect(gw.upstream.received('/v1/items/reset')).toHaveLength(2);
  });

  it('a connection failure on every attempt → 502 upstream_unavailable after exactly 1 + retries attempts', async () => {
    gw.upstream.on('GET /v1/items/dead', (_req, res) => {
      res.socket?.destroy();
    });
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'dead' });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_unavailable');
    expect(gw.upstream.received('/v1/items/dead')).toHaveLength(3);
  });

  it('a connection failure on POST is not retried (the upstream may have acted): exactly 1 request', async () => {
    gw.upstream.on('POST /v1/items', (_req, res) => {
      res.socket?.destroy();
    });
    const reply = await gw.p.execute(agent, agentId, 'create_item', { name: 'pen', price: 1 });
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_unavailable');
    expect(gw.upstream.received('/v1/items')).toHaveLength(1);
  });
});
