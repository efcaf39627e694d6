/**
 * When loading collects garbage while deriving (load-catalog.ts): once the used heap has grown by
 * the given bytes since the last collection, and not before. The heap readings are scripted, so
 * that the policy is what is checked; what it saves is the corpus benchmark's figure (README).
 */
import { describe, expect, it } from 'vitest';
import { collectingWhenGrown, COLLECT_AFTER_GROWTH_BYTES } from '../../../src/openapi/load-catalog.js';
import { getHeapStatistics } from 'node:v8';

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
    for (let i = 0; i < 6; i++) hook();
    expect(collected).toEqual([4, 8]);
    expect(reading).toBe(9);
  });

  it('by default reads V8 and collects for real, after 64 MiB of growth', () => {
    expect(COLLECT_AFTER_GROWTH_BYTES).toBe(64 * MiB);
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
