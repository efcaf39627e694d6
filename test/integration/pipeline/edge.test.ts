/**
 * The edge, tried over real sockets: client addresses behind a load balancer (trusted proxies),
 * connection bounds (silent sockets shed, per-IP and header caps), failed authentications limited
 * per client IP and logged, deep or huge JSON answered 400/413, every 500 logged with its id.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { REFUSED_PER_PEER } from '../../../src/http/connection-limits.js';
import { createLogger } from '../../../src/log.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

function configWith(server: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-edge-')), 'proxy.yaml');
  writeFileSync(
    file,
    `server:\n${server}\napis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`,
  );
  return file;
}

function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: hostname, port: Number(port) }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Everything `s` receives until it closes. */
function received(s: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  return new Promise((resolve) => s.once('close', () => resolve(Buffer.concat(chunks).toString('utf8'))));
}

/** One keep-alive GET of discovery on `s`; the answer, read as far as its declared length. */
function exchangeRaw(
  s: Socket,
): Promise<{ status: number; headers: Record<string, string>; body: { error?: string; message: string } }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (c: Buffer): void => {
      text += c.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const body = text.slice(end + 4);
      if (Buffer.byteLength(body) < Number(headers['content-length'])) return;
      s.off('data', onData);
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(body) });
    };
    s.on('data', onData);
    s.once('error', reject);
    s.write('GET /.well-known/agent-configuration HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  });
}

function closed(s: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (s.destroyed || s.readableEnded) resolve();
    s.once('close', () => resolve());
  });
}

describe('client address behind a load balancer (server.trusted_proxies)', () => {
  it('per-IP limits count each forwarded client apart when the peer is trusted', async () => {
    p = await startProtocol({
      policy: 'rate_limits:\n  per_ip: 2/1m\n',
      overrides: { config: configWith('  trusted_proxies: ["127.0.0.1/32"]') },
    });
    const list = (client: string) =>
      p!.request('GET', '/capability/list', { headers: { 'x-forwarded-for': client } });
    expect((await list('198.51.100.1')).status).toBe(200);
    expect((await list('198.51.100.1')).status).toBe(200);
    expect((await list('198.51.100.1')).status).toBe(429);
    // Another client behind the same balancer is not locked out by the first one.
    expect((await list('198.51.100.2')).status).toBe(200);
  });

  it('an IPv6 client is budgeted by its /64: other addresses in it share the bucket, another /64 does not', async () => {
    p = await startProtocol({
      policy: 'rate_limits:\n  per_ip: 2/1m\n  failed_auth_per_ip: 2/1m\n  unknown_host_registration: null\n',
      overrides: { config: configWith('  trusted_proxies: ["127.0.0.1/32"]') },
    });
    const list = (client: string, token?: string) =>
      p!.request('GET', '/capability/list', {
        headers: { 'x-forwarded-for': client },
        ...(token ? { token } : {}),
      });
    expect((await list('2001:db8:1:2::1')).status).toBe(200);
    expect((await list('2001:db8:1:2:ffff:ffff:ffff:fffe')).status).toBe(200);
    const refused = await list('2001:DB8:1:2:0::abcd');
    expect(refused.status).toBe(429);
    expect(refused.body.message).toContain('2001:db8:1:2::/64');
    expect((await list('2001:db8:1:3::1')).status).toBe(200);

    // Failed authentications too: forged tokens from two addresses of one /64 use its budget up.
    const stranger = await generateTestKey();
    const { agentId } = await p.activeAgent(['list_pets']);
    const forged = await p.agentToken(stranger, agentId);
    for (const client of ['2001:db8:9:9::1', '2001:db8:9:9::2'])
      expect((await list(client, forged)).status).toBe(401);
    const locked = await list('2001:db8:9:9::3', forged);
    expect(locked.status).toBe(429);
    expect(locked.body.message).toContain('2001:db8:9:9::/64');
  });

  it('an untrusted peer cannot pick its address: X-Forwarded-For is ignored and it shares one bucket', async () => {
    p = await startProtocol({ policy: 'rate_limits:\n  per_ip: 2/1m\n' });
    const list = (client: string) =>
      p!.request('GET', '/capability/list', { headers: { 'x-forwarded-for': client } });
    expect((await list('198.51.100.1')).status).toBe(200);
    expect((await list('198.51.100.2')).status).toBe(200);
    expect((await list('198.51.100.3')).status).toBe(429);
  });

  it('a bad entry stops start-up with the key path', async () => {
    await expect(
      startProtocol({ overrides: { config: configWith('  trusted_proxies: ["10.0.0.0/40"]') } }),
    ).rejects.toThrow(/server\.trusted_proxies\[0\]: "10\.0\.0\.0\/40" is not an IP address/);
  });

  it('the default registration budget does not let five junk registrations lock new hosts out', async () => {
    p = await startProtocol();
    for (let i = 0; i < 6; i++) {
      const r = await p.register(await generateTestKey());
      expect(r.status, `registration ${i + 1}`).toBe(200);
    }
  });
});

describe('connection bounds', () => {
  it('sockets that send nothing are shed after headers_timeout, and service goes on', async () => {
    p = await startProtocol({ overrides: { config: configWith('  headers_timeout: 1s') } });
    const sockets = await Promise.all(Array.from({ length: 50 }, () => openSocket(p!.proxy.url)));
    const started = Date.now();
    // Service goes on while they sit there.
    expect((await p.request('GET', '/.well-known/agent-configuration')).status).toBe(200);
    await Promise.all(sockets.map(closed));
    // The sweep runs each second: shed within the timeout plus one sweep and some slack.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await p.request('GET', '/.well-known/agent-configuration')).status).toBe(200);
  });

  it('a connection over max_connections_per_ip is answered 429 rate_limited (§8.13), then closed', async () => {
    p = await startProtocol({ overrides: { config: configWith('  max_connections_per_ip: 3') } });
    const held = await Promise.all(Array.from({ length: 3 }, () => openSocket(p!.proxy.url)));
    const refused = await openSocket(p.proxy.url);
    const answer = await exchangeRaw(refused);
    await closed(refused);
    expect(answer.status).toBe(429);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.headers.connection).toBe('close');
    expect(answer.body).toMatchObject({ error: 'rate_limited' });
    expect(answer.body.message).toContain('server.max_connections_per_ip');
    // The held connections are still served.
    expect((await exchangeRaw(held[0]!)).status).toBe(200);
    for (const s of held) s.destroy();
    await Promise.all(held.map(closed));
    // Once the server has seen them close (a moment later), the client is served again.
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = await p.request('GET', '/.well-known/agent-configuration').then(
        (r) => r.status,
        () => new Promise<number>((resolve) => setTimeout(() => resolve(0), 20)),
      );
    }
    expect(status).toBe(200);
  });

  it('refused connections are bounded too: four per peer wait their answer, more are closed on arrival', async () => {
    p = await startProtocol({
      overrides: { config: configWith('  max_connections_per_ip: 1\n  internal_port: 0') },
    });
    const held = await openSocket(p.proxy.url);
    // Silent: each is refused and waits for its request, at most REFUSED_DEADLINE_MS (1 s).
    const waiting = await Promise.all(
      Array.from({ length: REFUSED_PER_PEER }, () => openSocket(p!.proxy.url)),
    );
    const extra = await openSocket(p.proxy.url);
    const extraBytes = received(extra);
    await closed(extra);
    expect(await extraBytes).toBe('');
    // The refused ones were kept: one that asks now still gets its answer.
    const [asking, ...silent] = waiting;
    expect((await exchangeRaw(asking!)).status).toBe(429);
    // The others never asked: each is closed at its deadline, without an answer.
    const started = Date.now();
    await Promise.all(silent.map(closed));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(silent.every((s) => s.bytesRead === 0)).toBe(true);
    // The served connection outlived them.
    expect((await exchangeRaw(held)).status).toBe(200);
    // Counted for the operator: four kept to be answered, one closed on arrival (the internal
    // listener has its own caps).
    const metrics = await (await fetch(`${p.proxy.internalUrl ?? ''}/metrics`)).text();
    const refused = (cap: string, outcome: string): number =>
      Number(
        new RegExp(`connections_refused_total\\{cap="${cap}",outcome="${outcome}"\\} (\\d+)`).exec(
          metrics,
        )?.[1],
      );
    expect(refused('max_connections_per_ip', 'answered')).toBe(REFUSED_PER_PEER);
    expect(refused('max_connections_per_ip', 'closed')).toBe(1);
    expect(refused('max_connections', 'answered')).toBe(0);
  });

  it('a trusted proxy is exempt from max_connections_per_ip, but not from max_connections', async () => {
    p = await startProtocol({
      overrides: {
        config: configWith(
          '  max_connections_per_ip: 1\n  max_connections: 3\n  trusted_proxies: ["127.0.0.1/32"]',
        ),
      },
    });
    const held = await Promise.all(Array.from({ length: 3 }, () => openSocket(p!.proxy.url)));
    // Three from one trusted address, over its per-address cap of 1: each is served.
    for (const s of held) expect((await exchangeRaw(s)).status).toBe(200);
    const answer = await exchangeRaw(await openSocket(p.proxy.url));
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: 'temporarily_unavailable' });
    for (const s of held) s.destroy();
  });

  it('a connection over max_connections is answered 503 temporarily_unavailable, then closed', async () => {
    p = await startProtocol({ overrides: { config: configWith('  max_connections: 2') } });
    const held = await Promise.all(Array.from({ length: 2 }, () => openSocket(p!.proxy.url)));
    const answer = await exchangeRaw(await openSocket(p.proxy.url));
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.body).toMatchObject({ error: 'temporarily_unavailable' });
    expect(answer.body.message).toContain('server.max_connections');
    expect((await exchangeRaw(held[1]!)).status).toBe(200);
    for (const s of held) s.destroy();
  });

  it('headers larger than max_header_bytes get 431, not a crash', async () => {
    p = await startProtocol({ overrides: { config: configWith('  max_header_bytes: 2048') } });
    const r = await fetch(`${p.proxy.url}/.well-known/agent-configuration`, {
      headers: { 'x-junk': 'a'.repeat(4096) },
    });
    expect(r.status).toBe(431);
    expect((await p.request('GET', '/.well-known/agent-configuration')).status).toBe(200);
  });
});

describe('failures that cost nothing', () => {
  it('failed authentications are limited per client IP: 429 before any token is verified, then refills', async () => {
    const clock = new TestClock();
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    p = await startProtocol({
      clock,
      logger,
      overrides: { mockUpstream: true },
      policy: 'rate_limits:\n  failed_auth_per_ip: 3/1m\n  unknown_host_registration: null\n',
    });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const stranger = await generateTestKey();
    for (let i = 0; i < 3; i++) {
      const forged = await p.agentToken(stranger, agentId, {}, p.executeLocation);
      const r = await p.request('POST', '/capability/execute', {
        token: forged,
        body: { capability: 'list_pets' },
      });
      expect(r.status).toBe(401);
    }
    // Budget used up: even the admin token and a valid agent token from this address wait.
    const refused = await p.execute(agent, agentId, 'list_pets');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('20');
    expect((await p.admin('GET', '/admin/agents')).status).toBe(429);
    clock.advance(20_000);
    expect((await p.execute(agent, agentId, 'list_pets')).status).not.toBe(429);
    const warnings = lines.filter((l) => l.msg === 'authentication failed');
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toMatchObject({ level: 'warn', client_ip: '127.0.0.1', error: 'invalid_jwt' });
  });

  it('failed admin authentications are logged at warn with the client IP, never the token', async () => {
    const lines: string[] = [];
    p = await startProtocol({ logger: createLogger('info', (line) => lines.push(line)) });
    const r = await p.request('GET', '/admin/agents', { token: 'guessed-admin-token-1234' });
    expect(r.status).toBe(401);
    const warning = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === 'authentication failed');
    expect(warning).toMatchObject({
      level: 'warn',
      route: 'GET /admin/agents',
      client_ip: '127.0.0.1',
      error: 'invalid_token',
    });
    expect(lines.join('\n')).not.toContain('guessed-admin-token-1234');
  });

  it('deeply nested JSON gets 400 with a JSON error, never 500', async () => {
    p = await startProtocol({
      policy: 'capabilities:\n  defaults: [list_pets]\n',
      overrides: { mockUpstream: true },
    });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const deep = `{"capability":"list_pets","arguments":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
    const token = await p.agentToken(agent, agentId, {}, p.executeLocation);
    const r = await p.request('POST', '/capability/execute', {
      token,
      rawBody: deep,
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_request', message: expect.stringMatching(/64 levels/) });
  });

  it('a body still on its way after the headers is waited for, and one that came with them taken at once', async () => {
    p = await startProtocol({
      policy: 'capabilities:\n  defaults: [list_pets]\n',
      overrides: { mockUpstream: true },
    });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const body = JSON.stringify({ capability: 'list_pets', arguments: {} });
    const statusOf = async (parts: readonly string[]): Promise<string> => {
      const token = await p!.agentToken(agent, agentId, {}, p!.executeLocation);
      const s = await openSocket(p!.proxy.url);
      let answer = '';
      s.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      const head =
        `POST /capability/execute HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n`;
      s.write(head + (parts[0] ?? ''));
      for (const part of parts.slice(1)) {
        // The rest after the proxy has read the head and gone through the steps before the body.
        await new Promise((resolve) => setTimeout(resolve, 50));
        s.write(part);
      }
      await closed(s);
      return answer.split('\r\n')[0] ?? '';
    };
    expect(await statusOf([body])).toBe('HTTP/1.1 200 OK');
    expect(await statusOf(['', body.slice(0, 10), body.slice(10)])).toBe('HTTP/1.1 200 OK');
  });

  it('a huge body gets 413 with a JSON error, declared or chunked', async () => {
    p = await startProtocol({
      policy: 'capabilities:\n  defaults: [list_pets]\n',
      overrides: { mockUpstream: true },
    });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const token = await p.agentToken(agent, agentId, {}, p.executeLocation);
    const big = JSON.stringify({ capability: 'list_pets', arguments: { a: 'x'.repeat(2 * 1024 * 1024) } });
    const r = await p.request('POST', '/capability/execute', {
      token,
      rawBody: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(413);
    expect(r.body.error).toBe('payload_too_large');
  });

  it('every 500 is logged with its request id, and the client learns nothing of the cause', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    p = await startProtocol({ logger, policy: 'rate_limits:\n  unknown_host_registration: null\n' });
    // The database goes away under the running server: a real internal failure.
    await p.proxy.protocol.store.close();
    const r = await p.register(await generateTestKey());
    expect(r.status).toBe(500);
    expect(r.body).toEqual({ error: 'internal_error', message: 'The server failed to process the request.' });
    const id = r.headers.get('x-request-id');
    const logged = lines.find((l) => l.msg === 'unhandled error' && l.request_id === id);
    expect(logged).toMatchObject({ level: 'error', route: 'POST /agent/register' });
  });
});
