import { describe, expect, it } from 'vitest';
import { RETIRED_SECRET_KEEP_MS, RetiredSecrets } from '../../../src/upstream/retired-secrets.js';

function clockAt(start: number): { now(): number; advance(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => (now += ms) };
}

describe('secrets a reload replaced', () => {
  it('are redacted for a day, unless they are in force again', () => {
    const clock = clockAt(1_000);
    const retired = new RetiredSecrets(clock);
    expect(retired.list()).toEqual([]);
    retired.retire(['key-a', 'key-b'], ['key-b', 'key-c']);
    expect(retired.list()).toEqual(['key-a']);
    // Back in force (a reload rolled back): no longer listed as retired.
    retired.retire(['key-b', 'key-c'], ['key-a']);
    expect([...retired.list()].sort()).toEqual(['key-b', 'key-c']);
    clock.advance(RETIRED_SECRET_KEEP_MS - 1);
    expect(retired.list()).toHaveLength(2);
    clock.advance(1);
    expect(retired.list()).toEqual([]);
  });

  it('keeps at most 64, dropping the oldest', () => {
    const retired = new RetiredSecrets(clockAt(0));
    for (let i = 0; i < 70; i++) retired.retire([`key-${i}`], []);
    const listed = retired.list();
    expect(listed).toHaveLength(64);
    expect(listed[0]).toBe('key-6');
    expect(listed.at(-1)).toBe('key-69');
  });
});
