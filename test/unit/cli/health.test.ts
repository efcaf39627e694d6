/** The health command's one request (src/cli/health.ts statusOf): its status, or a bounded failure. */
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { statusOf } from '../../../src/cli/health.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
}

describe('statusOf', () => {
  it("is the answer's status, whatever it is", async () => {
    const url = await listen(
      createHttpServer((req, res) => {
        res.statusCode = req.url === '/readyz' ? 503 : 404;
        res.end('{"status":"not ready"}');
      }),
    );
    expect(await statusOf(url)).toBe(503);
  });

  it('gives up on a peer that accepts and never answers, closing the connection', async () => {
    const sockets: Socket[] = [];
    let closed = 0;
    const url = await listen(
      createServer((socket) => {
        sockets.push(socket);
        // Read (and drop) the request, so that the client's close is seen.
        socket.resume().on('close', () => closed++);
      }),
    );
    await expect(statusOf(url, 50)).rejects.toThrow('no answer within 50 ms');
    await expect.poll(() => closed).toBe(1);
    expect(sockets).toHaveLength(1);
  });

  it('a refused connection is its error', async () => {
    const url = await listen(createServer());
    await new Promise((resolve) => servers.pop()?.close(resolve));
    await expect(statusOf(url)).rejects.toThrow(/ECONNREFUSED/);
  });
});
