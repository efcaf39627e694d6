/** `npm run bench`: every benchmark, with the machine it ran on. */
import { cpus, totalmem } from 'node:os';
import { runCatalogBench } from './catalog.js';
import { runExecuteBench, type PhaseResult } from './execute.js';

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);

const catalog = runCatalogBench();
console.log(
  `catalog: ${catalog.operations} operations, ${catalog.sizeMiB.toFixed(1)} MiB document → ready in ` +
    `${catalog.medianMs.toFixed(0)} ms (median of 3 fresh processes), peak RSS ${catalog.maxRssMiB.toFixed(0)} MiB`,
);

const exec = await runExecuteBench();
const cpuCost = (r: PhaseResult): string => {
  const c = r.cpuUsPerRequest;
  if (!c) return '';
  const us = (v: number): string => v.toFixed(0).padStart(4);
  return `   CPU µs/req: load ${us(c.loadgen)}, proxy ${us(c.proxy)}, upstream ${us(c.upstream)}`;
};
const row = (label: string, r: PhaseResult): string =>
  `  ${label.padEnd(15)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50Ms.toFixed(3)} ms   p99 ${r.p99Ms.toFixed(3)} ms   (${r.requests} requests)${cpuCost(r)}`;
console.log('execute (GET one pet; fresh agent JWT per proxied request):');
console.log(row('direct, c=1', exec.c1.direct));
console.log(row('proxied, c=1', exec.c1.proxied));
console.log(row('direct, c=32', exec.c32.direct));
console.log(row('proxied, c=32', exec.c32.proxied));
console.log(
  `  added p50 latency at c=1: ${(exec.c1.proxied.p50Ms - exec.c1.direct.p50Ms).toFixed(3)} ms; ` +
    `proxied/direct throughput at c=32: ${(exec.c32.proxied.rps / exec.c32.direct.rps).toFixed(2)}`,
);
