/**
 * Two-replica benchmark (issue 13): the execute workload of execute.ts (GET one pet through
 * `POST /capability/execute`, a fresh agent JWT per request, every check on) sent three ways:
 * directly to the upstream (the baseline); through one proxy on SQLite; through two proxy processes
 * sharing one PostgreSQL, the load generator alternating requests between them as a Service would.
 * At concurrency 1 (the added p50) and 32 (throughput); the routes take turns in rounds, so noise
 * from outside lands on all of them alike. Every request must be answered 200.
 *
 * PostgreSQL is the tests' server (test/helpers/postgres.ts: fsync and synchronous_commit off, so
 * commits cost no disk flush); the proxies keep the default pool (postgres.pool_size 10 each). The
 * load generator, the upstream, the proxies and PostgreSQL's processes all share the machine's
 * cores, so each route also reports the CPU time each kind of process spent per request (user +
 * system, from /proc; PostgreSQL's: the postmaster and every process it forked).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Pool } from 'undici';
import { DB_PASSWORD_ENV } from '../src/config/database.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../test/helpers/keys.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
import {
  benchPolicy,
  freePort,
  inTurns,
  loadPool,
  processCpuSeconds,
  ready,
  startBenchUpstream,
  TICKS_PER_SECOND,
} from './execute.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const REPLICAS = 2;

export type Route = 'direct' | 'sqlite' | 'postgres';
export const ROUTES: readonly Route[] = ['direct', 'sqlite', 'postgres'];

/** CPU time (user + system) per request, µs, by kind of process; a kind a route does not use is absent. */
export interface CpuPerRequest {
  readonly loadgen: number;
  /** Every proxy process of the route together. */
  readonly proxies?: number;
  readonly postgres?: number;
  readonly upstream: number;
}

export interface RouteResult {
  readonly requests: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Absent off Linux. */
  readonly cpuUsPerRequest?: CpuPerRequest;
}

export interface ReplicasResult {
  readonly replicas: number;
  readonly c1: Readonly<Record<Route, RouteResult>>;
  readonly c32: Readonly<Record<Route, RouteResult>>;
}

export interface Call {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string;
}

/** One way to send the call: request i goes to pools[i % pools.length]. */
export interface Target {
  readonly pools: readonly Pool[];
  readonly upstreamPid: number;
  /** Each proxy's process; its CPU counts its children's too (the workers of `--workers`). */
  readonly proxyPids: readonly number[];
  readonly usesPostgres: boolean;
  /** The calls of a phase of n requests (JWTs signed here, before the timed part). */
  calls(n: number): Promise<Call[]>;
}

/** The baseline: GET one pet straight from the upstream, no gateway. */
export function directTarget(pool: Pool, upstreamPid: number): Target {
  return {
    pools: [pool],
    upstreamPid,
    proxyPids: [],
    usesPostgres: false,
    calls: (n) =>
      Promise.resolve(
        Array.from({ length: n }, () => ({
          path: '/v1/pets/1',
          method: 'GET' as const,
          headers: { accept: 'application/json' },
        })),
      ),
  };
}

/** What the PostgreSQL benchmarks (replicas, workers) stand on, torn down after each run. */
export interface PostgresBench {
  /** A temporary folder for the run's files (removed after). */
  readonly dir: string;
  /** Processes to stop after the run. */
  readonly children: ChildProcess[];
  /** The load generator's pools (loadPool), closed after the run. */
  readonly pools: Pool[];
  readonly upstream: { readonly url: string; readonly pid: number };
  readonly postgres: TestPostgres;
  /** The PostgreSQL server's pid, whose process tree's CPU each phase accounts for. */
  readonly postmaster: number;
  /** The pre-registered host of the bench policy (benchPolicy). */
  readonly host: TestKey;
  /** The bench policy's file. */
  readonly policy: string;
}

/** Starts the upstream and a PostgreSQL server, runs `run` on them, then stops everything. */
export async function withPostgresBench<T>(
  name: string,
  run: (bench: PostgresBench) => Promise<T>,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), `aap-bench-${name}-`));
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  let postgres: TestPostgres | undefined;
  try {
    const upstream = await startBenchUpstream((child) => children.push(child));
    postgres = await startPostgres();
    const postmaster = await postmasterPid(postgres.url);
    const host = await generateTestKey();
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, benchPolicy(host));
    return await run({ dir, children, pools, upstream, postgres, postmaster, host, policy });
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(
      children.map((c) =>
        c.exitCode !== null || c.signalCode !== null
          ? Promise.resolve()
          : new Promise<void>((done) => c.once('exit', () => done())),
      ),
    );
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `n` executions of get_pet by `agent`, each with a JWT of its own (a jti is used once). */
export function executeCalls(agent: RegisteredAgent): (n: number) => Promise<Call[]> {
  const body = JSON.stringify({ capability: 'get_pet', arguments: { petId: 1 } });
  return async (n) => {
    const calls: Call[] = [];
    for (let i = 0; i < n; i++) {
      const jwt = await agentJwt(agent.key, agent.id, agent.audience);
      calls.push({
        path: '/capability/execute',
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body,
      });
    }
    return calls;
  };
}

export async function runReplicasBench(
  options: { c1Requests?: number; c32Requests?: number } = {},
): Promise<ReplicasResult> {
  const c1Requests = options.c1Requests ?? 2_000;
  const c32Requests = options.c32Requests ?? 20_000;
  return withPostgresBench(
    'replicas',
    async ({ dir, children, pools, upstream, postgres, postmaster, host, policy }) => {
      const start = (db: string, issuer?: string): Promise<RunningProxy> =>
        startProxyProcess({
          upstreamUrl: upstream.url,
          db,
          policy,
          children,
          args: issuer ? ['--issuer', issuer] : [],
        });

      const sqlite = await start(join(dir, 'bench.db'));
      // The replicas share one issuer, as behind one Service; the first migrates the database.
      const first = await start(postgres.url, 'http://agents.bench.test');
      const replicas = [first];
      for (let i = 1; i < REPLICAS; i++) replicas.push(await start(postgres.url, 'http://agents.bench.test'));

      const pool = (url: string): Pool => loadPool(url, pools);
      const direct = directTarget(pool(upstream.url), upstream.pid);
      const through = async (
        proxies: readonly { url: string; pid: number }[],
        usesPostgres: boolean,
      ): Promise<Target> => ({
        pools: proxies.map((p) => pool(p.url)),
        upstreamPid: upstream.pid,
        proxyPids: proxies.map((p) => p.pid),
        usesPostgres,
        calls: executeCalls(await registerAgent(proxies[0]?.url as string, host)),
      });
      const targets: Record<Route, Target> = {
        direct,
        sqlite: await through([sqlite], false),
        postgres: await through(replicas, true),
      };

      // Warm every route (connections, JIT, caches, each replica's view of the agent) first.
      for (const route of ROUTES) await phase(targets[route], await targets[route].calls(500), 8, postmaster);

      const measure = async (requests: number, concurrency: number): Promise<Record<Route, RouteResult>> => {
        const samples = await inTurns(ROUTES, requests, async (route, count) =>
          phase(targets[route], await targets[route].calls(count), concurrency, postmaster),
        );
        return {
          direct: summarize(samples.direct),
          sqlite: summarize(samples.sqlite),
          postgres: summarize(samples.postgres),
        };
      };
      const c1 = await measure(c1Requests, 1);
      const c32 = await measure(c32Requests, 32);
      return { replicas: REPLICAS, c1, c32 };
    },
  );
}

export interface RunningProxy {
  readonly url: string;
  readonly pid: number;
}

/**
 * The built proxy (`dist/cli.js`) on a free port in front of `upstreamUrl`, with the bench
 * policy at `policy`, once it answers /readyz; its process joins `children`.
 */
export async function startProxyProcess(options: {
  readonly upstreamUrl: string;
  readonly db: string;
  readonly policy: string;
  readonly children: ChildProcess[];
  /** More serve flags, e.g. `--issuer URL`, `--workers 2`. */
  readonly args?: readonly string[];
}): Promise<RunningProxy> {
  const port = await freePort();
  // No password in the environment: the tests' server trusts loopback connections.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== DB_PASSWORD_ENV));
  const child = spawn(
    process.execPath,
    [
      join(ROOT, 'dist/cli.js'),
      ...['--spec', join(ROOT, 'examples/openapi/petstore.yaml'), '--upstream', `${options.upstreamUrl}/v1`],
      ...['--port', String(port), '--db', options.db, '--policy', options.policy, '--log-level', 'warn'],
      ...(options.args ?? []),
    ],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env },
  );
  options.children.push(child);
  return { url: await ready(child, port), pid: child.pid as number };
}

/** Registers one agent under the pre-registered host (get_pet granted by its defaults). */
export interface RegisteredAgent {
  readonly key: TestKey;
  readonly id: string;
  /** Where its execute JWTs are addressed (the proxy's default location). */
  readonly audience: string;
}

export async function registerAgent(url: string, host: TestKey): Promise<RegisteredAgent> {
  const discovery = (await (await fetch(`${url}/.well-known/agent-configuration`)).json()) as {
    issuer: string;
    default_location: string;
  };
  const key = await generateTestKey();
  const reg = await fetch(`${url}/agent/register`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await hostJwt(host, discovery.issuer, { agent_public_key: key.publicJwk })}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ name: 'bench agent', capabilities: ['get_pet'] }),
  });
  const registered = (await reg.json()) as { agent_id?: string; status?: string };
  if (reg.status !== 200 || registered.status !== 'active' || !registered.agent_id) {
    throw new Error(`bench agent registration failed: ${reg.status} ${JSON.stringify(registered)}`);
  }
  return { key, id: registered.agent_id, audience: discovery.default_location };
}

interface CpuSeconds {
  readonly loadgen: number;
  readonly proxies: number;
  readonly postgres: number;
  readonly upstream: number;
}

/** One timed run of one route: every latency, the wall time, and the CPU each kind used. */
export interface Sample {
  readonly latencies: Float64Array;
  readonly seconds: number;
  readonly target: Target;
  readonly cpu?: CpuSeconds;
}

export async function phase(
  target: Target,
  calls: readonly Call[],
  concurrency: number,
  postmaster: number,
): Promise<Sample> {
  const latencies = new Float64Array(calls.length);
  let next = 0;
  const before = cpuSnapshot(target, postmaster);
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= calls.length) return;
      const t0 = performance.now();
      const res = await (target.pools[i % target.pools.length] as Pool).request(calls[i] as Call);
      if (res.statusCode !== 200) {
        throw new Error(`request ${i} answered ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
      }
      await res.body.dump();
      latencies[i] = performance.now() - t0;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const after = cpuSnapshot(target, postmaster);
  return {
    latencies,
    seconds,
    target,
    ...(before && after
      ? {
          cpu: {
            loadgen: after.loadgen - before.loadgen,
            proxies: after.proxies - before.proxies,
            postgres: after.postgres - before.postgres,
            upstream: after.upstream - before.upstream,
          },
        }
      : {}),
  };
}

/** The rounds of one route as one result: throughput over their total time, percentiles over all. */
export function summarize(samples: readonly Sample[]): RouteResult {
  const sorted = samples.flatMap((s) => [...s.latencies]).sort((a, b) => a - b);
  const requests = sorted.length;
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  const at = (q: number): number => sorted[Math.min(requests - 1, Math.floor(q * requests))] as number;
  const target = samples[0]?.target;
  const perRequest = (key: keyof CpuSeconds): number =>
    (samples.reduce((sum, s) => sum + (s.cpu?.[key] ?? 0), 0) * 1e6) / requests;
  const cpu: CpuPerRequest | undefined =
    target && samples.every((s) => s.cpu)
      ? {
          loadgen: perRequest('loadgen'),
          upstream: perRequest('upstream'),
          ...(target.proxyPids.length ? { proxies: perRequest('proxies') } : {}),
          ...(target.usesPostgres ? { postgres: perRequest('postgres') } : {}),
        }
      : undefined;
  return {
    requests,
    rps: requests / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    ...(cpu ? { cpuUsPerRequest: cpu } : {}),
  };
}

/** CPU seconds used so far by each kind of process; undefined off Linux. */
function cpuSnapshot(target: Target, postmaster: number): CpuSeconds | undefined {
  const self = process.cpuUsage();
  const upstream = processCpuSeconds(target.upstreamPid);
  const proxies = target.proxyPids.map(treeCpuSeconds);
  const postgres = treeCpuSeconds(postmaster);
  if (upstream === undefined || postgres === undefined || proxies.some((p) => p === undefined))
    return undefined;
  return {
    loadgen: (self.user + self.system) / 1e6,
    proxies: proxies.reduce((sum: number, p) => sum + (p ?? 0), 0),
    postgres,
    upstream,
  };
}

/** The postmaster: the parent of the backend serving this connection. */
export async function postmasterPid(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return procStat(rows[0]?.pid ?? 0)?.ppid ?? 0;
  } finally {
    await client.end();
  }
}

/**
 * CPU seconds of a process and its children: the PostgreSQL server (the postmaster, every process
 * it has running: backends, writers, autovacuum) or a proxy with `--workers` (the primary and its
 * workers), and, through cutime/cstime, those it forked and reaped.
 */
export function treeCpuSeconds(parent: number): number | undefined {
  const own = procStat(parent);
  if (!own) return undefined;
  let ticks = own.ticks + own.childTicks;
  for (const pid of childPids(parent)) {
    const stat = procStat(pid);
    if (stat) ticks += stat.ticks + stat.childTicks;
  }
  return ticks / TICKS_PER_SECOND;
}

/** The processes whose parent is `parent` (Linux /proc). */
export function childPids(parent: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => procStat(pid)?.ppid === parent);
}

/** A process's own CPU seconds (user + system), without its children's. */
export function ownCpuSeconds(pid: number): number | undefined {
  const stat = procStat(pid);
  return stat ? stat.ticks / TICKS_PER_SECOND : undefined;
}

/** From /proc/PID/stat: the parent, the process's own CPU ticks and its reaped children's. */
function procStat(pid: number): { ppid: number; ticks: number; childTicks: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; fields are counted after its closing paren.
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    return {
      ppid: f[1] as number,
      ticks: (f[11] as number) + (f[12] as number),
      childTicks: (f[13] as number) + (f[14] as number),
    };
  } catch {
    return undefined;
  }
}
