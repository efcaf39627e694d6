/**
 * Execute-path benchmark: the same workload (GET one pet) sent directly to a minimal upstream,
 * through a bare relay (floor-proxy-child.ts, without and with the Ed25519 signature check),
 * through the floor of issue 14 (with node:crypto's Ed25519 as the issue defines it, and with
 * libsodium's as the proxy verifies) and through the proxy, at concurrency 1 and 32, in one run.
 * Every request through a gateway carries a fresh agent JWT (signed before the timed phase, so
 * the load generator's signing is not measured). The upstream, each gateway (the proxy as built in
 * dist/, as deployed) and the load generator run in separate processes; each phase also reports
 * the CPU time each of them spent per request, read from /proc, since on a shared 2-core machine
 * throughput alone hides where the cycles went. The routes take turns in rounds (see `inTurns`),
 * so noise from outside lands on all of them alike.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../test/helpers/keys.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface PhaseResult {
  readonly requests: number;
  readonly seconds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** CPU time (user + system) spent per request by each process, in µs; absent off Linux. */
  readonly cpuUsPerRequest?: { readonly loadgen: number; readonly proxy: number; readonly upstream: number };
}

/**
 * The same call by six routes: straight to the upstream; through the yardstick relay
 * (floor-proxy-child.ts) without and with the Ed25519 check; through the two floors; through the
 * proxy.
 */
export interface RouteResults {
  readonly direct: PhaseResult;
  readonly relay: PhaseResult;
  readonly relayVerify: PhaseResult;
  /** The floor of issue 14: Ed25519, a jti map, the JSON body parsed and checked, the relay. */
  readonly floor: PhaseResult;
  /** The same floor with the proxy's Ed25519 verify (libsodium): what the proxy adds, like for like. */
  readonly floorLibsodium: PhaseResult;
  readonly proxied: PhaseResult;
}

export interface ExecuteBenchResult {
  readonly c1: RouteResults;
  readonly c32: RouteResults;
}

interface Target {
  readonly pool: Pool;
  /** The processes whose CPU time a phase accounts for. */
  readonly pids: { readonly proxy?: number; readonly upstream: number };
  /** The request for the i-th call of a phase. */
  request(i: number): {
    path: string;
    method: 'GET' | 'POST';
    headers: Record<string, string>;
    body?: string;
  };
}

/**
 * The load generator's connections to one target: as many as the highest concurrency a benchmark
 * runs (32), one request at a time each. More would not add load, and the proxy closes a peer's
 * 65th connection on arrival (`server.max_connections_per_ip`, 64 by default): a pool of 64, plus
 * the connection the agent's registration left open, now and then had a request reset.
 */
export function loadPool(url: string, pools: Pool[]): Pool {
  const pool = new Pool(url, { connections: 32, pipelining: 1 });
  pools.push(pool);
  return pool;
}

export async function runExecuteBench(
  options: { c1Requests?: number; c32Requests?: number } = {},
): Promise<ExecuteBenchResult> {
  const c1Requests = options.c1Requests ?? 2_000;
  const c32Requests = options.c32Requests ?? 20_000;
  const dir = mkdtempSync(join(tmpdir(), 'aap-bench-exec-'));
  const children: ChildProcess[] = [];
  try {
    const upstream = await startBenchUpstream((child) => children.push(child));
    const upstreamUrl = upstream.url;

    const host = await generateTestKey();
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, benchPolicy(host));
    const port = await freePort();
    const proxy = spawn(
      process.execPath,
      [
        // AAP_BENCH_PROFILE=DIR writes CPU profiles of the proxy (DIR/proxy) and of the floor
        // (DIR/floor) there: open them in Chrome DevTools, or `npx tsx bench/profile-top.ts DIR`.
        ...(process.env.AAP_BENCH_PROFILE
          ? [
              '--cpu-prof',
              ...PROFILE_INTERVAL,
              `--cpu-prof-dir=${join(process.env.AAP_BENCH_PROFILE, 'proxy')}`,
            ]
          : []),
        // `npm run bench` builds first (prebench): the deployed artefact is what is measured.
        join(ROOT, 'dist/cli.js'),
        '--spec',
        join(ROOT, 'examples/openapi/petstore.yaml'),
        '--upstream',
        `${upstreamUrl}/v1`,
        '--port',
        String(port),
        '--db',
        join(dir, 'bench.db'),
        '--policy',
        policy,
        // One access-log line per request would measure the log pipe, not the gateway.
        '--log-level',
        'warn',
      ],
      { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    children.push(proxy);
    const proxyUrl = await ready(proxy, port);
    const executeUrl = `${proxyUrl}/capability/execute`;

    // Register one agent under the pre-registered host: get_pet is granted by the host's defaults.
    const agent = await generateTestKey();
    const reg = await fetch(`${proxyUrl}/agent/register`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${await hostJwt(host, proxyUrl, { agent_public_key: agent.publicJwk })}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'bench agent', capabilities: ['get_pet'] }),
    });
    const registered = (await reg.json()) as { agent_id?: string; status?: string };
    if (reg.status !== 200 || registered.status !== 'active' || !registered.agent_id) {
      throw new Error(`bench agent registration failed: ${reg.status} ${JSON.stringify(registered)}`);
    }
    const agentId = registered.agent_id;

    const relay = (mode: FloorMode) =>
      startFloorChild({ upstreamUrl, keyX: agent.publicJwk.x, mode, keep: (child) => children.push(child) });
    const relayOnly = await relay('relay');
    const relayWithVerify = await relay('verify');
    const floorRelay = await relay('floor');
    const floorLibsodiumRelay = await relay('floor-libsodium');

    const pools: Pool[] = [];
    const pool = (url: string): Pool => loadPool(url, pools);
    const directPool = pool(upstreamUrl);
    const pids = { upstream: upstream.pid };
    const direct: Target = {
      pool: directPool,
      pids,
      request: () => ({ path: '/v1/pets/1', method: 'GET', headers: { accept: 'application/json' } }),
    };
    const body = JSON.stringify({ capability: 'get_pet', arguments: { petId: 1 } });
    const through = (url: string, pid: number) => {
      const target = pool(url);
      return (tokens: string[]): Target => ({
        pool: target,
        pids: { ...pids, proxy: pid },
        request: (i) => ({
          path: '/capability/execute',
          method: 'POST',
          headers: { authorization: `Bearer ${tokens[i] as string}`, 'content-type': 'application/json' },
          body,
        }),
      });
    };
    const viaRelay = through(relayOnly.url, relayOnly.pid);
    const viaRelayVerify = through(relayWithVerify.url, relayWithVerify.pid);
    const viaFloor = through(floorRelay.url, floorRelay.pid);
    const viaFloorLibsodium = through(floorLibsodiumRelay.url, floorLibsodiumRelay.pid);
    const viaProxy = through(proxyUrl, proxy.pid as number);
    const sign = async (n: number): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(await agentJwt(agent, agentId, executeUrl));
      return out;
    };

    // Warm every route (connections, JIT, caches) before measuring: steady state is what a
    // sidecar serves. WARM_UP_REQUESTS, not fewer: the c=1 rounds come first, and after 500
    // requests the proxy (far more code than the floor) was still being optimised by V8 while
    // they ran (its added p50 at c=1 was 359-436 µs after 500, 316-331 after 3,000; the floor's
    // 230-258 either way).
    await phase(direct, WARM_UP_REQUESTS, 8);
    for (const via of [viaRelay, viaRelayVerify, viaFloor, viaFloorLibsodium, viaProxy])
      await phase(via(await sign(WARM_UP_REQUESTS)), WARM_UP_REQUESTS, 8);

    // The routes take turns (inTurns). Each gets its own fresh tokens: the proxy refuses a
    // replayed jti.
    const routes = async (requests: number, concurrency: number): Promise<RouteResults> => {
      const order: (keyof RouteResults)[] = [
        'direct',
        'relay',
        'relayVerify',
        'floor',
        'floorLibsodium',
        'proxied',
      ];
      const targets: Record<keyof RouteResults, (tokens: string[]) => Target> = {
        direct: () => direct,
        relay: viaRelay,
        relayVerify: viaRelayVerify,
        floor: viaFloor,
        floorLibsodium: viaFloorLibsodium,
        proxied: viaProxy,
      };
      const samples = await inTurns(order, requests, async (route, count) => {
        const tokens = route === 'direct' ? [] : await sign(count);
        return phase(targets[route](tokens), count, concurrency);
      });
      return {
        direct: summarize(samples.direct),
        relay: summarize(samples.relay),
        relayVerify: summarize(samples.relayVerify),
        floor: summarize(samples.floor),
        floorLibsodium: summarize(samples.floorLibsodium),
        proxied: summarize(samples.proxied),
      };
    };
    const c1 = await routes(c1Requests, 1);
    const c32 = await routes(c32Requests, 32);
    await Promise.all(pools.map((p) => p.close()));
    return { c1, c32 };
  } finally {
    for (const child of children) child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Requests per route, at concurrency 8, before the execute benchmark measures anything. */
const WARM_UP_REQUESTS = 3_000;

/** Rounds in which the routes of a benchmark take turns (inTurns). */
const ROUNDS = 4;

/**
 * Sends `requests` through each route in ROUNDS rounds, the routes taking turns and each round
 * starting with the next route: a burst of noise on a shared machine then lands on every route
 * alike instead of on whichever ran at that moment. `run` sends one route's share of one round.
 */
export async function inTurns<R extends string, S>(
  routes: readonly R[],
  requests: number,
  run: (route: R, count: number) => Promise<S>,
): Promise<Record<R, S[]>> {
  const samples = Object.fromEntries(routes.map((r) => [r, [] as S[]])) as Record<R, S[]>;
  const perRound = Math.ceil(requests / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < routes.length; k++) {
      const route = routes[(round + k) % routes.length] as R;
      samples[route].push(await run(route, perRound));
    }
  }
  return samples;
}

/**
 * Every benchmark's policy: one pre-registered host whose agents get get_pet without asking. The
 * gateway is measured, not the limiter: rate limits are off, in-flight caps stay on (their counting
 * is on the measured path) but above c=32. One agent sends every request, far past the
 * per-identity replay cap a rate-limited agent stays under: that is lifted too (every jti is still
 * remembered and recorded).
 */
export function benchPolicy(host: TestKey): string {
  return [
    'hosts:',
    '  - name: bench',
    '    user_id: bench-user',
    `    public_key: {kty: OKP, crv: Ed25519, x: ${host.publicJwk.x}}`,
    '    default_capabilities: [get_pet]',
    'rate_limits: {per_agent: null, per_host: null, per_user: null, per_ip: null, in_flight_per_agent: 64}',
    'replay: {max_entries: 1000000, max_entries_per_identity: 1000000}',
    '',
  ].join('\n');
}

/** One timed run of one route: every latency, the wall time, and the CPU each process used. */
interface Sample {
  readonly latencies: Float64Array;
  readonly seconds: number;
  readonly cpuSeconds?: { readonly loadgen: number; readonly proxy: number; readonly upstream: number };
}

async function phase(target: Target, requests: number, concurrency: number): Promise<Sample> {
  const latencies = new Float64Array(requests);
  let next = 0;
  const cpuBefore = cpuSnapshot(target);
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= requests) return;
      const req = target.request(i);
      const t0 = performance.now();
      const res = await target.pool.request(req);
      await res.body.dump();
      latencies[i] = performance.now() - t0;
      if (res.statusCode !== 200) throw new Error(`request ${i} answered ${res.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpuAfter = cpuSnapshot(target);
  const used = (before: number | undefined, after: number | undefined): number =>
    before === undefined || after === undefined ? 0 : after - before;
  return {
    latencies,
    seconds,
    ...(cpuBefore && cpuAfter
      ? {
          cpuSeconds: {
            loadgen: used(cpuBefore.loadgen, cpuAfter.loadgen),
            proxy: used(cpuBefore.proxy, cpuAfter.proxy),
            upstream: used(cpuBefore.upstream, cpuAfter.upstream),
          },
        }
      : {}),
  };
}

/** The rounds of one route as one result: throughput over their total time, percentiles over all. */
function summarize(samples: readonly Sample[]): PhaseResult {
  const sorted = samples.flatMap((s) => [...s.latencies]).sort((a, b) => a - b);
  const requests = sorted.length;
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  const at = (q: number): number =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
  const cpu = samples.every((s) => s.cpuSeconds !== undefined)
    ? (key: 'loadgen' | 'proxy' | 'upstream'): number =>
        (samples.reduce((sum, s) => sum + (s.cpuSeconds?.[key] ?? 0), 0) * 1e6) / requests
    : undefined;
  return {
    requests,
    seconds,
    rps: requests / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    ...(cpu
      ? { cpuUsPerRequest: { loadgen: cpu('loadgen'), proxy: cpu('proxy'), upstream: cpu('upstream') } }
      : {}),
  };
}

interface CpuSnapshot {
  readonly loadgen: number;
  readonly proxy: number | undefined;
  readonly upstream: number;
}

/** CPU seconds (user + system) used so far by this process and the target's children; Linux only. */
function cpuSnapshot(target: Target): CpuSnapshot | undefined {
  const self = process.cpuUsage();
  const upstream = processCpuSeconds(target.pids.upstream);
  const proxy = target.pids.proxy === undefined ? undefined : processCpuSeconds(target.pids.proxy);
  if (upstream === undefined || (target.pids.proxy !== undefined && proxy === undefined)) return undefined;
  return { loadgen: (self.user + self.system) / 1e6, proxy, upstream };
}

// /proc/PID/stat reports utime and stime in clock ticks; Linux fixes USER_HZ at 100 for userspace.
export const TICKS_PER_SECOND = 100;

export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; fields are counted after its closing paren.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export type FloorMode = 'relay' | 'verify' | 'floor' | 'floor-libsodium';

// Sampled every 200 µs: at Node's default (1 ms) an item of 1 µs per request got a few dozen
// samples in a run, too few to tell a change from noise.
const PROFILE_INTERVAL = ['--cpu-prof-interval=200'];

/**
 * Starts a yardstick gateway (bench/floor-proxy-child.ts) in MODE, checking JWTs against the key
 * whose `x` is `keyX`; its origin and pid once it listens. With AAP_BENCH_PROFILE the floor writes
 * its CPU profile beside the proxy's.
 */
export async function startFloorChild(options: {
  readonly upstreamUrl: string;
  readonly keyX: string;
  readonly mode: FloorMode;
  readonly keep: (child: ChildProcess) => void;
}): Promise<{ readonly url: string; readonly pid: number }> {
  const { upstreamUrl, keyX, mode } = options;
  const child = spawn(
    process.execPath,
    [
      // The floor's profile beside the proxy's: what the proxy does beyond it shows as the difference.
      ...(process.env.AAP_BENCH_PROFILE && mode === 'floor'
        ? [
            '--cpu-prof',
            ...PROFILE_INTERVAL,
            `--cpu-prof-dir=${join(process.env.AAP_BENCH_PROFILE, 'floor')}`,
          ]
        : []),
      '--import',
      'tsx',
      join(ROOT, 'bench/floor-proxy-child.ts'),
      upstreamUrl,
      keyX,
      mode,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  options.keep(child);
  return { url: `http://127.0.0.1:${Number(await firstLine(child))}`, pid: child.pid as number };
}

/**
 * Starts the benchmarks' minimal upstream (bench/upstream-child.ts) as a process of its own; its
 * origin and pid, once it listens. `keep` receives the child so the caller stops it.
 */
export async function startBenchUpstream(
  keep: (child: ChildProcess) => void,
): Promise<{ readonly url: string; readonly pid: number }> {
  const upstream = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/upstream-child.ts')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  keep(upstream);
  return { url: `http://127.0.0.1:${Number(await firstLine(upstream))}`, pid: upstream.pid as number };
}

export function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    rl.once('line', (line) => resolve(line.trim()));
    child.once('exit', (code) => reject(new Error(`child exited with ${code} before printing`)));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls /readyz until the proxy answers (bounded: 60 s). */
export async function ready(child: ChildProcess, port: number): Promise<string> {
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`proxy exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return url;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('proxy did not become ready within 60 s');
}
