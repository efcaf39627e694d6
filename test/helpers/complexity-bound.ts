/**
 * Complexity bounds, not benchmarks: `code` runs in a vm that interrupts it after BOUND_MS, which a
 * test timeout cannot do to synchronous code. The linear work these tests give it takes at most
 * 1.5 s on a 2-core machine busy with the rest of the suite (the slowest, 42 MB of `format: regex`,
 * 1.1 s alone); the backtracking they guard against (quadratic, cubic, exponential) takes minutes
 * to hours on the same input. 10 s separates the two with room for a loaded machine; 2 s did not
 * (two timeouts in twenty runs beside other work).
 */
import { runInNewContext } from 'node:vm';

export const BOUND_MS = 10_000;

/** What `code` returns, evaluated with `context`'s names in scope; throws past BOUND_MS. */
export function runBounded(code: string, context: Record<string, unknown>): unknown {
  return runInNewContext(code, context, { timeout: BOUND_MS });
}
