/**
 * `serve --workers 2` at its edges, on a real PostgreSQL (regressions from a review of issue 14):
 * a worker starting while a reload is asked (SIGHUP, --watch) ends up with the new policy;
 * /metrics answers while a worker starts or hangs, saying how many workers reported, and its
 * counters do not go backwards when a worker restarts; a SIGTERM to every process (systemd's
 * KillMode=control-group) still drains; a SIGHUP while draining ends nothing (one process too);
 * a Ctrl-C while the workers start exits 0. A worker is kept starting by holding the advisory lock
 * a proxy migrates under: it has read its files and listens, but does not serve. One cluster; the
 * tests that end a primary start another on the same database.
 */
import { writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli } from '../../helpers/cli-process.js';
import { agentJwt } from '../../helpers/keys.js';
import {
  ADMIN_TOKEN,
  EXECUTE_AUD,
  startReplicaCluster,
  until,
  type Replica,
  type ReplicaCluster,
} from '../../helpers/replicas.js';
import {
  activeAgent,
  alive,
  childrenOf,
  freshRequest,
  holdMigrationLock,
  type FreshReply,
} from '../../helpers/workers.js';

const POLICY = (modes: string): string => `
modes: [${modes}]
capabilities:
  defaults: [get_pet]
rate_limits:
  per_ip: null
  unknown_host_registration: null
  approval_requests_per_user: null
`;
const BEFORE = 'delegated';
const AFTER = 'delegated, autonomous';

let set: ReplicaCluster;
let proxy: Replica;

beforeAll(async () => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  set = await startReplicaCluster({
    policy: POLICY(BEFORE),
    count: 1,
    args: ['--workers', '2'],
    ready: 'workers listening',
  });
  [proxy] = set.replicas as [Replica];
}, 60_000);
afterAll(() => set?.close());

/** The primary's `worker started` lines so far: worker id and pid, in order. */
function startedWorkers(primary: Replica): { id: number; pid: number }[] {
  return primary
    .logs()
    .filter((l) => l.msg === 'worker started' && l.worker === 0)
    .map((l) => ({ id: l.id as number, pid: l.pid as number }));
}

/** Kills a serving worker of `primary` with SIGKILL; resolves once the primary restarts it. */
async function killWorker(primary: Replica): Promise<void> {
  const restarts = (): number => primary.logs().filter((l) => l.msg === 'worker exited; restarting').length;
  const before = restarts();
  const victim = startedWorkers(primary).find((w) => alive(w.pid))!;
  process.kill(victim.pid, 'SIGKILL');
  await until(
    () => Promise.resolve(restarts()),
    (n) => n > before,
  );
}

/** Discovery's `modes` from six requests over new connections: the workers answer in turn. */
async function modesSeen(primary: Replica): Promise<string[]> {
  const seen = [];
  for (let i = 0; i < 6; i++) {
    const reply = await freshRequest(primary.url, 'GET', '/.well-known/agent-configuration');
    seen.push(reply.status === 200 ? (reply.body.modes as string[]).join(', ') : `status ${reply.status}`);
  }
  return seen;
}

/** /metrics over new connections until one answers 200 (a worker still starting or hung answers not, or not in time). */
async function scrape(primary: Replica, timeoutMs = 4_000): Promise<{ text: string; elapsedMs: number }> {
  const { result, elapsedMs } = await until(
    () =>
      freshRequest(primary.url, 'GET', '/metrics', { token: ADMIN_TOKEN, timeoutMs: 2_500 }).catch(
        (err: unknown): FreshReply => ({ status: 0, body: String(err) }),
      ),
    (reply) => reply.status === 200,
    timeoutMs,
  );
  return { text: result.body as string, elapsedMs };
}

/** A sample's value in an exposition, by its series and labels as written (`name{a="b"}`). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The counter and histogram samples of an exposition, by series. */
function cumulativeSamples(text: string): Map<string, number> {
  const cumulative = new Set(
    [...text.matchAll(/^# TYPE (\S+) (counter|histogram)$/gm)].map((m) => m[1] as string),
  );
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m) continue;
    const family = m[1]!.replace(/_(bucket|sum|count)$/, '');
    if (cumulative.has(m[1]!) || cumulative.has(family)) samples.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return samples;
}

/**
 * A call to get_pet held at the upstream until the test lets it go: the returned promise is its
 * answer; `arrived` resolves once the upstream has it (the call is in flight).
 */
async function heldCall(primary: Replica): Promise<{
  answer: Promise<FreshReply>;
  arrived: Promise<void>;
  letGo: () => void;
}> {
  const { agent, agentId } = await activeAgent(primary, ['get_pet']);
  const token = await agentJwt(agent, agentId, EXECUTE_AUD);
  let letGo = (): void => undefined;
  let arrive = (): void => undefined;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  set.upstream.on('GET /v1/pets/7', async (_req, res: ServerResponse) => {
    arrive();
    await gate;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":7,"name":"held"}');
  });
  const answer = freshRequest(primary.url, 'POST', '/capability/execute', {
    token,
    body: { capability: 'get_pet', arguments: { petId: 7 } },
  }).catch((err: unknown): FreshReply => ({ status: 0, body: String(err) }));
  return { answer, arrived, letGo };
}

/**
 * Readiness over new connections until two in a row answer 503 (the stop reaches each process a
 * moment after the signal is sent; two connections reach both workers), then `count` more
 * answers, each 503 (still draining). A worker with nothing in flight ends its drain at once, and
 * a connection handed to it as it exits is reset: that is "not ready" too (0).
 */
async function drainingAnswers(primary: Replica, count: number): Promise<void> {
  const readiness = async (): Promise<number> =>
    (await freshRequest(primary.url, 'GET', '/readyz').catch(() => ({ status: 0 }))).status;
  const notReady = (status: number): boolean => status === 503 || status === 0;
  await until(
    async () => [await readiness(), await readiness()],
    (statuses) => statuses.every(notReady),
  );
  for (let i = 0; i < count; i++) expect([503, 0]).toContain(await readiness());
}

describe('serve --workers 2: metrics', () => {
  it('answers /metrics within the per-worker bound while a worker hangs, saying 1 of 2 reported', async () => {
    const [hung] = startedWorkers(proxy);
    process.kill(hung!.pid, 'SIGSTOP');
    try {
      const { text } = await scrape(proxy);
      expect(sample(text, 'agent_auth_proxy_workers_reported')).toBe(1);
      expect(sample(text, 'agent_auth_proxy_workers_expected')).toBe(2);
    } finally {
      process.kill(hung!.pid, 'SIGCONT');
    }
    const { text } = await scrape(proxy);
    expect(sample(text, 'agent_auth_proxy_workers_reported')).toBe(2);
  });

  it('never counts backwards when a worker restarts: the dead worker’s last counts stay in the sums', async () => {
    await modesSeen(proxy);
    const before = cumulativeSamples((await scrape(proxy)).text);
    const discovery = [...before.keys()].find(
      (k) => k.startsWith('agent_auth_proxy_requests_total{') && k.includes('agent-configuration'),
    );
    expect(before.get(discovery!)).toBeGreaterThanOrEqual(6);
    await killWorker(proxy);
    const started = startedWorkers(proxy).length;
    await until(
      () => Promise.resolve(startedWorkers(proxy).length),
      (n) => n > started,
    );
    const after = cumulativeSamples((await scrape(proxy)).text);
    const backwards = [...before].filter(([series, value]) => (after.get(series) ?? 0) < value);
    expect(backwards).toEqual([]);
  });
});

describe('serve --workers 2: a worker starting during a reload', () => {
  it('gets the policy of a SIGHUP asked while it starts; /metrics answers meanwhile', async () => {
    const lock = await holdMigrationLock(set.db);
    try {
      await killWorker(proxy);
      // The replacement has read the policy and waits in its migration.
      await until(
        () => lock.waiting(),
        (n) => n === 1,
      );
      const { text } = await scrape(proxy, 3_000);
      expect(sample(text, 'agent_auth_proxy_workers_reported')).toBe(1);
      expect(sample(text, 'agent_auth_proxy_workers_expected')).toBe(2);
      writeFileSync(set.policyFile, POLICY(AFTER));
      const reloads = proxy.logs().filter((l) => l.msg === 'reloaded').length;
      proxy.child.kill('SIGHUP');
      await until(
        () => Promise.resolve(proxy.logs().filter((l) => l.msg === 'reloaded').length),
        (n) => n > reloads,
      );
    } finally {
      await lock.release();
    }
    const started = startedWorkers(proxy).length;
    await until(
      () => Promise.resolve(startedWorkers(proxy).length),
      (n) => n > started,
    );
    await until(
      () => modesSeen(proxy),
      (modes) => modes.every((m) => m === AFTER),
    );
  });
});

describe('serve --workers 2: signals while draining', () => {
  it('a SIGHUP while draining ends nothing: the call in flight finishes, exit 0', async () => {
    const call = await heldCall(proxy);
    await call.arrived;
    proxy.child.kill('SIGTERM');
    await drainingAnswers(proxy, 2);
    proxy.child.kill('SIGHUP');
    await drainingAnswers(proxy, 4);
    call.letGo();
    expect((await call.answer).status).toBe(200);
    expect(await proxy.exited).toEqual({ code: 0, signal: null });
  });

  it('a SIGTERM to every process (KillMode=control-group) drains: the call in flight finishes, exit 0', async () => {
    const primary = await set.start();
    const workers = childrenOf(primary.child.pid!);
    expect(workers).toHaveLength(2);
    const call = await heldCall(primary);
    await call.arrived;
    for (const pid of [primary.child.pid!, ...workers]) process.kill(pid, 'SIGTERM');
    await drainingAnswers(primary, 4);
    call.letGo();
    expect((await call.answer).status).toBe(200);
    expect(await primary.exited).toEqual({ code: 0, signal: null });
    expect(primary.logs().filter((l) => l.msg === 'worker did not exit cleanly')).toEqual([]);
  });

  it('a second SIGTERM to the primary ends the workers at once: the call is cut, exit 1', async () => {
    const primary = await set.start();
    const call = await heldCall(primary);
    await call.arrived;
    primary.child.kill('SIGTERM');
    await drainingAnswers(primary, 2);
    primary.child.kill('SIGTERM');
    expect((await call.answer).status).toBe(0);
    expect(await primary.exited).toEqual({ code: 1, signal: null });
    call.letGo();
  });

  it('one process: a SIGHUP while draining ends nothing, and a second SIGTERM still ends it at once', async () => {
    const single = await set.start({ args: [], ready: 'listening' });
    const call = await heldCall(single);
    await call.arrived;
    single.child.kill('SIGTERM');
    await drainingAnswers(single, 2);
    single.child.kill('SIGHUP');
    await drainingAnswers(single, 4);
    call.letGo();
    expect((await call.answer).status).toBe(200);
    expect(await single.exited).toEqual({ code: 0, signal: null });

    const again = await set.start({ args: [], ready: 'listening' });
    const cut = await heldCall(again);
    await cut.arrived;
    again.child.kill('SIGTERM');
    await drainingAnswers(again, 2);
    again.child.kill('SIGTERM');
    expect(await again.exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect((await cut.answer).status).toBe(0);
    cut.letGo();
  });
});

describe('serve --workers 2: start-up', () => {
  it('a worker starting while --watch sees the policy change reloads once its watch begins', async () => {
    writeFileSync(set.policyFile, POLICY(BEFORE));
    const primary = await set.start({ args: ['--workers', '2', '--watch'] });
    const lock = await holdMigrationLock(set.db);
    try {
      await killWorker(primary);
      await until(
        () => lock.waiting(),
        (n) => n === 1,
      );
      const reloads = primary.logs().filter((l) => l.msg === 'reloaded').length;
      writeFileSync(set.policyFile, POLICY(AFTER));
      // The worker that serves sees it through its watch.
      await until(
        () => Promise.resolve(primary.logs().filter((l) => l.msg === 'reloaded').length),
        (n) => n > reloads,
      );
    } finally {
      await lock.release();
    }
    const started = startedWorkers(primary).length;
    await until(
      () => Promise.resolve(startedWorkers(primary).length),
      (n) => n > started,
    );
    await until(
      () => modesSeen(primary),
      (modes) => modes.every((m) => m === AFTER),
    );
    await primary.stop();
  });

  it('a Ctrl-C while the first worker starts stops everything with exit 0', async () => {
    const lock = await holdMigrationLock(set.db);
    try {
      const starting = set.start();
      const primary = [...set.children].at(-1)!;
      const { result: workers } = await until(
        () => Promise.resolve(childrenOf(primary.pid!)),
        (pids) => pids.length === 1,
      );
      await until(
        () => lock.waiting(),
        (n) => n === 1,
      );
      // The whole foreground process group gets it; the worker first, the worst order.
      process.kill(workers[0]!, 'SIGINT');
      primary.kill('SIGINT');
      await expect(starting).rejects.toThrow(/exited before listening/);
      expect({ code: primary.exitCode, signal: primary.signalCode }).toEqual({ code: 0, signal: null });
    } finally {
      await lock.release();
    }
  });
});
