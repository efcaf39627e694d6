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
import { setImmediate as nextTurn } from 'node:timers/promises';

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

/**
 * Full collections, a turn of the event loop apart (each is a pause: 50-75 ms for Microsoft
 * Graph's heap), for after a catalog was replaced. One collection frees the dead objects but V8
 * keeps the pages they were spread over, most of them partly used; the next ones move what
 * survived onto fewer pages and give the rest back. Microsoft Graph, five reloads of a changed
 * document: resident after each 216-246 MiB with one collection, 216-221 with two, 177-187 with
 * three (as at start-up), 177-186 with four; and the peak of the next reload, which comes on top,
 * 266 MiB, 235-239, 234-235 and 230.
 */
export async function compactHeap(collect: () => void = collectGarbage, collections = 3): Promise<void> {
  for (let i = 0; i < collections; i++) {
    if (i > 0) await nextTurn();
    collect();
  }
}
