/**
 * §5.11 streaming: an upstream `text/event-stream` is relayed as `data`, `error` and `done`
 * events; a `done` always ends the stream, whatever ends it (upstream done or end, revocation,
 * the maximum duration), and an agent that goes away cancels the upstream request.
 */
import { writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_EVENT_CHARS } from '../../../src/upstream/sse.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import { writePolicy } from '../../helpers/protocol.js';

interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Reads §5.11 events from a fetch body as they arrive (no `event:` field means `data`). */
class SseReader {
  private buffer = '';
  private readonly queue: SseEvent[] = [];
  private ended = false;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();

  constructor(res: Response) {
    if (!res.body) throw new Error('no body');
    this.reader = res.body.getReader();
  }

  /** The next event, or undefined once the stream has ended; fails after `timeoutMs`. */
  async next(timeoutMs = 3000): Promise<SseEvent | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length === 0 && !this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for an SSE event');
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        this.reader.read(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timed out waiting for an SSE event')), left);
        }),
      ]).finally(() => clearTimeout(timer));
      if (chunk.done) this.ended = true;
      else this.parse(this.decoder.decode(chunk.value, { stream: true }));
    }
    return this.queue.shift();
  }

  /** Every remaining event until the stream ends. */
  async rest(timeoutMs = 3000): Promise<SseEvent[]> {
    const out: SseEvent[] = [];
    for (;;) {
      const e = await this.next(timeoutMs);
      if (!e) return out;
      out.push(e);
    }
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }

  private parse(text: string): void {
    this.buffer += text.replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let event = 'data';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') id = value;
      }
      this.queue.push({ event, data: data.join('\n'), ...(id !== undefined ? { id } : {}) });
    }
  }
}

function sseHead(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

/** Resolves when the upstream's response closes before it was finished (the proxy hung up). */
function closedEarly(res: ServerResponse): Promise<'closed'> {
  return new Promise((resolve) => res.on('close', () => !res.writableFinished && resolve('closed')));
}

async function openStream(
  gw: Gateway,
  agent: TestKey,
  agentId: string,
  args: Record<string, unknown> = {},
  signal?: AbortSignal,
): Promise<Response> {
  const token = await gw.p.agentToken(agent, agentId, {}, gw.p.executeLocation);
  return fetch(`${gw.p.proxy.url}/capability/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capability: 'stream_events', arguments: args }),
    ...(signal ? { signal } : {}),
  });
}

/**
 * An execute request on a raw socket, so the test controls exactly when the agent's connection
 * closes. `until`: resolve once the bytes received so far contain this text (else right after sending).
 */
async function rawExecute(gw: Gateway, agent: TestKey, agentId: string, until?: string): Promise<Socket> {
  const token = await gw.p.agentToken(agent, agentId, {}, gw.p.executeLocation);
  const body = JSON.stringify({ capability: 'stream_events', arguments: {} });
  const { hostname, port } = new URL(gw.p.proxy.url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  let seen = '';
  const arrived = new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => {
      seen += c.toString();
      if (until !== undefined && seen.includes(until)) resolve();
    });
  });
  socket.write(
    `POST /capability/execute HTTP/1.1\r\nhost: ${hostname}:${port}\r\nauthorization: Bearer ${token}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  if (until !== undefined) {
    await arrived;
    expect(seen).toMatch(/^HTTP\/1\.1 200/);
  }
  return socket;
}

describe('§5.11 SSE relay', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      api: '    retries: 0',
      config: 'execution:\n  stream_revocation_check: 100ms\n  stream_max_duration: 20s',
    });
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  it('relays upstream events as `event: data`; an upstream `done` ends the stream with its data', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      sseHead(res);
      res.write('data: {"n":1}\n\n');
      res.write('event: message\nid: 7\ndata: {"n":2}\n\n');
      res.write(': a comment line\n\n');
      res.write('event: tick\ndata: third\n\n');
      res.write('event: done\ndata: {"total":3}\n\n');
      res.end();
    });
    const res = await openStream(gw, agent, agentId, { count: 3 });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await new SseReader(res).rest();
    expect(events).toEqual([
      { event: 'data', data: '{"n":1}' },
      { event: 'data', data: '{"n":2}', id: '7' },
      // WHATWG SSE: the last event ID persists until the next `id:` field.
      { event: 'data', data: 'third', id: '7' },
      { event: 'done', data: '{"total":3}' },
    ]);
    const seen = gw.upstream.received('/v1/events');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.query.get('count')).toBe('3');
    expect(seen[0]?.headers.accept).toMatch(/text\/event-stream/);
  });

  it('relays an upstream `event: error` as a §5.13 error event (text wrapped as upstream_error)', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      sseHead(res);
      res.write('event: error\ndata: {"error":"quota_exceeded","message":"slow down"}\n\n');
      res.write('event: error\ndata: disk on fire\n\n');
      res.write('data: after\n\n');
      res.end('event: done\ndata:\n\n');
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events).toHaveLength(4);
    expect(events[0]?.event).toBe('error');
    expect(JSON.parse(events[0]?.data ?? '')).toEqual({ error: 'quota_exceeded', message: 'slow down' });
    expect(events[1]?.event).toBe('error');
    expect(JSON.parse(events[1]?.data ?? '')).toEqual({ error: 'upstream_error', message: 'disk on fire' });
    expect(events[2]).toEqual({ event: 'data', data: 'after' });
    expect(events[3]).toEqual({ event: 'done', data: '' });
  });

  it('ends the stream with an error when one upstream event outgrows its bound, and lets go of the upstream', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    const released = new Promise<number>((resolve) => {
      gw.upstream.on('GET /v1/events', (_req, res) => {
        sseHead(res);
        res.write('data: before\n\n');
        let sent = 0;
        const line = `data: ${'x'.repeat(64 * 1024)}\n`;
        // One event that never ends: data lines and no blank line, until the proxy hangs up.
        const more = (): void => {
          while (!res.destroyed && res.write(line)) sent += line.length;
          if (!res.destroyed) res.once('drain', more);
        };
        res.once('close', () => resolve(sent));
        more();
      });
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events.map((e) => e.event)).toEqual(['data', 'error', 'done']);
    expect(events[0]?.data).toBe('before');
    expect(JSON.parse(events[1]?.data ?? '')).toMatchObject({ error: 'upstream_unavailable' });
    // The proxy stopped reading within a few event bounds of what it may hold.
    expect(await released).toBeLessThan(16 * MAX_EVENT_CHARS);
  });

  it('keeps a UTF-8 character split across two upstream chunks whole, and drops a leading BOM', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    const euro = Buffer.from('€', 'utf8');
    const sent = new Promise<void>((resolve) => {
      gw.upstream.on('GET /v1/events', (_req, res) => {
        sseHead(res);
        res.write(
          Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('data: price 5'), euro.subarray(0, 1)]),
        );
        // A pause, so the rest arrives in another read: the character is split on the wire.
        setTimeout(() => {
          res.end(Buffer.concat([euro.subarray(1), Buffer.from('\n\nevent: done\ndata: ok\n\n')]));
          resolve();
        }, 50);
      });
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    await sent;
    expect(events).toEqual([
      { event: 'data', data: 'price 5€' },
      { event: 'done', data: 'ok' },
    ]);
  });

  it('an upstream that ends without `done` still gets a `done` from the proxy', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      sseHead(res);
      res.write('data: one\n\n');
      res.end('data: two\n\n');
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events).toEqual([
      { event: 'data', data: 'one' },
      { event: 'data', data: 'two' },
      { event: 'done', data: '' },
    ]);
  });

  it('multi-line data (CRLF or LF, split across chunks) is relayed as one event with its lines', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', async (_req, res) => {
      sseHead(res);
      res.write('data: line1\ndata: line2\ndata: line3\n\n');
      res.write('data: crlf-a\r\ndata: cr');
      await sleep(20);
      res.write('lf-b\r\n\r');
      await sleep(20);
      res.write('\n');
      res.end('event: done\ndata: {"a":\ndata: 1}\n\n');
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events).toEqual([
      { event: 'data', data: 'line1\nline2\nline3' },
      { event: 'data', data: 'crlf-a\ncrlf-b' },
      { event: 'done', data: '{"a":\n1}' },
    ]);
  });

  it('after the upstream `done` nothing more is relayed and the upstream request is closed', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let upstreamClosed: Promise<'closed'> | undefined;
    gw.upstream.on('GET /v1/events', (_req, res) => {
      upstreamClosed = closedEarly(res);
      sseHead(res);
      res.write('data: before\n\nevent: done\ndata: fin\n\ndata: after-done\n\n');
      // The upstream keeps the connection open; the proxy must not wait for it.
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events).toEqual([
      { event: 'data', data: 'before' },
      { event: 'done', data: 'fin' },
    ]);
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });

  it('an upstream connection that breaks mid-stream → error upstream_unavailable then done', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', async (_req, res) => {
      sseHead(res);
      res.write('data: partial\n\n');
      await sleep(50);
      res.socket?.destroy();
    });
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    expect(events.map((e) => e.event)).toEqual(['data', 'error', 'done']);
    expect(JSON.parse(events[1]?.data ?? '').error).toBe('upstream_unavailable');
  });

  it('an upstream error status for a stream capability is a normal JSON error (no stream)', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"down":true}');
    });
    const reply = await gw.p.execute(agent, agentId, 'stream_events', {});
    expect(reply.status).toBe(502);
    expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 503 });
  });

  it('§5.11: revoking the agent (POST /agent/revoke) stops the stream: error agent_revoked, then done', async () => {
    const { host, agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let upstreamClosed: Promise<'closed'> | undefined;
    gw.upstream.on('GET /v1/events', (_req, res) => {
      upstreamClosed = closedEarly(res);
      sseHead(res);
      res.write('data: first\n\n');
    });
    const reader = new SseReader(await openStream(gw, agent, agentId));
    expect(await reader.next()).toEqual({ event: 'data', data: 'first' });
    const revoked = await gw.p.request('POST', '/agent/revoke', {
      token: await gw.p.hostToken(host),
      body: { agent_id: agentId },
    });
    expect(revoked.status).toBe(200);
    const started = Date.now();
    const rest = await reader.rest();
    expect(Date.now() - started).toBeLessThan(1500);
    expect(rest.map((e) => e.event)).toEqual(['error', 'done']);
    expect(JSON.parse(rest[0]?.data ?? '').error).toBe('agent_revoked');
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });

  it('§5.11: revoking the host (operator API) stops the stream: error host_revoked, then done', async () => {
    const { hostId, agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      sseHead(res);
      res.write('data: first\n\n');
    });
    const reader = new SseReader(await openStream(gw, agent, agentId));
    expect((await reader.next())?.data).toBe('first');
    const revoked = await gw.p.admin('POST', `/admin/hosts/${hostId}/revoke`, {});
    expect(revoked.status).toBe(200);
    const rest = await reader.rest();
    expect(rest.map((e) => e.event)).toEqual(['error', 'done']);
    // The host check comes first; an implementation may also report the cascaded agent revocation.
    expect(['host_revoked', 'agent_revoked']).toContain(JSON.parse(rest[0]?.data ?? '').error);
  });

  it('§5.11: a grant that expires while its stream is open ends the stream: error capability_not_granted, then done', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    gw.upstream.on('GET /v1/events', (_req, res) => {
      sseHead(res);
      res.write('data: first\n\n');
    });
    const reader = new SseReader(await openStream(gw, agent, agentId));
    expect((await reader.next())?.data).toBe('first');
    const ctx = gw.p.proxy.protocol;
    const grant = (await ctx.store.grants(agentId)).find((g) => g.capability === 'stream_events');
    const now = gw.p.clock.now();
    await ctx.write((tx) => tx.updateGrant(grant?.id ?? '', { expiresAt: now + 1000, updatedAt: now }));
    gw.p.clock.advance(2000);
    const rest = await reader.rest();
    expect(rest.map((e) => e.event)).toEqual(['error', 'done']);
    expect(JSON.parse(rest[0]?.data ?? '').error).toBe('capability_not_granted');
  });

  it('a reload that blocks the capability ends an open stream at its next check', async () => {
    const policyFile = writePolicy('rate_limits:\n  unknown_host_registration: null\n');
    const reloading = await startGateway({
      api: '    retries: 0',
      config: 'execution:\n  stream_revocation_check: 100ms\n  stream_max_duration: 20s',
      policyFile,
    });
    try {
      const { agent, agentId } = await reloading.p.activeAgent(['stream_events']);
      reloading.upstream.on('GET /v1/events', async (_req, res) => {
        sseHead(res);
        for (let i = 0; i < 200 && !res.destroyed; i++) {
          res.write(`data: tick ${i}\n\n`);
          await sleep(20);
        }
        res.end();
      });
      const reader = new SseReader(await openStream(reloading, agent, agentId));
      expect((await reader.next())?.event).toBe('data');
      writeFileSync(
        policyFile,
        'rate_limits:\n  unknown_host_registration: null\ncapabilities:\n  blocked: [stream_events]\n',
      );
      expect((await reloading.p.proxy.reload()).ok).toBe(true);
      const rest = await reader.rest();
      expect(rest.slice(-2).map((e) => e.event)).toEqual(['error', 'done']);
      const error = JSON.parse(rest.at(-2)?.data ?? '{}');
      expect(error).toMatchObject({
        error: 'capability_not_granted',
        message: expect.stringMatching(/blocked/),
      });
      // Within a check or two of the reload, not the stream's 20 s.
      expect(rest.length).toBeLessThan(40);
    } finally {
      await reloading.close();
    }
  });

  it('the agent disconnecting aborts the upstream request (the upstream sees its request closed)', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let upstreamClosed: Promise<'closed'> | undefined;
    gw.upstream.on('GET /v1/events', (_req, res) => {
      upstreamClosed = closedEarly(res);
      sseHead(res);
      res.write('data: first\n\n');
    });
    const agentSide = await rawExecute(gw, agent, agentId, 'data: first');
    agentSide.destroy();
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });

  it('an agent that stops reading holds the upstream back instead of having the proxy queue the stream', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let written = 0;
    let upstreamClosed: Promise<'closed'> | undefined;
    gw.upstream.on('GET /v1/events', (_req, res) => {
      upstreamClosed = closedEarly(res);
      sseHead(res);
      const event = `data: ${'x'.repeat(64 * 1024)}\n\n`;
      const pump = (): void => {
        while (!res.destroyed) {
          written += event.length;
          if (!res.write(event)) return void res.once('drain', pump);
        }
      };
      pump();
    });
    const agentSide = await rawExecute(gw, agent, agentId, 'data: x');
    agentSide.pause();
    // The upstream writes for as long as someone reads: without backpressure the proxy read
    // 100 MB a second into memory. Held back, it stops within the sockets' buffers.
    const cap = 64 * 1024 * 1024;
    let last = -1;
    while (written !== last && written < cap) {
      last = written;
      await sleep(300);
    }
    expect(written).toBeLessThan(cap);
    agentSide.destroy();
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });

  it('the agent disconnecting before the upstream answers aborts the upstream request too', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let upstreamClosed: Promise<'closed'> | undefined;
    let arrived!: () => void;
    const requested = new Promise<void>((r) => (arrived = r));
    gw.upstream.on('GET /v1/events', (_req, res) => {
      upstreamClosed = closedEarly(res);
      arrived();
      // never answers
    });
    const socket = await rawExecute(gw, agent, agentId);
    await requested;
    socket.destroy();
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });
});

describe('§5.11 maximum stream duration', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      api: '    retries: 0',
      config: 'execution:\n  stream_max_duration: 300ms\n  stream_revocation_check: 100ms',
    });
  });
  afterAll(() => gw.close());

  it('a stream that outlives stream_max_duration ends with error stream_timeout, then done', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
    let upstreamClosed: Promise<'closed'> | undefined;
    gw.upstream.on('GET /v1/events', async (_req, res) => {
      upstreamClosed = closedEarly(res);
      sseHead(res);
      for (let i = 0; i < 100 && !res.destroyed; i++) {
        res.write(`data: tick ${i}\n\n`);
        await sleep(50);
      }
      res.end();
    });
    const started = Date.now();
    const events = await new SseReader(await openStream(gw, agent, agentId)).rest();
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1500);
    const tail = events.slice(-2);
    expect(tail.map((e) => e.event)).toEqual(['error', 'done']);
    expect(JSON.parse(tail[0]?.data ?? '').error).toBe('stream_timeout');
    expect(events.slice(0, -2).every((e) => e.event === 'data')).toBe(true);
    expect(events.length).toBeGreaterThan(2);
    expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
  });
});

describe('shutdown with an open stream', () => {
  it('ends the stream (error temporarily_unavailable, then done) instead of waiting for it', async () => {
    // Defaults: an hour of maximum duration, so only the shutdown can end this stream quickly.
    const gw = await startGateway({ api: '    retries: 0' });
    try {
      const { agent, agentId } = await gw.p.activeAgent(['stream_events']);
      let upstreamClosed: Promise<'closed'> | undefined;
      gw.upstream.on('GET /v1/events', (_req, res) => {
        upstreamClosed = closedEarly(res);
        sseHead(res);
        res.write('data: first\n\n');
      });
      const reader = new SseReader(await openStream(gw, agent, agentId));
      expect((await reader.next())?.data).toBe('first');
      const closing = gw.p.close();
      const events = await reader.rest();
      expect(events.map((e) => e.event)).toEqual(['error', 'done']);
      expect(JSON.parse(events[0]?.data ?? '').error).toBe('temporarily_unavailable');
      expect(await Promise.race([closing.then(() => 'closed'), sleep(3000).then(() => 'hung')])).toBe(
        'closed',
      );
      expect(await Promise.race([upstreamClosed, sleep(2000).then(() => 'still open')])).toBe('closed');
    } finally {
      await gw.close();
    }
  });
});
