/**
 * Issue 13's acceptance point, a database outage: the proxy stays up and live, `/readyz` says 503,
 * requests that need the database get `503 temporarily_unavailable` (JSON, Retry-After, no
 * connection details) within the configured connection and statement timeouts, and service
 * resumes by itself when the database is back, with every write acknowledged before the outage
 * still there and none refused during it half-applied. Start-up with the database down fails with
 * one clear line. A real PostgreSQL, stopped and started on the same port and data; the proxy runs
 * in this process over HTTP (an unhandled rejection would fail the run).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { GATEWAY_SPEC, startGateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import type { Reply, TestProtocol } from '../../helpers/protocol.js';
import { startTcpRelay } from '../../helpers/tcp-relay.js';

const CONNECTION_TIMEOUT_MS = 500;
const STATEMENT_TIMEOUT_MS = 500;
/**
 * The longest a request may wait on a database that does not answer: a connection, then one
 * statement (node-postgres gives up a second after the server's statement timeout, pg-pool.ts),
 * plus slack for a busy test machine.
 */
const BOUND_MS = CONNECTION_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 1_000 + 1_500;
const CONFIG = [
  'postgres:',
  '  pool_size: 4',
  `  connection_timeout_ms: ${CONNECTION_TIMEOUT_MS}`,
  `  statement_timeout_ms: ${STATEMENT_TIMEOUT_MS}`,
].join('\n');
/** Trust authentication ignores it; nothing the proxy prints or answers may contain it. */
const PASSWORD = 'pw-never-shown-7f3a';

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
});
afterAll(() => postgres.stop());

function withPassword(url: string, port?: number): string {
  const u = new URL(url);
  u.password = PASSWORD;
  if (port !== undefined) u.port = String(port);
  return u.href;
}

async function timed(request: () => Promise<Reply>): Promise<{ reply: Reply; ms: number }> {
  const started = performance.now();
  const reply = await request();
  return { reply, ms: performance.now() - started };
}

/** Polls (no fixed sleeps) until `check` holds, or fails naming `what`. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const readyz = async (p: TestProtocol): Promise<number> => (await p.request('GET', '/readyz')).status;

/** `agent-auth-proxy health ARGS`, in this process: its exit code and what it printed. */
async function health(args: readonly string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const io = { out: (t: string) => void (out += t), err: (t: string) => void (out += t) };
  const code = await runCli(['health', ...args], io);
  return { code, out };
}

/** 503 temporarily_unavailable as JSON, with Retry-After, revealing nothing of the connection. */
function expectUnavailable({ reply, ms }: { reply: Reply; ms: number }): void {
  expect(reply.status).toBe(503);
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  expect(reply.body).toEqual({ error: 'temporarily_unavailable', message: expect.any(String) });
  expect(reply.headers.get('retry-after')).toBe('5');
  const text = JSON.stringify(reply.body);
  for (const detail of [PASSWORD, '127.0.0.1', String(postgres.port), 'ECONN', 'postgres', 'timeout']) {
    expect(text).not.toContain(detail);
  }
  expect(ms).toBeLessThan(BOUND_MS);
}

/** An agent key's first registration under `host`, as the protocol client would send it. */
function registration(p: TestProtocol, host: TestKey): Promise<Reply> {
  return p.register(host, { capabilities: ['get_item'] });
}

describe('a database outage', () => {
  it('a stopped database: live, unready, 503 JSON; back by itself, with every acknowledged write', async () => {
    const lines: string[] = [];
    const gw = await startGateway({
      db: withPassword(await postgres.createDatabase()),
      config: CONFIG,
      logSink: (line) => void lines.push(line),
    });
    const { p } = gw;
    try {
      // Acknowledged before the outage: an active agent, a pre-registered host with a second
      // agent, and an execution whose record is committed.
      const active = await p.activeAgent(['get_item']);
      const spare = await p.linkedHost('bob');
      const second = await registration(p, spare.key);
      expect(second.status).toBe(200);
      expect((await p.execute(active.agent, active.agentId, 'get_item', { itemId: 'before' })).status).toBe(
        200,
      );
      await p.proxy.flushActivity();
      expect(await readyz(p)).toBe(200);

      await postgres.stopServer();
      // Even with the agent and its grants in the hot cache (§10.2), an execution is refused: its
      // jti must be recorded where every replica sees it (§4.6) before anything goes upstream.
      expectUnavailable(
        await timed(() => p.execute(active.agent, active.agentId, 'get_item', { itemId: 'during' })),
      );
      expect((await p.request('GET', '/healthz')).status).toBe(200);
      await until('/readyz says 503', async () => (await readyz(p)) === 503);
      expect((await p.request('GET', '/readyz')).body).toMatchObject({ error: 'not_ready' });
      // The image's HEALTHCHECK (health --live) keeps the container; the readiness check does not.
      const port = new URL(p.proxy.url).port;
      expect(await health(['--live', '--port', port])).toMatchObject({
        code: 0,
        out: `live: ${p.proxy.url}/healthz\n`,
      });
      const ready = await health(['--port', port]);
      expect(ready.code).toBe(1);
      expect(ready.out).toBe(`not ready: ${p.proxy.url}/readyz answered 503\n`);

      // Past the cache's TTL, whatever needs the database gets 503.
      p.clock.advance(6_000);
      expectUnavailable(
        await timed(() => p.execute(active.agent, active.agentId, 'get_item', { itemId: 'x' })),
      );
      const refusedKey = await generateTestKey();
      expectUnavailable(await timed(() => registration(p, spare.key)));
      expectUnavailable(await timed(() => p.admin('GET', '/admin/agents?limit=10')));
      // What needs nothing from the database is still served, limited per replica meanwhile.
      expect((await p.request('GET', '/.well-known/agent-configuration')).status).toBe(200);
      expect((await p.request('GET', '/capability/list')).status).toBe(200);
      expectUnavailable(await timed(() => p.admin('GET', `/admin/activity?agent_id=${active.agentId}`)));
      const preRegistration = { name: 'refused', public_key: refusedKey.publicJwk, user_id: 'carol' };
      expectUnavailable(await timed(() => p.admin('POST', '/admin/hosts', preRegistration)));
      // /metrics still answers (the pending-approvals gauge keeps its last value), and liveness.
      expect((await p.admin('GET', '/metrics')).status).toBe(200);
      expect((await p.request('GET', '/healthz')).status).toBe(200);

      await postgres.startServer();
      await until('/readyz says 200 again', async () => (await readyz(p)) === 200);
      const after = await p.execute(active.agent, active.agentId, 'get_item', { itemId: 'after' });
      expect(after.status).toBe(200);

      // Everything acknowledged before the outage is there.
      const agent = await p.admin('GET', `/admin/agents/${active.agentId}`);
      expect(agent.body).toMatchObject({ status: 'active' });
      const host = await p.admin('GET', `/admin/hosts/${spare.hostId}`);
      expect(host.status).toBe(200);
      // The registration refused during the outage left nothing: one agent, the second one.
      expect(host.body.agents).toEqual([expect.objectContaining({ agent_id: second.body.agent_id })]);
      const stored = await p.admin('GET', `/admin/agents/${second.body.agent_id as string}`);
      expect(stored.body).toMatchObject({ status: second.body.status });
      // The refused pre-registration was not applied: the same one now creates the host.
      expect((await p.admin('POST', '/admin/hosts', preRegistration)).status).toBe(201);
      // The executions before and after were recorded; the refused one never reached the upstream.
      const activity = await p.admin('GET', `/admin/activity?agent_id=${active.agentId}&limit=100`);
      const executions = (activity.body.activity as { type: string; outcome: string }[]).filter(
        (r) => r.type === 'execute',
      );
      expect(executions.map((r) => r.outcome)).toEqual(['success', 'success']);
      expect(gw.upstream.received('/v1/items/during')).toHaveLength(0);

      const log = lines.join('\n');
      expect(log).not.toContain(PASSWORD);
      expect(log).toContain('database unreachable: not ready until it answers');
      expect(log).toContain('database reachable again: ready');
    } finally {
      await postgres.startServer();
      await gw.close();
    }
  });

  it('a database that does not answer: each request ends within the connection and statement timeouts', async () => {
    const relay = await startTcpRelay({ host: '127.0.0.1', port: postgres.port });
    const gw = await startGateway({
      db: withPassword(await postgres.createDatabase(), relay.port),
      config: CONFIG,
    });
    const { p } = gw;
    try {
      const active = await p.activeAgent(['get_item']);
      const host = await generateTestKey();
      expect(await readyz(p)).toBe(200);

      relay.freeze();
      p.clock.advance(6_000); // past the hot cache: every request below needs the database
      const live = await timed(() => p.request('GET', '/healthz'));
      expect(live.reply.status).toBe(200);
      await until('/readyz says 503', async () => (await readyz(p)) === 503);
      // A probe is never held longer than the readiness ping's own bound (storage/readiness.ts).
      const probe = await timed(() => p.request('GET', '/readyz'));
      expect(probe.reply.status).toBe(503);
      expect(probe.ms).toBeLessThan(1_500);
      const answers = await Promise.all([
        timed(() => p.execute(active.agent, active.agentId, 'get_item', { itemId: 'x' })),
        timed(() => registration(p, host)),
        timed(() => p.admin('GET', '/admin/agents?limit=10')),
        timed(() => p.admin('GET', `/admin/agents/${active.agentId}`)),
      ]);
      for (const answer of answers) expectUnavailable(answer);

      relay.thaw();
      await until('/readyz says 200 again', async () => (await readyz(p)) === 200);
      expect((await p.execute(active.agent, active.agentId, 'get_item', { itemId: 'y' })).status).toBe(200);
      expect((await registration(p, host)).status).toBe(200);
    } finally {
      relay.thaw();
      await gw.close();
      await relay.close();
    }
  });

  it('start-up with the database down: exit code 2 and one line naming it, without its password', async () => {
    // Nothing listens on port 1: refused at once.
    const refused = await serveOn(withPassword(await postgres.createDatabase(), 1));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^agent-auth-proxy: database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/t_\w+ cannot be reached: \S/,
    );
    // A database that does not answer: given up on after the connection timeout.
    const relay = await startTcpRelay({ host: '127.0.0.1', port: postgres.port });
    relay.freeze();
    const silent = await serveOn(withPassword(await postgres.createDatabase(), relay.port)).finally(() =>
      relay.close(),
    );
    expect(silent.code).toBe(2);
    expect(silent.stderr).toMatch(/cannot be reached: database unavailable: timeout expired$/m);
    expect(silent.ms).toBeLessThan(CONNECTION_TIMEOUT_MS + 1_500);
    for (const { stderr } of [refused, silent]) {
      expect(stderr).not.toContain(PASSWORD);
      expect(stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});

/** `agent-auth-proxy serve` in this process with the database at `url`: its exit code and stderr. */
async function serveOn(url: string): Promise<{ code: number; stderr: string; ms: number }> {
  const config = join(mkdtempSync(join(tmpdir(), 'aap-outage-')), 'proxy.yaml');
  writeFileSync(
    config,
    [
      'apis:',
      `  - spec: ${JSON.stringify(GATEWAY_SPEC)}`,
      '    upstream: http://127.0.0.1:9/v1',
      CONFIG,
    ].join('\n'),
  );
  let stderr = '';
  const started = performance.now();
  const code = await runCli(['serve', '--config', config, '--port', '0', '--db', url], {
    out: () => undefined,
    err: (text) => void (stderr += text),
  });
  return { code, stderr, ms: performance.now() - started };
}
