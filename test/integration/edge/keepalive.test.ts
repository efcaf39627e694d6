/** Keep-alive and pipelining after requests refused before (or while) their body is read. */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { rawExchange, statuses } from '../../helpers/raw-http.js';

let p: TestProtocol;
let agent: Awaited<ReturnType<TestProtocol['activeAgent']>>;
beforeAll(async () => {
  p = await startProtocol({
    policy: 'capabilities:\n  defaults: [list_pets]\nrate_limits:\n  unknown_host_registration: null\n',
    overrides: { mockUpstream: true },
  });
  agent = await p.activeAgent(['list_pets']);
});
afterAll(async () => {
  await p?.close();
});

const H = 'host: 127.0.0.1\r\n';

describe('keep-alive after a refusal', () => {
  it('401 before a 200 KB body is read: the body is drained and the pipelined request is answered', async () => {
    const body = `{"capability":"list_pets","arguments":{"x":"${'a'.repeat(200_000)}"}}`;
    const bytes =
      `POST /capability/execute HTTP/1.1\r\n${H}content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}` +
      `GET /healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`;
    const out = await rawExchange(p.proxy.url, bytes, 3000);
    expect(statuses(out)).toEqual([401, 200]);
  });

  it('a body whose text looks like a request is not parsed as one (chunked, with extensions and trailers)', async () => {
    const token = await p.agentToken(agent.agent, agent.agentId, {}, p.executeLocation);
    const payload = `{"capability":"list_pets"}`;
    const smuggled = `GET /admin/agents HTTP/1.1\r\n${H}\r\n`;
    const bytes =
      `POST /capability/execute HTTP/1.1\r\n${H}authorization: Bearer ${token}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n` +
      `${payload.length.toString(16)};ext=1\r\n${payload}\r\n0\r\nx-trailer: ${smuggled.length}\r\n\r\n` +
      `GET /healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`;
    const out = await rawExchange(p.proxy.url, bytes, 3000);
    expect(statuses(out)).toEqual([200, 200]);
  });

  it('pipelined executes are answered in order, each with its own result', async () => {
    const reqs: string[] = [];
    for (const name of ['list_pets', 'nope_cap', 'list_pets']) {
      const token = await p.agentToken(agent.agent, agent.agentId, {}, p.executeLocation);
      const body = `{"capability":"${name}"}`;
      reqs.push(
        `POST /capability/execute HTTP/1.1\r\n${H}authorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
    }
    const out = await rawExchange(
      p.proxy.url,
      reqs.join('') + `GET /healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      3000,
    );
    expect(statuses(out)).toEqual([200, 404, 200, 200]);
  });

  it('an over-limit chunked body after a valid token: 413 and the connection closes', async () => {
    const token = await p.agentToken(agent.agent, agent.agentId, {}, p.executeLocation);
    const chunk = 'a'.repeat(600_000);
    const bytes =
      `POST /capability/execute HTTP/1.1\r\n${H}authorization: Bearer ${token}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n` +
      `${chunk.length.toString(16)}\r\n${chunk}\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n` +
      `GET /healthz HTTP/1.1\r\n${H}\r\n`;
    const out = await rawExchange(p.proxy.url, bytes, 3000);
    expect(statuses(out)).toEqual([413]);
  });

  // Regression: a request refused before its body was read (401, 404, 405 …) left the connection
  // reading and dropping a chunked body until its end or server.request_timeout: 58 MB in 4.9 s
  // on one connection, 30 s by default, 64 connections per address.
  it('401 while a chunked body is still arriving: the answer says close and the body stops being read', async () => {
    const { hostname, port } = new URL(p.proxy.url);
    const socket = connect({ host: hostname, port: Number(port) });
    const received: Buffer[] = [];
    let ended = false;
    socket.on('data', (c: Buffer) => received.push(c));
    for (const event of ['end', 'close', 'error']) socket.on(event, () => (ended = true));
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /capability/execute HTTP/1.1\r\n${H}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    const piece = 'a'.repeat(64 * 1024);
    const chunk = `${piece.length.toString(16)}\r\n${piece}\r\n`;
    const started = Date.now();
    let sent = 0;
    // Keeps sending for at most 3 s (request_timeout is 30 s): the body never ends.
    while (!ended && Date.now() - started < 3000) {
      await new Promise<void>((resolve) => socket.write(chunk, () => resolve()));
      sent += chunk.length;
    }
    socket.destroy();
    const text = Buffer.concat(received).toString('latin1');
    expect(statuses(text)).toEqual([401]);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(ended).toBe(true);
    // What was in flight when the answer came, and the sockets' buffers: far from 3 s of sending.
    expect(sent).toBeLessThan(16 * 1024 * 1024);
  });
});
