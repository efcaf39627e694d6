/**
 * `npm run bench`: the catalog and execute benchmarks, with the machine they ran on.
 * `npm run bench -- execute` (or `catalog`) runs just that one. `npm run bench -- scale` (or
 * `--scale`) runs the scale benchmark on its own: it seeds databases of millions of rows, so it
 * takes a few minutes; `-- scale --quick` seeds a tenth of that. `npm run bench -- replicas` runs
 * the two-replica benchmark on its own (one proxy on SQLite against two on one PostgreSQL);
 * `-- replicas --quick` sends a fifth of its requests. `npm run bench -- --workers N` runs the
 * proxy on PostgreSQL with 1 worker and with N at concurrency 32 (`--quick`: a fifth of the requests).
 * `npm run bench -- corpus [ID…]` prints the catalog figures of the shared corpus and the
 * large-API corpus (fetched first if missing), or only of the documents named.
 * `npm run bench -- directory` loads every document of the public collection the large-API corpus
 * comes from (2,600-odd; fetched and unpacked first if missing) and compiles all their schemas:
 * about ten minutes on two cores.
 */
import { cpus, totalmem } from 'node:os';
import { runCatalogBench } from './catalog.js';
import { corpusBenchDocuments, runCorpusBench } from './corpus.js';
import { corpusHeader, corpusLine } from './corpus-report.js';
import { runDirectoryBench } from './directory.js';
import { runExecuteBench, type PhaseResult, type RouteResults } from './execute.js';
import { ROUTES, runReplicasBench, type ReplicasResult, type Route } from './replicas.js';
import { runScaleBench, type ScaleResult } from './scale.js';
import { runWorkersBench, WORKERS_ROUTES, type WorkersResult, type WorkersRoute } from './workers.js';

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);

const args = process.argv.slice(2);
const workersAt = args.indexOf('--workers');
const only = args.includes('--scale') ? 'scale' : workersAt >= 0 ? 'workers' : args[0];
const KNOWN = ['catalog', 'execute', 'scale', 'replicas', 'workers', 'corpus', 'directory'];
if (only !== undefined && !KNOWN.includes(only)) {
  console.error(
    `unknown benchmark ${only}: use catalog, execute, scale, replicas, corpus, directory or --workers N`,
  );
  process.exit(2);
}

if (only === 'workers') {
  const workers = Number(args[workersAt + 1] ?? 2);
  if (!Number.isInteger(workers) || workers < 2) {
    console.error('--workers N: N must be a whole number of at least 2 (it is measured against 1)');
    process.exit(2);
  }
  printWorkers(await runWorkersBench({ workers, ...(args.includes('--quick') ? { requests: 4_000 } : {}) }));
  process.exit(0);
}

if (only === 'scale') {
  printScale(await runScaleBench({ scale: args.includes('--quick') ? 0.1 : 1 }));
  process.exit(0);
}
if (only === 'corpus') {
  const ids = args.slice(1).filter((a) => !a.startsWith('--'));
  let docs: ReturnType<typeof corpusBenchDocuments>;
  try {
    docs = corpusBenchDocuments({ ids });
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(2);
  }
  console.log(corpusHeader());
  await runCorpusBench(docs, (row) => {
    console.log(corpusLine(row));
  });
  process.exit(0);
}
if (only === 'directory') {
  await runDirectoryBench();
  process.exit(0);
}
if (only === 'replicas') {
  const quick = args.includes('--quick');
  printReplicas(await runReplicasBench(quick ? { c1Requests: 400, c32Requests: 4_000 } : {}));
  process.exit(0);
}
if (only !== 'execute') {
  const catalog = runCatalogBench();
  console.log(
    `catalog: ${catalog.operations} operations, ${catalog.sizeMiB.toFixed(1)} MiB document → ready in ` +
      `${catalog.medianMs.toFixed(0)} ms (median of 3 fresh processes), peak RSS ${catalog.maxRssMiB.toFixed(0)} MiB`,
  );
}
if (only !== 'catalog') await runExecute();

async function runExecute(): Promise<void> {
  const exec = await runExecuteBench();
  const cpuCost = (r: PhaseResult): string => {
    const c = r.cpuUsPerRequest;
    if (!c) return '';
    const us = (v: number): string => v.toFixed(0).padStart(4);
    return `   CPU µs/req: load ${us(c.loadgen)}, gateway ${us(c.proxy)}, upstream ${us(c.upstream)}`;
  };
  const row = (label: string, r: PhaseResult): string =>
    `  ${label.padEnd(28)} ${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50Ms.toFixed(3)} ms   p99 ${r.p99Ms.toFixed(3).padStart(6)} ms${cpuCost(r)}`;
  const routes: [keyof RouteResults, string][] = [
    ['direct', 'direct'],
    ['relay', 'bare relay'],
    ['relayVerify', 'bare relay + Ed25519'],
    ['floor', 'floor (issue 14)'],
    ['floorLibsodium', 'floor, libsodium'],
    ['proxied', 'proxy'],
  ];
  console.log(
    `execute (GET one pet; a fresh agent JWT per request through a gateway; ` +
      `${exec.c1.direct.requests} requests at c=1, ${exec.c32.direct.requests} at c=32):`,
  );
  for (const [c, results] of [
    [1, exec.c1],
    [32, exec.c32],
  ] as const) {
    for (const [key, label] of routes) console.log(row(`${label}, c=${c}`, results[key]));
  }
  const ratio = (r: PhaseResult): string => (r.rps / exec.c32.direct.rps).toFixed(2);
  const added = (r: PhaseResult): number => r.p50Ms - exec.c1.direct.p50Ms;
  const cpu = (r: PhaseResult): number => r.cpuUsPerRequest?.proxy ?? NaN;
  console.log(
    `  added p50 latency at c=1: proxy ${added(exec.c1.proxied).toFixed(3)} ms, ` +
      `floor ${added(exec.c1.floor).toFixed(3)} ms (proxy/floor ${(added(exec.c1.proxied) / added(exec.c1.floor)).toFixed(2)}, target ≤ 1.25)`,
  );
  console.log(
    `  throughput at c=32 relative to direct: bare relay ${ratio(exec.c32.relay)}, ` +
      `bare relay + Ed25519 ${ratio(exec.c32.relayVerify)}, floor ${ratio(exec.c32.floor)}, proxy ${ratio(exec.c32.proxied)}`,
  );
  console.log(
    `  proxy against the floor at c=32: throughput ${(exec.c32.proxied.rps / exec.c32.floor.rps).toFixed(2)} (target ≥ 0.8), ` +
      `gateway CPU per request ${(cpu(exec.c32.proxied) / cpu(exec.c32.floor)).toFixed(2)} (target ≤ 1.25)`,
  );
  // The proxy verifies with libsodium, the issue's floor with node:crypto: against the floor that
  // verifies as the proxy does, what is left is what the proxy adds to the least a gateway does.
  const like = exec.c32.floorLibsodium;
  console.log(
    `  like for like (against the floor with libsodium's Ed25519, as the proxy verifies): ` +
      `added p50 at c=1 ${(added(exec.c1.proxied) / added(exec.c1.floorLibsodium)).toFixed(2)}, ` +
      `throughput at c=32 ${(exec.c32.proxied.rps / like.rps).toFixed(2)}, gateway CPU per request ${(cpu(exec.c32.proxied) / cpu(like)).toFixed(2)}`,
  );
}

function printScale(result: ScaleResult): void {
  const [base] = result.medians;
  if (!base) return;
  console.log(
    `scale (median of 5 interleaved rounds; databases seeded in ${result.seedSeconds.toFixed(0)} s; ` +
      `each cell: value, then ×ratio to the base):`,
  );
  const cell = (value: number, base: number, digits: number): string =>
    `${value.toFixed(digits)} (×${(value / base).toFixed(2)})`.padStart(20);
  const line = (label: string, pick: (v: (typeof result.medians)[number]) => number, digits = 2): void => {
    console.log(
      `  ${label.padEnd(34)}${result.medians.map((v) => cell(pick(v), pick(base), digits)).join('')}`,
    );
  };
  console.log(`  ${''.padEnd(34)}${result.sizes.map((s) => s.padStart(20)).join('')}`);
  line('execute c=8, req/s', (v) => v.executeRps, 0);
  line('execute c=8, proxy CPU µs/req', (v) => v.executeCpuUs, 0);
  line('execute c=1, p50 ms', (v) => v.executeP50);
  for (const name of Object.keys(base.p50)) line(`${name}, p50 ms`, (v) => v.p50[name] as number);
  line('start-up to discovery, ms', (v) => v.startupMs, 0);
  line('event-loop delay p99, ms', (v) => v.loopP99);
}

function printReplicas(result: ReplicasResult): void {
  const labels: Record<Route, string> = {
    direct: 'direct',
    sqlite: '1 proxy, SQLite',
    postgres: `${result.replicas} proxies, PostgreSQL`,
  };
  const { c1, c32 } = result;
  console.log(
    `replicas (GET one pet via POST /capability/execute, a fresh agent JWT per request, every protocol check on (rate limits off, replay caps raised, as in execute); ` +
      `${c1.direct.requests} requests at c=1, ${c32.direct.requests} at c=32, the routes in 4 interleaved rounds).\n` +
      `  On ${cpus().length} cores shared by the load generator, the upstream, every proxy and PostgreSQL ` +
      `(fsync off, as the tests start it): the replicas add no cores here, they divide them.\n` +
      `  CPU µs/req: user + system time per request of each kind of process (proxies: all of a route's together).`,
  );
  const us = (v: number | undefined): string => (v === undefined ? '–' : v.toFixed(0)).padStart(9);
  console.log(
    `  ${'route'.padEnd(30)}${'req/s'.padStart(8)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}` +
      `${'load'.padStart(9)}${'proxies'.padStart(9)}${'postgres'.padStart(9)}${'upstream'.padStart(9)}`,
  );
  for (const [c, results] of [
    [1, c1],
    [32, c32],
  ] as const) {
    for (const route of ROUTES) {
      const r = results[route];
      const cpu = r.cpuUsPerRequest;
      console.log(
        `  ${`${labels[route]}, c=${c}`.padEnd(30)}${r.rps.toFixed(0).padStart(8)}` +
          `${r.p50Ms.toFixed(3).padStart(9)}${r.p99Ms.toFixed(3).padStart(9)}` +
          `${us(cpu?.loadgen)}${us(cpu?.proxies)}${us(cpu?.postgres)}${us(cpu?.upstream)}`,
      );
    }
  }
  const added = (route: Route): string => (c1[route].p50Ms - c1.direct.p50Ms).toFixed(3);
  console.log(
    `  added p50 latency at c=1 over direct: ${labels.sqlite} ${added('sqlite')} ms, ` +
      `${labels.postgres} ${added('postgres')} ms`,
  );
  console.log(
    `  throughput at c=32: ${labels.postgres} / ${labels.sqlite} = ${(c32.postgres.rps / c32.sqlite.rps).toFixed(2)}; ` +
      `relative to direct: ${(c32.sqlite.rps / c32.direct.rps).toFixed(2)} and ${(c32.postgres.rps / c32.direct.rps).toFixed(2)}`,
  );
}

function printWorkers(result: WorkersResult): void {
  const labels: Record<WorkersRoute, string> = {
    direct: 'direct',
    floor: 'floor (issue 14)',
    one: 'proxy, --workers 1',
    many: `proxy, --workers ${result.workers}`,
  };
  const { c32 } = result;
  console.log(
    `workers (GET one pet via POST /capability/execute, a fresh agent JWT per request, every protocol check on; ` +
      `each proxy on its own database of one PostgreSQL; ${c32.direct.requests} requests per route at c=32 in 4 interleaved rounds).\n` +
      `  On ${cpus().length} cores shared by the load generator, the upstream, the proxies and PostgreSQL.\n` +
      `  CPU µs/req: user + system time per request of each kind of process (a proxy: its primary and workers together).`,
  );
  const us = (v: number | undefined): string => (v === undefined ? '–' : v.toFixed(0)).padStart(9);
  console.log(
    `  ${'route'.padEnd(24)}${'req/s'.padStart(8)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}` +
      `${'load'.padStart(9)}${'proxy'.padStart(9)}${'postgres'.padStart(9)}${'upstream'.padStart(9)}`,
  );
  for (const route of WORKERS_ROUTES) {
    const r = c32[route];
    const cpu = r.cpuUsPerRequest;
    console.log(
      `  ${labels[route].padEnd(24)}${r.rps.toFixed(0).padStart(8)}` +
        `${r.p50Ms.toFixed(3).padStart(9)}${r.p99Ms.toFixed(3).padStart(9)}` +
        `${us(cpu?.loadgen)}${us(cpu?.proxies)}${us(cpu?.postgres)}${us(cpu?.upstream)}`,
    );
  }
  console.log(
    `  throughput --workers ${result.workers} / --workers 1 = ${(c32.many.rps / c32.one.rps).toFixed(2)}; ` +
      `proxy CPU per request ${((c32.many.cpuUsPerRequest?.proxies ?? NaN) / (c32.one.cpuUsPerRequest?.proxies ?? NaN)).toFixed(2)}; ` +
      `workers' shares of their CPU: ${result.workerShares.map((s) => `${(s * 100).toFixed(0)}%`).join(' / ')}; ` +
      `the primary's own CPU: ${result.primaryCpuUs.toFixed(0)} µs/req`,
  );
}
