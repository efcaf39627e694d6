/**
 * Preloaded into a proxy under the scale benchmark (`node --import`): measures the proxy's
 * event-loop delay with perf_hooks.monitorEventLoopDelay and, on SIGUSR2, writes its p99 and max
 * (ms) since the previous report to the file named by AAP_BENCH_LOOP_FILE, then starts afresh.
 * Plain JavaScript, so it loads into any build without a TypeScript loader.
 */
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.AAP_BENCH_LOOP_FILE;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  process.on('SIGUSR2', () => {
    const ms = (ns) => ns / 1e6;
    writeFileSync(file, JSON.stringify({ p99: ms(histogram.percentile(99)), max: ms(histogram.max) }));
    histogram.reset();
  });
}
