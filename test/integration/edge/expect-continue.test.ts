/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1): the client holds its body back until the server says
 * `100 Continue`. Node said so at once, before the token was read, so a client was invited to
 * upload a body the proxy then refused unread. `100 Continue` now goes out only when a step reads
 * the body, after the checks before it (http/body.ts continueWhenRead).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { rawExchange, statuses } from '../../helpers/raw-http.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ overrides: { mockUpstream: true } });
});
afterAll(async () => {
  await p?.close();
});

const head = (token: string, length: number): string =>
  `POST /capability/execute HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n` +
  `content-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;

describe('Expect: 100-continue', () => {
  it('a request refused before its body is read gets its final answer, never 100, and the connection closes', async () => {
    const text = await rawExchange(p.proxy.url, head('not-a-jwt', 1_000_000), 3_000);
    // Observed before: "HTTP/1.1 100 Continue" first, then the 401.
    expect(statuses(text)).toEqual([401]);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(text).toContain('"error":"invalid_jwt"');
  });

  it('a request that passes the checks is told to continue when its body is read, and is served', async () => {
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const token = await p.agentToken(agent, agentId, {}, p.executeLocation);
    const body = JSON.stringify({ capability: 'list_pets', arguments: {} });
    const { hostname, port } = new URL(p.proxy.url);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    let received = '';
    const arrived = (pattern: RegExp): Promise<void> =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (pattern.test(received)) {
            clearTimeout(timer);
            socket.off('data', onData);
            resolve();
          }
        };
        const onData = (c: Buffer): void => {
          received += c.toString('latin1');
          check();
        };
        const timer = setTimeout(
          () => reject(new Error(`timed out; got ${JSON.stringify(received)}`)),
          5_000,
        );
        socket.on('data', onData);
        check();
      });
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(head(token, Buffer.byteLength(body)));
    await arrived(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    socket.write(body);
    await arrived(/\r\n\r\n[\s\S]*"data"/);
    socket.destroy();
    expect(statuses(received)).toEqual([100, 200]);
  });
});
