import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { getHeapStatistics } from 'node:v8';
import { COLLECT_AFTER_GROWTH_BYTES } from '../../../src/openapi/load-catalog.js';
import { collectGarbage, collectingWhenGrown, compactHeap } from '../../../src/util/collect-garbage.js';

/** A weak reference to an object nothing else holds. */
function unreachable(): WeakRef<object> {
  return new WeakRef({ payload: new Array(1000).fill('x') });
}

describe('collectGarbage', () => {
  it('collects what is no longer reachable, each time it is called', async () => {
    for (let i = 0; i < 2; i++) {
      const ref = unreachable();
      // A WeakRef keeps its target for the rest of the turn it was made or read in.
      await nextTurn();
      collectGarbage();
      expect(ref.deref()).toBeUndefined();
    }
  });

  it("adds no gc to the proxy's own global scope", () => {
    const before = 'gc' in globalThis;
    collectGarbage();
    expect('gc' in globalThis).toBe(before);
  });
});

/**
 * When long loops collect (deriving a catalog, writing `capabilities --json`): once the memory in
 * use grew by the given bytes since the last collection, or when forced. The readings are scripted
 * in the first tests, so that the policy is what is checked; what it saves is the benchmarks'.
 */
const MiB = 1024 * 1024;

describe('collectingWhenGrown', () => {
  it('collects each time the heap has grown by the bytes since the last collection', () => {
    const readings = [100, 120, 163, 164, 150, 190, 213, 214, 160].map((n) => n * MiB);
    let reading = 0;
    const collected: number[] = [];
    const hook = collectingWhenGrown(
      64 * MiB,
      () => readings[reading++] as number,
      () => collected.push(reading),
    );
    // Base 100: 120 no, 163 no, 164 yes (then 150 is the base), 190 no, 213 no, 214 yes (then 160).
    const answers = Array.from({ length: 6 }, () => hook());
    expect(answers).toEqual([false, false, true, false, false, true]);
    expect(collected).toEqual([4, 8]);
    expect(reading).toBe(9);
  });

  it('collects when forced whatever the growth, and measures growth from there', () => {
    const readings = [100, 101, 90, 140, 154];
    let reading = 0;
    let collections = 0;
    const hook = collectingWhenGrown(
      64,
      () => readings[reading++] as number,
      () => collections++,
    );
    expect(hook(true)).toBe(true); // forced at 100: 101 after it is the base
    expect(hook()).toBe(false); // 90
    expect(hook()).toBe(false); // 140: 39 over the base
    expect(hook()).toBe(false); // 154: 53
    expect(collections).toBe(1);
  });

  it('by default reads V8 and collects for real, after 32 MiB of growth', () => {
    expect(COLLECT_AFTER_GROWTH_BYTES).toBe(32 * MiB);
    const before = getHeapStatistics().used_heap_size;
    const hook = collectingWhenGrown(1);
    // 8 MiB that nothing holds once made, in arrays large enough for V8's large-object space,
    // which only a full collection frees: without one, the used heap still counts them.
    let held: number[][] | undefined = Array.from({ length: 32 }, () => new Array<number>(65_536).fill(1));
    expect(held.length * (held[0]?.length ?? 0)).toBe(32 * 65_536);
    held = undefined;
    hook(); // grown by more than a byte: a full collection
    expect(getHeapStatistics().used_heap_size).toBeLessThan(before + 4 * MiB);
  });
});

describe('compactHeap', () => {
  it('collects three times, letting the event loop turn between the pauses', async () => {
    const events: string[] = [];
    let turns = 0;
    const ticking = setInterval(() => undefined, 0);
    const counting = (): void => {
      setImmediate(() => {
        turns += 1;
        if (events.length < 3) counting();
      });
    };
    counting();
    await compactHeap(() => events.push(`collect after ${turns} turns`));
    clearInterval(ticking);
    expect(events).toEqual(['collect after 0 turns', 'collect after 1 turns', 'collect after 2 turns']);
  });

  it('leaves V8 holding fewer pages than one collection, after most of the heap died', async () => {
    const held = (): number => getHeapStatistics().total_physical_size;
    /** 400,000 small objects spread over the heap, of which one in eight is kept. */
    const fragmented = (): object[] => {
      const all = Array.from({ length: 400_000 }, (_, i) => ({ a: i, b: [i, i + 1], c: `x${i}` }));
      return all.filter((_, i) => i % 8 === 0);
    };
    let kept = fragmented();
    await compactHeap();
    kept = fragmented();
    collectGarbage();
    const afterOne = held();
    await compactHeap();
    // What survived (a dozen MiB) moved onto fewer pages: about half of what one collection kept
    // (82-90 MiB against 29-55 in a script of its own).
    expect(held()).toBeLessThan(afterOne - 10 * MiB);
    expect(kept).toHaveLength(50_000);
  });
});
