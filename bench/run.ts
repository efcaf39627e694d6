/** `npm run bench`: every benchmark, with the machine it ran on. */
import { cpus, totalmem } from 'node:os';
import { runCatalogBench } from './catalog.js';

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);

const catalog = runCatalogBench();
console.log(
  `catalog: ${catalog.operations} operations, ${catalog.sizeMiB.toFixed(1)} MiB document → ready in ` +
    `${catalog.medianMs.toFixed(0)} ms (median of 3 fresh processes), peak RSS ${catalog.maxRssMiB.toFixed(0)} MiB`,
);
