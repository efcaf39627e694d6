/**
 * Large-spec benchmark: a generated OpenAPI 3.0 document with over 1,000 operations and several
 * MB, loaded by the real proxy from start to readiness, in fresh processes. Prints the median.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { syntheticSpec } from '../test/helpers/synthetic-spec.js';

export interface CatalogBenchResult {
  readonly operations: number;
  readonly sizeMiB: number;
  readonly medianMs: number;
  readonly maxRssMiB: number;
}

export function runCatalogBench(runs = 3): CatalogBenchResult {
  const dir = mkdtempSync(join(tmpdir(), 'aap-bench-'));
  try {
    const file = join(dir, 'large.json');
    writeFileSync(file, JSON.stringify(syntheticSpec(240, 100), null, 2));
    const results: { ms: number; capabilities: number; maxRssMiB: number }[] = [];
    for (let i = 0; i < runs; i++) {
      const out = execFileSync(
        process.execPath,
        ['--import', 'tsx', new URL('./catalog-child.ts', import.meta.url).pathname, file],
        {
          encoding: 'utf8',
          timeout: 120_000,
        },
      );
      results.push(JSON.parse(out) as { ms: number; capabilities: number; maxRssMiB: number });
    }
    const sorted = [...results].sort((a, b) => a.ms - b.ms);
    const median = sorted[Math.floor(sorted.length / 2)] as { ms: number; capabilities: number };
    return {
      operations: median.capabilities,
      sizeMiB: statSync(file).size / 2 ** 20,
      medianMs: median.ms,
      maxRssMiB: Math.max(...results.map((r) => r.maxRssMiB)),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
