/**
 * Tests that run the built CLI (`node dist/cli.js`) as an operator would. No import from src/:
 * these tests check the build, not the sources.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(ROOT, 'dist/cli.js');

/** Builds dist/ when it is missing (the pretest step normally has); true when the CLI exists. */
export function ensureBuiltCli(): boolean {
  if (!existsSync(CLI)) {
    try {
      execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'ignore' });
    } catch {
      // tsc reports type errors with a non-zero exit but still emits; the caller checks the file.
    }
  }
  return existsSync(CLI);
}

/** Kills, by PID, every child that is still running, and forgets them all. */
export function killChildren(children: Set<ChildProcess>): void {
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  children.clear();
}
