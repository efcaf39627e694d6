/**
 * Reading an upstream answer (client.ts readBody) against a real server on 127.0.0.1: a body
 * whose declared bytes are all buffered is taken at once, one still arriving is read as a stream,
 * and either way the body closes, which ends the call's deadline timer.
 */
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBody, readCapped, UpstreamClient, UpstreamCallError } from '../../../src/upstream/client.js';
import { TestUpstream } from '../../helpers/upstream.js';

let upstream: TestUpstream;
const client = new UpstreamClient({ connections: 4 });

beforeAll(async () => {
  upstream = await TestUpstream.start();
  upstream.on('GET /small', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 11 }).end('{"ok":true}');
  });
  upstream.on('GET /slow', (_req, res) => {
    // The head and half the body, the rest a moment later: not all of it is there when the call answers.
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 8 });
    res.write('abcd');
    setTimeout(() => res.end('efgh'), 30);
  });
  upstream.on('GET /chunked', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('no declared length');
  });
  upstream.on('GET /big', (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 64 }).end('x'.repeat(64));
  });
});

afterAll(async () => {
  await client.close();
  await upstream.close();
});

function call(path: string): ReturnType<UpstreamClient['send']> {
  return client.send({
    origin: upstream.url,
    path,
    method: 'GET',
    headers: {},
    timeoutMs: 5_000,
    retries: 0,
    retryBackoffMs: 10,
  });
}

describe('readBody', () => {
  it.each([
    ['/small', '{"ok":true}'],
    ['/slow', 'abcdefgh'],
    ['/chunked', 'no declared length'],
  ])('%s: the whole body, and the body closes (the deadline timer ends with it)', async (path, text) => {
    const reply = await call(path);
    const closed = once(reply.body, 'close');
    expect((await readBody(reply, 1024)).toString()).toBe(text);
    await closed;
    expect(reply.deadline.aborted).toBe(false);
  });

  it('over the cap: too_large, or the first bytes, said to be cut, when read capped', async () => {
    await expect(call('/big').then((r) => readBody(r, 16))).rejects.toBeInstanceOf(UpstreamCallError);
    const capped = await call('/big').then((r) => readCapped(r, 16));
    expect(capped.bytes.toString()).toBe('x'.repeat(16));
    expect(capped.cut).toBe(true);
  });

  it.each(['/small', '/slow', '/chunked'])(
    'read capped, %s (within the cap) is whole, not cut',
    async (path) => {
      const capped = await call(path).then((r) => readCapped(r, 1024));
      expect(capped.cut).toBe(false);
      expect(capped.bytes.length).toBeGreaterThan(0);
    },
  );
});
