/**
 * `serve --workers 2` (issue 14): the built CLI as a primary and two worker processes on one
 * port, on a real PostgreSQL. Each request goes over a new connection, which the primary hands to
 * the workers in turn; every `request` log line names the worker that answered, so the tests see
 * that both took part without any header telling clients which process they reached. A jti
 * accepted once is refused by both workers (§4.6); a budget of 10 an hour admits 10 of 30 over
 * both (§8.13); /metrics answers both workers' counts whichever answers; a worker killed with
 * SIGKILL is replaced and service goes on; SIGHUP reloads both; SIGTERM drains both and the
 * primary exits 0; workers that keep failing to start (the database stopped) end the primary
 * after five tries. With SQLite serve refuses to start (exit 2; the flag's own checks are in
 * test/integration/cli.test.ts), and a first worker that cannot start ends the primary with its
 * code.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, ensureBuiltCli } from '../../helpers/cli-process.js';
import { agentJwt } from '../../helpers/keys.js';
import {
  ADMIN_TOKEN,
  EXECUTE_AUD,
  PETSTORE,
  startReplicaCluster,
  until,
  type Replica,
  type ReplicaCluster,
} from '../../helpers/replicas.js';
import { activeAgent, alive, freshRequest, parentOf, type FreshReply } from '../../helpers/workers.js';

const run = promisify(execFile);

const INVENTORY_PER_HOUR = 10;
const POLICY = `
capabilities:
  defaults: [get_pet, get_inventory]
rate_limits:
  per_ip: null
  unknown_host_registration: null
  approval_requests_per_user: null
  per_capability:
    get_inventory: "${INVENTORY_PER_HOUR}/1h"
`;

let set: ReplicaCluster;
let proxy: Replica;

beforeAll(async () => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  set = await startReplicaCluster({
    policy: POLICY,
    count: 1,
    args: ['--workers', '2'],
    ready: 'workers listening',
  });
  [proxy] = set.replicas as [Replica];
});
afterAll(() => set?.close());

/** One request over a connection of its own (closed after it), so the primary picks a worker for it. */
function fresh(method: string, path: string, token?: string, body?: unknown): Promise<FreshReply> {
  return freshRequest(proxy.url, method, path, {
    ...(token ? { token } : {}),
    ...(body !== undefined ? { body } : {}),
  });
}

/** The primary's `worker started` lines: worker id and pid, in order. */
function startedWorkers(): { id: number; pid: number }[] {
  return proxy
    .logs()
    .filter((l) => l.msg === 'worker started' && l.worker === 0)
    .map((l) => ({ id: l.id as number, pid: l.pid as number }));
}

/** The workers whose `request` lines match `path` and `status`. */
function workersThatAnswered(path: string, status: number): Set<number> {
  return new Set(
    proxy
      .logs()
      .filter((l) => l.msg === 'request' && l.path === path && l.status === status)
      .map((l) => l.worker as number),
  );
}

/** Waits until both workers' `request` lines for `path` and `status` are in (a line may trail its answer). */
async function bothWorkersLogged(path: string, status: number): Promise<void> {
  await until(
    () => Promise.resolve(workersThatAnswered(path, status).size),
    (n) => n === 2,
  );
}

describe('serve --workers 2 on PostgreSQL', () => {
  it('runs two worker processes under the primary, each logging with its worker id', () => {
    const workers = startedWorkers();
    expect(workers).toHaveLength(2);
    for (const { pid } of workers) expect(parentOf(pid)).toBe(proxy.child.pid);
    const listening = proxy.logs().filter((l) => l.msg === 'listening');
    expect(new Set(listening.map((l) => l.worker))).toEqual(new Set(workers.map((w) => w.id)));
  });

  it('serves requests on both workers; a jti accepted once is refused by both (§4.6)', async () => {
    const { agent, agentId } = await activeAgent(proxy, ['get_pet']);
    const token = await agentJwt(agent, agentId, EXECUTE_AUD);
    const call = { capability: 'get_pet', arguments: { petId: 7 } };
    expect((await fresh('POST', '/capability/execute', token, call)).status).toBe(200);
    // Eight replays over eight new connections: the primary deals them to the workers in turn.
    const replays = [];
    for (let i = 0; i < 8; i++) replays.push(await fresh('POST', '/capability/execute', token, call));
    for (const replay of replays) {
      expect(replay.status).toBe(401);
      expect(replay.body.error).toBe('invalid_jwt');
      expect(replay.body.message).toMatch(/already used/);
    }
    await bothWorkersLogged('/capability/execute', 401);
    expect(set.upstream.received('/v1/pets/7')).toHaveLength(1);
  });

  it('admits exactly 10 of 30 calls under a 10-an-hour budget across both workers (§8.13)', async () => {
    const { agent, agentId } = await activeAgent(proxy, ['get_inventory']);
    const calls = await Promise.all(
      Array.from({ length: 30 }, async () =>
        fresh('POST', '/capability/execute', await agentJwt(agent, agentId, EXECUTE_AUD), {
          capability: 'get_inventory',
          arguments: {},
        }),
      ),
    );
    const statuses = calls.map((c) => c.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(INVENTORY_PER_HOUR);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - INVENTORY_PER_HOUR);
    // Both workers took calls, so a budget of their own each would have admitted more than 10.
    // Which worker's calls came first (and were admitted) is up to the scheduler.
    await until(
      () =>
        Promise.resolve(
          new Set([
            ...workersThatAnswered('/capability/execute', 200),
            ...workersThatAnswered('/capability/execute', 429),
          ]).size,
        ),
      (n) => n === 2,
    );
  });

  it('answers /metrics with both workers counted, whichever worker answers', async () => {
    for (let i = 0; i < 2; i++) {
      const res = await fresh('GET', '/metrics', ADMIN_TOKEN);
      expect(res.status).toBe(200);
      const text = res.body as string;
      expect(text).toContain(
        `agent_auth_proxy_executions_total{capability="get_inventory",outcome="success"} ${INVENTORY_PER_HOUR}`,
      );
      expect(text).toContain(
        `agent_auth_proxy_executions_total{capability="get_inventory",outcome="rate_limited"} ${30 - INVENTORY_PER_HOUR}`,
      );
    }
    await bothWorkersLogged('/metrics', 200);
  });

  it('replaces a worker killed with SIGKILL, and service goes on', async () => {
    const [victim] = startedWorkers();
    process.kill(victim!.pid, 'SIGKILL');
    const { result: workers } = await until(
      () => Promise.resolve(startedWorkers()),
      (w) => w.length === 3,
    );
    const replacement = workers[2]!;
    expect(proxy.logs().some((l) => l.msg === 'worker exited; restarting' && l.pid === victim!.pid)).toBe(
      true,
    );
    expect(parentOf(replacement.pid)).toBe(proxy.child.pid);
    expect(alive(victim!.pid)).toBe(false);
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await fresh('GET', '/.well-known/agent-configuration'));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    await until(
      () => Promise.resolve(workersThatAnswered('/.well-known/agent-configuration', 200)),
      (ids) => ids.has(replacement.id),
    );
  });

  it('reloads every worker on SIGHUP to the primary', async () => {
    const serving = startedWorkers().filter((w) => alive(w.pid));
    proxy.child.kill('SIGHUP');
    await until(
      () =>
        Promise.resolve(
          new Set(
            proxy
              .logs()
              .filter((l) => l.msg === 'reloaded')
              .map((l) => l.worker),
          ),
        ),
      (reloaded) => serving.every((w) => reloaded.has(w.id)),
    );
  });

  it('drains on SIGTERM: every worker exits, then the primary, with code 0', async () => {
    const workers = startedWorkers()
      .map((w) => w.pid)
      .filter(alive);
    expect(workers).toHaveLength(2);
    proxy.child.kill('SIGTERM');
    expect(await proxy.exited).toEqual({ code: 0, signal: null });
    for (const pid of workers) expect(alive(pid)).toBe(false);
    expect(proxy.logs().filter((l) => l.msg === 'worker exited; restarting')).toHaveLength(1);
  });
});

describe('serve --workers gives up on workers that keep failing to start', () => {
  it('stops and exits with the worker’s code after five restarts in a row fail (the database gone)', async () => {
    const again = await set.start();
    const started = again.logs().filter((l) => l.msg === 'worker started');
    expect(started).toHaveLength(2);
    await set.postgres.stopServer();
    try {
      process.kill(started[0]!.pid as number, 'SIGKILL');
      // The last worker's own code: 2, the database cannot be reached.
      expect(await again.exited).toEqual({ code: 2, signal: null });
      const failures = again.logs().filter((l) => l.msg === 'worker failed to start; stopping');
      expect(failures).toEqual([expect.objectContaining({ worker: 0, failures: 5 })]);
      // The kill, then four failed starts: the back-off doubles each time.
      const delays = again
        .logs()
        .filter((l) => l.msg === 'worker exited; restarting')
        .map((l) => l.restart_in_ms);
      expect(delays).toEqual([100, 200, 400, 800, 1600]);
      expect(again.stderr()).toContain('cannot be reached');
    } finally {
      await set.postgres.startServer();
    }
  }, 60_000);
});

describe('serve --workers refuses what it cannot run', () => {
  const serve = async (args: readonly string[]): Promise<{ code: number; stderr: string }> => {
    try {
      await run(process.execPath, [CLI, 'serve', '--spec', PETSTORE, '--port', '0', ...args], {
        cwd: ROOT,
        timeout: 30_000,
      });
      return { code: 0, stderr: '' };
    } catch (err) {
      const failed = err as { code: number; stderr: string };
      return { code: failed.code, stderr: failed.stderr };
    }
  };

  it('refuses more than one worker on SQLite, naming the fix', async () => {
    const { code, stderr } = await serve(['--workers', '2', '--db', ':memory:']);
    expect(code).toBe(2);
    expect(stderr).toContain(
      '--workers 2 needs a shared store: replay and rate state live in one process with SQLite; use --db postgres://',
    );
  });

  it('exits with the worker’s code, after one message, when the first worker cannot start', async () => {
    const port = await closedPort();
    const { code, stderr } = await serve([
      '--workers',
      '2',
      '--db',
      `postgres://postgres@127.0.0.1:${port}/x`,
    ]);
    expect(code).toBe(2);
    expect(stderr.match(/cannot be reached/g)).toHaveLength(1);
  });
});

/** A loopback port nothing listens on. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
