/**
 * The request id header reaches every kind of head a route can write (tagged-response.ts), and a
 * route that writes the header itself keeps its own value, as it did when the id was set first.
 * A real node:http server on 127.0.0.1, read with fetch.
 */
import { createServer, IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaggedResponse } from '../../../src/http/tagged-response.js';

const NAME = 'x-request-id';

/** Each path writes its head another way. */
const heads: Record<string, (res: ServerResponse) => void> = {
  '/object': (res) => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok'),
  '/message': (res) => res.writeHead(201, 'Made', { 'content-type': 'text/plain' }).end('ok'),
  '/array': (res) => res.writeHead(202, ['content-type', 'text/plain', 'x-extra', '1']).end('ok'),
  '/implicit': (res) => res.end('ok'),
  '/status-only': (res) => res.writeHead(204).end(),
  '/set-before': (res) => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  },
  '/own-in-object': (res) => res.writeHead(200, { [NAME]: 'route' }).end('ok'),
  '/own-set-before': (res) => {
    res.setHeader(NAME, 'route');
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  },
  '/cookies-in-object': (res) => res.writeHead(200, { 'set-cookie': ['a=1', 'b=2'] }).end('ok'),
};

let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer({ IncomingMessage, ServerResponse: TaggedResponse }, (req, res) => {
    res.tag(NAME, 'id-123');
    (heads[req.url ?? ''] ?? ((r: ServerResponse) => r.writeHead(404).end()))(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

describe('TaggedResponse', () => {
  it.each([
    '/object',
    '/message',
    '/array',
    '/implicit',
    '/status-only',
    '/set-before',
    '/cookies-in-object',
  ])('%s: the head carries the request id once, with everything the route wrote', async (path) => {
    const res = await fetch(origin + path);
    expect(res.headers.get(NAME)).toBe('id-123');
    if (path === '/message') expect([res.status, res.statusText]).toEqual([201, 'Made']);
    if (path === '/array') expect(res.headers.get('x-extra')).toBe('1');
    if (path === '/set-before' || path === '/cookies-in-object') {
      expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    }
    if (path !== '/status-only') expect(await res.text()).toBe('ok');
  });

  it.each(['/own-in-object', '/own-set-before'])(
    '%s: a route that writes the header keeps its value',
    async (path) => {
      const res = await fetch(origin + path);
      expect(res.headers.get(NAME)).toBe('route');
    },
  );
});
