/**
 * `npx tsx bench/profile-top.ts DIR [N]`: the top N functions by self time in the CPU profiles
 * that `AAP_BENCH_PROFILE=DIR npm run bench -- execute` wrote, the proxy's beside the floor's, as
 * a share of each process's busy time (idle left out). The floor runs under tsx, whose loader
 * thread writes a second, small profile: the largest file of a folder is the process's own.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: {
      readonly functionName: string;
      readonly url: string;
      readonly lineNumber: number;
    };
  }[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

interface SelfTimes {
  readonly busyUs: number;
  readonly byFunction: Map<string, number>;
}

const [dir = '', count = '25'] = process.argv.slice(2);
if (!dir) {
  console.error('usage: npx tsx bench/profile-top.ts DIR [N]   (DIR as given to AAP_BENCH_PROFILE)');
  process.exit(2);
}

function largestProfile(folder: string): string {
  const files = readdirSync(folder)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(folder, f));
  if (files.length === 0) throw new Error(`${folder}: no .cpuprofile`);
  return files.reduce((a, b) => (statSync(a).size >= statSync(b).size ? a : b));
}

function selfTimes(file: string): SelfTimes {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const byFunction = new Map<string, number>();
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    const frame = nodes.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') return;
    const us = profile.timeDeltas[i] ?? 0;
    busyUs += us;
    // Paths shortened to the package or the project folder, so the table reads across machines.
    const where = frame.url.replace(/^.*\/(node_modules\/[^/]+|dist|src|bench)\//, '$1/');
    const name = `${frame.functionName || '(anonymous)'}${where ? ` ${where}:${frame.lineNumber + 1}` : ''}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
  });
  return { busyUs, byFunction };
}

function print(label: string, times: SelfTimes): void {
  console.log(`${label}: busy ${(times.busyUs / 1e6).toFixed(2)} s`);
  const top = [...times.byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(count));
  for (const [name, us] of top) {
    console.log(`  ${((100 * us) / times.busyUs).toFixed(1).padStart(5)} %  ${name}`);
  }
}

print('proxy', selfTimes(largestProfile(join(dir, 'proxy'))));
print('floor', selfTimes(largestProfile(join(dir, 'floor'))));
