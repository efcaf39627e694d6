/**
 * Scale benchmark (issue 17): the same proxy on SQLite files of three sizes, visited in
 * interleaved rounds, so that a path whose cost grows with the database shows as a ratio to the
 * small one measured beside it. Sizes: a small deployment (100 agents); 10,000 hosts, 100,000 agents (each with its approved
 * registration) and 300,000 grants; that plus 5,000,000 activity rows (scale-seed.ts).
 *
 * Each round starts a fresh proxy on each file in turn (timing start-up to the first answer of
 * discovery), then times execute (throughput at concurrency 8, p50 at 1), status, register,
 * capability list and the operator listings, and reads the proxy's event-loop delay p99 over the
 * visit (loop-delay-probe.mjs). Results are medians over rounds.
 *
 * `AAP_BENCH_BUILD=DIR` measures the build in another checkout (its dist/ and its migrations),
 * e.g. the commit before a change, for a before/after table from the same machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../test/helpers/keys.js';
import { benchPolicy, freePort, processCpuSeconds, startBenchUpstream } from './execute.js';
import { QUIET_AGENT, seedActivity, seedPrincipals, type SeedSize } from './scale-seed.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const ADMIN_TOKEN = 'scale-bench-admin-token-0123456789abcdef';

/** What one visit of one size measured; latencies in ms. */
export interface Visit {
  readonly startupMs: number;
  readonly executeRps: number;
  /** The proxy's CPU time (user + system) per execute at concurrency 8, in µs: steadier than throughput on a shared machine. */
  readonly executeCpuUs: number;
  readonly executeP50: number;
  readonly loopP99: number;
  /** p50 of each probe below, by name. */
  readonly p50: Readonly<Record<string, number>>;
}

export interface ScaleResult {
  readonly sizes: readonly string[];
  readonly seedSeconds: number;
  /** Median over rounds of each size's visits. */
  readonly medians: readonly Visit[];
}

interface Size {
  readonly label: string;
  readonly file: string;
}

export interface ScaleOptions {
  /** 1 = the sizes; smaller for a quick look (0.1 = 1,000 hosts, 500,000 activity rows). */
  readonly scale?: number;
  readonly rounds?: number;
}

export async function runScaleBench(options: ScaleOptions = {}): Promise<ScaleResult> {
  const scale = options.scale ?? 1;
  const rounds = options.rounds ?? 5;
  const build = resolve(process.env.AAP_BENCH_BUILD ?? ROOT);
  const dir = mkdtempSync(join(tmpdir(), 'aap-bench-scale-'));
  const children = new Set<ChildProcess>();
  try {
    const seedStarted = performance.now();
    const sizes = await seedSizes(build, dir, scale);
    const seedSeconds = (performance.now() - seedStarted) / 1000;

    const upstreamUrl = `${(await startBenchUpstream((child) => children.add(child))).url}/v1`;
    const host = await generateTestKey();
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, benchPolicy(host));
    const start = (size: Size): Promise<RunningProxy> =>
      startProxy({ build, size, policy, upstreamUrl, dir, children });

    // A first start on each file: drift adopts the seeded grants' versions (once, as after an
    // upgrade), and the files are read into the page cache before anything is timed.
    for (const size of sizes) await (await start(size)).stop();

    const visits: Visit[][] = sizes.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < sizes.length; k++) {
        const i = (round + k) % sizes.length;
        const proxy = await start(sizes[i] as Size);
        try {
          visits[i]?.push(await visit(proxy, host));
        } finally {
          await proxy.stop();
        }
      }
    }
    return { sizes: sizes.map((s) => s.label), seedSeconds, medians: visits.map(medianVisit) };
  } finally {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The three files, migrated by the build under test, then seeded. The smallest is not empty: it
 * holds a small deployment (50 hosts, 100 agents, 300 grants, 3,000 activity rows, about a hundred
 * a day), so that every listing returns a full page of 50 on every size and a ratio compares the
 * same work on more rows rather than 50 rows against none.
 */
async function seedSizes(build: string, dir: string, scale: number): Promise<Size[]> {
  const big: SeedSize = {
    hosts: Math.round(10_000 * scale),
    agentsPerHost: 10,
    grantsPerAgent: 3,
    activity: Math.round(5_000_000 * scale),
  };
  const small: SeedSize = { hosts: 50, agentsPerHost: 2, grantsPerAgent: 3, activity: 3_000 };
  const migrated = join(dir, 'migrated.db');
  // Builds before the opener had its own module (AAP_BENCH_BUILD may name one) export it from the engine's.
  const opener = ['dist/storage/open-sqlite.js', 'dist/storage/sqlite-store.js']
    .map((path) => join(build, path))
    .find((path) => existsSync(path));
  const module = (await import(pathToFileURL(opener ?? '').href)) as {
    openSqliteStore(options: { file: string }): { close(): unknown };
  };
  await module.openSqliteStore({ file: migrated }).close();
  const now = Date.now();
  const seeded = (name: string, principals: SeedSize, activity?: SeedSize): string => {
    const file = join(dir, name);
    copyFileSync(migrated, file);
    seedPrincipals(file, principals, now);
    if (activity) seedActivity(file, activity, now);
    return file;
  };
  const base = seeded('base.db', small, small);
  const principals = seeded('principals.db', big);
  const activity = join(dir, 'activity.db');
  copyFileSync(principals, activity);
  seedActivity(activity, big, now);
  const k = (n: number): string => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`);
  return [
    { label: 'base: 100 agents', file: base },
    { label: `${k(big.hosts * big.agentsPerHost)} agents`, file: principals },
    { label: `+ ${k(big.activity)} activity`, file: activity },
  ];
}

interface RunningProxy {
  readonly url: string;
  readonly pid: number;
  readonly startupMs: number;
  /** The event-loop delay p99 (ms) since the previous call. */
  loopDelayP99(): Promise<number>;
  stop(): Promise<void>;
}

async function startProxy(o: {
  build: string;
  size: Size;
  policy: string;
  upstreamUrl: string;
  dir: string;
  children: Set<ChildProcess>;
}): Promise<RunningProxy> {
  const port = await freePort();
  const loopFile = join(o.dir, 'loop.json');
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      '--import',
      pathToFileURL(join(ROOT, 'bench/loop-delay-probe.mjs')).href,
      join(o.build, 'dist/cli.js'),
      '--spec',
      join(ROOT, 'examples/openapi/petstore.yaml'),
      '--upstream',
      o.upstreamUrl,
      '--port',
      String(port),
      '--db',
      o.size.file,
      '--policy',
      o.policy,
      '--log-level',
      'warn',
    ],
    {
      cwd: o.build,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN, AAP_BENCH_LOOP_FILE: loopFile },
    },
  );
  o.children.add(child);
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  // Ready: discovery answers. Polled every 5 ms, bounded at 120 s.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`proxy on ${o.size.label} exited with ${child.exitCode}`);
    if (i > 24_000) throw new Error(`proxy on ${o.size.label} not ready within 120 s`);
    try {
      if ((await fetch(`${url}/.well-known/agent-configuration`)).status === 200) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const startupMs = performance.now() - started;
  return {
    url,
    pid: child.pid as number,
    startupMs,
    async loopDelayP99() {
      rmSync(loopFile, { force: true });
      child.kill('SIGUSR2');
      for (let i = 0; i < 200; i++) {
        try {
          return (JSON.parse(readFileSync(loopFile, 'utf8')) as { p99: number }).p99;
        } catch {
          await new Promise((r) => setTimeout(r, 10));
        }
      }
      throw new Error('the proxy did not report its event-loop delay');
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
      o.children.delete(child);
    },
  };
}

/** Per probe: at most this many calls, and no more once this much time has gone (a slow path). */
const PROBE_CALLS = 200;
const PROBE_MS = 3_000;

async function visit(proxy: RunningProxy, host: TestKey): Promise<Visit> {
  const pool = new Pool(proxy.url, { connections: 16, pipelining: 1 });
  try {
    const asHost = async (extra: Record<string, unknown> = {}): Promise<string> =>
      `Bearer ${await hostJwt(host, proxy.url, extra)}`;
    const agent = await generateTestKey();
    const reg = await pool.request({
      path: '/agent/register',
      method: 'POST',
      headers: {
        authorization: await asHost({ agent_public_key: agent.publicJwk }),
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'scale bench agent', capabilities: ['get_pet'] }),
    });
    const registered = (await reg.body.json()) as { agent_id?: string; status?: string };
    if (reg.statusCode !== 200 || registered.status !== 'active' || !registered.agent_id) {
      throw new Error(`bench agent registration failed: ${reg.statusCode} ${JSON.stringify(registered)}`);
    }
    const agentId = registered.agent_id;
    const execute = async (): Promise<Call> => {
      const token = await agentJwt(agent, agentId, `${proxy.url}/capability/execute`);
      return {
        path: '/capability/execute',
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ capability: 'get_pet', arguments: { petId: 1 } }),
      };
    };
    const admin = (path: string) => (): Promise<Call> =>
      Promise.resolve({ path, method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    await run(pool, execute, 300, 8);
    await proxy.loopDelayP99(); // start the visit's window after warming up
    const cpuBefore = processCpuSeconds(proxy.pid) ?? NaN;
    const throughput = await run(pool, execute, 3_000, 8);
    const executeCpuUs = (((processCpuSeconds(proxy.pid) ?? NaN) - cpuBefore) * 1e6) / throughput.requests;
    const single = await run(pool, execute, 300, 1);
    const probes: Record<string, () => Promise<Call>> = {
      status: async () => ({
        path: `/agent/status?agent_id=${agentId}`,
        method: 'GET',
        headers: { authorization: await asHost() },
      }),
      register: async () => {
        const key = await generateTestKey();
        return {
          path: '/agent/register',
          method: 'POST',
          headers: {
            authorization: await asHost({ agent_public_key: key.publicJwk }),
            'content-type': 'application/json',
          },
          body: JSON.stringify({ name: 'scale bench agent', capabilities: ['get_pet'] }),
        };
      },
      'capability list': async () => ({
        path: '/capability/list',
        method: 'GET',
        headers: { authorization: await asHost() },
      }),
      'admin agents': admin('/admin/agents?limit=50'),
      'admin agents of a host': admin('/admin/agents?host_id=hst_seed_7&limit=50'),
      'admin active agents': admin('/admin/agents?status=active&limit=50'),
      'admin hosts': admin('/admin/hosts?limit=50'),
      'admin approvals': admin('/admin/approvals?limit=50'),
      'admin activity': admin('/admin/activity?limit=50'),
      'admin activity, quiet agent': admin(`/admin/activity?agent_id=${QUIET_AGENT}&limit=50`),
      'admin activity, one day': admin(
        `/admin/activity?since=${iso(Date.now() - 20 * 86_400_000)}&until=${iso(Date.now() - 19 * 86_400_000)}&limit=50`,
      ),
    };
    const p50: Record<string, number> = {};
    for (const [name, call] of Object.entries(probes))
      p50[name] = (await run(pool, call, PROBE_CALLS, 1)).p50;
    return {
      startupMs: proxy.startupMs,
      executeRps: throughput.rps,
      executeCpuUs,
      executeP50: single.p50,
      loopP99: await proxy.loopDelayP99(),
      p50,
    };
  } finally {
    await pool.close();
  }
}

interface Call {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string;
}

/**
 * `requests` calls at `concurrency`, each built (and its JWT signed) before it is timed; stops
 * early once PROBE_MS have passed at concurrency 1, so a slow path costs seconds, not minutes.
 */
async function run(
  pool: Pool,
  make: () => Promise<Call>,
  requests: number,
  concurrency: number,
): Promise<{ requests: number; rps: number; p50: number }> {
  const calls = await Promise.all(Array.from({ length: requests }, make));
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= calls.length) return;
      if (concurrency === 1 && i >= 5 && performance.now() - started > PROBE_MS) return;
      const t0 = performance.now();
      const res = await pool.request(calls[i] as Call);
      const text = await res.body.text();
      latencies.push(performance.now() - t0);
      if (res.statusCode !== 200)
        throw new Error(`${calls[i]?.path} answered ${res.statusCode}: ${text.slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { requests: latencies.length, rps: latencies.length / seconds, p50: median(latencies) };
}

function medianVisit(visits: readonly Visit[]): Visit {
  const m = (f: (v: Visit) => number): number => median(visits.map(f));
  const first = visits[0] as Visit;
  return {
    startupMs: m((v) => v.startupMs),
    executeRps: m((v) => v.executeRps),
    executeCpuUs: m((v) => v.executeCpuUs),
    executeP50: m((v) => v.executeP50),
    loopP99: m((v) => v.loopP99),
    p50: Object.fromEntries(Object.keys(first.p50).map((k) => [k, m((v) => v.p50[k] as number)])),
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
