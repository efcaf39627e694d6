/**
 * One full garbage collection, on request. Parsing a large API document (GitHub's is 13 MB of
 * JSON) leaves tens of MB of garbage (the text, the parser's intermediates) that V8 would collect
 * in its own time; collecting it once before the catalog is derived keeps it out of start-up's
 * peak memory (issue 14: ≤ 150 MB with GitHub's 1,223 operations; measured 152–156 → 139–144 MB).
 * V8 exposes `gc` only to contexts made after the flag is set, hence the fresh vm context: the
 * proxy's own global scope gets no `gc`.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc: (() => void) | undefined;

export function collectGarbage(): void {
  if (gc === undefined) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}

/**
 * A hook for long loops that make garbage faster than V8 collects it, letting the heap grow to
 * hold it (deriving a catalog, writing `capabilities --json`): a full collection each time the
 * memory JavaScript uses (heap and external, such as Buffers) has grown by `bytes` since the last
 * one, or since the hook was made. Growth rather than time, so that a small job is never
 * collected. It also collects when `force`d (the caller has a measure of its own), and says
 * whether it collected. `used` and `collect` are V8's unless a test gives its own.
 */
export function collectingWhenGrown(
  bytes: number,
  used: () => number = usedMemory,
  collect: () => void = collectGarbage,
): (force?: boolean) => boolean {
  let base = used();
  return (force = false) => {
    if (!force && used() - base < bytes) return false;
    collect();
    base = used();
    return true;
  };
}

/** The heap in use and the memory outside it that JavaScript objects hold (Buffers among it). */
function usedMemory(): number {
  const { used_heap_size: heap, external_memory: external } = getHeapStatistics();
  return heap + external;
}
