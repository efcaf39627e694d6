/**
 * Preloaded (`node --import`) into a benchmark's child process: at exit, writes the process's peak
 * resident set size in KiB to the file named by BENCH_MAX_RSS_FILE, so the parent can measure a
 * real CLI command (serve, capabilities --json) without changing it.
 */
import { writeFileSync } from 'node:fs';
import process from 'node:process';

const file = process.env.BENCH_MAX_RSS_FILE;
if (file) {
  process.on('exit', () => {
    writeFileSync(file, String(process.resourceUsage().maxRSS));
  });
}
