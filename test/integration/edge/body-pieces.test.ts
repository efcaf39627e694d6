/**
 * A request body sent in tiny pieces (README "Bounds"): what one unfinished body can make the proxy
 * hold, and how many pieces it reads before refusing it. Anyone can reach a body read: a host JWT
 * of a self-made key admits a new host to POST /agent/register.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../../src/util/collect-garbage.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { statuses } from '../../helpers/raw-http.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol();
});
afterAll(async () => {
  await p?.close();
});

const MiB = 1024 * 1024;

/** Heap and Buffers' memory in use after a full collection (the proxy runs in this process). */
function retained(): number {
  collectGarbage();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

/** The head of a chunked POST /agent/register from a new host. */
async function registerHead(): Promise<string> {
  const host = await generateTestKey();
  const agent = await generateTestKey();
  const token = await p.hostToken(host, { agent_public_key: agent.publicJwk });
  return (
    `POST /agent/register HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n` +
    `content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`
  );
}

interface Sent {
  readonly socket: Socket;
  /** What came back so far. */
  readonly text: () => string;
  readonly closed: () => boolean;
}

/**
 * Sends `head`, then up to `total` body bytes as 1-byte chunks (`1\r\nX\r\n`), 10,000 a write,
 * never the last chunk: the body stays unfinished. Stops writing once an answer came.
 */
async function sendOneByteChunks(head: string, total: number): Promise<Sent> {
  const { hostname, port } = new URL(p.proxy.url);
  const socket = connect({ host: hostname, port: Number(port) });
  const received: Buffer[] = [];
  let closed = false;
  socket.on('data', (c: Buffer) => received.push(c));
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const text = (): string => Buffer.concat(received).toString('latin1');
  const perWrite = 10_000;
  const batch = '1\r\nX\r\n'.repeat(perWrite);
  await new Promise<void>((resolve) => socket.write(head, () => resolve()));
  for (let sent = perWrite; sent <= total && received.length === 0 && !closed; sent += perWrite) {
    await new Promise<void>((resolve) => socket.write(batch, () => resolve()));
  }
  return { socket, text, closed: () => closed };
}

/** Waits, a bounded time, for `done`. */
async function waitFor(done: () => boolean, ms: number): Promise<void> {
  for (let waited = 0; waited < ms && !done(); waited += 50) await new Promise((r) => setTimeout(r, 50));
}

describe('request bodies in tiny pieces', () => {
  // Regression: every 'data' piece was kept in a list until the body's end. One unfinished 1 MiB
  // body in 1-byte chunks held 195 MB of heap; four held 535 MB of heap and 1.3 GB resident.
  it('an unfinished 1 MiB body in 1-byte chunks holds little and is refused 400, closing', async () => {
    const head = await registerHead();
    const before = retained();
    // Within the 1 MiB cap, so that only the pieces' count can stop it.
    const sent = await sendOneByteChunks(head, MiB - 1);
    // Whatever the server still had to read has reached it, or the connection ended.
    await waitFor(() => sent.closed(), 2000);
    const held = retained() - before;
    const text = sent.text();
    sent.socket.destroy();
    expect(held).toBeLessThan(20 * MiB);
    expect(statuses(text)).toEqual([400]);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(text).toContain('"error":"invalid_request"');
    expect(text).toContain('pieces');
  });

  it('the same body in 4 KiB chunks is read whole (and refused only for what it says)', async () => {
    const host = await generateTestKey();
    const agent = await generateTestKey();
    const token = await p.hostToken(host, { agent_public_key: agent.publicJwk });
    const body = JSON.stringify({ name: 'pieces', reason: 'r'.repeat(200_000) });
    const chunks: string[] = [];
    for (let at = 0; at < body.length; at += 4096) {
      const piece = body.slice(at, at + 4096);
      chunks.push(`${piece.length.toString(16)}\r\n${piece}\r\n`);
    }
    const { hostname, port } = new URL(p.proxy.url);
    const socket = connect({ host: hostname, port: Number(port) });
    const received: Buffer[] = [];
    socket.on('data', (c: Buffer) => received.push(c));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /agent/register HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n` +
        `content-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`,
    );
    // One write per chunk, a turn apart, so that they reach the server as separate pieces.
    for (const chunk of chunks) {
      socket.write(chunk);
      await new Promise((r) => setImmediate(r));
    }
    socket.write('0\r\n\r\n');
    await waitFor(() => received.length > 0, 5000);
    socket.destroy();
    const text = Buffer.concat(received).toString('latin1');
    // Parsed whole: refused for its 200,000-character reason, not for its pieces.
    expect(statuses(text)).toEqual([400]);
    expect(text).toContain('reason must be at most');
  });
});
