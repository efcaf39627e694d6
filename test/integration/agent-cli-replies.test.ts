/**
 * How the `agent` and `admin` CLIs read what a server answers: an event stream is written out as
 * it arrives (a stream may last an hour, longer than any timeout or memory should hold it); an
 * answer that breaks off, or is larger than 1 MiB, is a one-line error, not a stack trace; and
 * `--wait` holds to its own bounds (an hour, a poll a minute at least) whatever a server says.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import type { Session } from '../../src/cli/agent/session.js';
import { waitForApproval } from '../../src/cli/agent/wait.js';
import { startGateway, type Gateway } from '../helpers/gateway.js';

const dir = mkdtempSync(join(tmpdir(), 'aap-cli-replies-'));
const runtime = { now: Date.now, sleep: () => Promise.resolve() };

async function run(args: string[], out: (text: string) => void = () => undefined) {
  let stderr = '';
  const code = await runCli(args, { out, err: (t) => void (stderr += t) }, runtime);
  return { code, stderr };
}

describe('an event stream through agent execute', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ api: '    retries: 0', config: 'execution:\n  stream_max_duration: 5m' });
  });
  afterAll(() => gw.close());

  it('is written out event by event while it lasts, not held until it ends', async () => {
    const file = join(dir, 'streamer.json');
    await run(['agent', 'init', '--file', file]);
    await run([
      'agent',
      'register',
      '--file',
      file,
      '--url',
      gw.p.proxy.url,
      '--capability',
      'stream_events',
    ]);
    const open = (await gw.p.admin('GET', '/admin/approvals')).body.approvals[0];
    await gw.p.admin('POST', `/admin/approvals/${open.id}/approve`, { user_id: 'alice' });
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    gw.upstream.on('GET /v1/events', async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      await held;
      res.end('event: done\ndata: {}\n\n');
    });
    let printed = '';
    let firstSeen!: () => void;
    const first = new Promise<void>((resolve) => (firstSeen = resolve));
    const running = run(['agent', 'execute', 'stream_events', '--file', file], (text) => {
      printed += text;
      if (printed.includes('"n":1')) firstSeen();
    });
    // The first event is out while the upstream still holds the stream open.
    await first;
    expect(printed).not.toContain('event: done');
    finish();
    expect((await running).code).toBe(0);
    expect(printed).toContain('event: done');
  });
});

describe('answers that break off or are too large', () => {
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      if (req.url === '/.well-known/agent-configuration' && req.headers['x-test'] !== 'huge') {
        // Large: a discovery document of 2 MiB.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ issuer: url, endpoints: {}, pad: 'A'.repeat(2 * 1024 * 1024) }));
        return;
      }
      // Anything else: the headers, the start of a body, then the connection is gone.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"approvals":[');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('agent: a 2 MiB discovery document is refused, naming the limit', async () => {
    const file = join(dir, 'large.json');
    await run(['agent', 'init', '--file', file]);
    const { code, stderr } = await run(['agent', 'register', '--file', file, '--url', url]);
    expect(code).not.toBe(0);
    expect(stderr).toContain('larger than 1 MiB');
    expect(stderr).not.toContain('unexpected error');
  });

  it('admin: an answer that breaks off is a connection error, not a bug report', async () => {
    const { code, stderr } = await run([
      'admin',
      'approvals',
      'list',
      '--url',
      url,
      '--token',
      'admin-token-0123456789abcdef',
    ]);
    expect(code).not.toBe(0);
    expect(stderr).toContain('broke off');
    expect(stderr).not.toContain('unexpected error');
  });
});

describe('--wait against a server that asks for too much', () => {
  let server: Server;
  let base = '';
  let polls = 0;
  beforeAll(async () => {
    // Every status answer: still pending, for a billion seconds more, poll every 1e8 seconds.
    server = createServer((req, res) => {
      req.resume();
      polls += 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'pending', approval: { interval: 1e8, expires_in: 1e9 } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('waits an hour at the most, polling at least once a minute', async () => {
    let now = 0;
    const slept: number[] = [];
    const session = {
      discovery: { issuer: base, defaultLocation: `${base}/capability/execute`, endpoints: {} },
      runtime: {
        now: () => now,
        sleep: (ms: number) => {
          slept.push(ms);
          now += ms;
          return Promise.resolve();
        },
      },
      agentId: () => 'agt_1',
      hostCredential: () => 'host.jwt.token',
    } as unknown as Session;
    const waited = await waitForApproval(session, { interval: 1e8, expires_in: 1e9 }, () => false);
    expect(waited.timedOut).toBe(true);
    expect(now).toBe(3_600_000);
    expect(Math.max(...slept)).toBe(60_000);
    expect(polls).toBe(60);
  });
});
