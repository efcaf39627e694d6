/**
 * `npm run bench`: every benchmark, with the machine it ran on. `npm run bench -- execute` (or
 * `catalog`) runs just that one.
 */
import { cpus, totalmem } from 'node:os';
import { runCatalogBench } from './catalog.js';
import { runExecuteBench, type PhaseResult, type RouteResults } from './execute.js';

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);

const only = process.argv[2];
if (only !== undefined && only !== 'catalog' && only !== 'execute') {
  console.error(`unknown benchmark ${only}: use catalog or execute`);
  process.exit(2);
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
    `  ${label.padEnd(24)} ${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50Ms.toFixed(3)} ms   p99 ${r.p99Ms.toFixed(3).padStart(6)} ms${cpuCost(r)}`;
  const routes: [keyof RouteResults, string][] = [
    ['direct', 'direct'],
    ['relay', 'bare relay'],
    ['relayVerify', 'bare relay + Ed25519'],
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
  console.log(
    `  added p50 latency at c=1: proxy ${(exec.c1.proxied.p50Ms - exec.c1.direct.p50Ms).toFixed(3)} ms, ` +
      `bare relay + Ed25519 ${(exec.c1.relayVerify.p50Ms - exec.c1.direct.p50Ms).toFixed(3)} ms`,
  );
  console.log(
    `  throughput at c=32 relative to direct: bare relay ${ratio(exec.c32.relay)}, ` +
      `bare relay + Ed25519 ${ratio(exec.c32.relayVerify)}, proxy ${ratio(exec.c32.proxied)}; ` +
      `proxy/(bare relay + Ed25519) ${(exec.c32.proxied.rps / exec.c32.relayVerify.rps).toFixed(2)}`,
  );
}
