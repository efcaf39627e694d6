/**
 * The usage flush (usage.ts) over a store that fails on demand: a failed batch is retried as it
 * was, under the same id (the store applies an id at most once: a retry after a lost commit answer
 * must not count twice), before newer uses, and never by two flushes at once.
 */
import { describe, expect, it } from 'vitest';
import { UsageTracker } from '../../../src/protocol/usage.js';
import type { GrantUse, Store } from '../../../src/storage/types.js';

interface Touch {
  readonly grants: Map<string, number>;
  readonly id: string | undefined;
}

/** A store whose `touch` records each batch, failing while `failing()`, resolving when `gate` says. */
function fakeStore(failing: () => boolean, gate: () => Promise<void> = () => Promise.resolve()) {
  const touches: Touch[] = [];
  const store = {
    touch: async (
      _agents: ReadonlyMap<string, number>,
      _hosts: ReadonlyMap<string, number>,
      grants: ReadonlyMap<string, GrantUse> = new Map(),
      id?: string,
    ): Promise<void> => {
      touches.push({ grants: new Map([...grants].map(([g, u]) => [g, u.uses])), id });
      await gate();
      if (failing()) throw new Error('connection terminated');
    },
  } as unknown as Store;
  return { store, touches };
}

describe('UsageTracker flush', () => {
  it('retries a failed batch as it was, same id, then what was recorded since, in its own batch', async () => {
    let down = true;
    const { store, touches } = fakeStore(() => down);
    const usage = new UsageTracker(store);
    usage.recordGrant('g1', 1);
    usage.recordGrant('g1', 2);
    await usage.flush();
    usage.recordGrant('g1', 3);
    // Meanwhile the page counts both: the failed batch and the newer use.
    expect(usage.grantUse('g1', undefined)).toEqual({ uses: 3, lastUsedAt: 3 });
    down = false;
    await usage.flush();
    expect(touches.map((t) => [t.id, t.grants.get('g1')])).toEqual([
      [touches[0]?.id, 2],
      [touches[0]?.id, 2],
      [expect.not.stringMatching(touches[0]?.id ?? ''), 1],
    ]);
    expect(usage.grantUse('g1', { uses: 3, lastUsedAt: 3 })).toEqual({ uses: 3, lastUsedAt: 3 });
  });

  it('a flush called while one runs waits for it: a failed batch is never sent by two at once', async () => {
    let release!: () => void;
    let held = new Promise<void>((resolve) => (release = resolve));
    let down = true;
    const { store, touches } = fakeStore(
      () => down,
      () => held,
    );
    const usage = new UsageTracker(store);
    usage.recordGrant('g1', 1);
    const first = usage.flush();
    usage.recordGrant('g2', 2);
    const second = usage.flush();
    const third = usage.flush(); // shares the second: one more flush after the running one
    expect(touches).toHaveLength(1);
    down = true;
    release();
    await first;
    held = Promise.resolve();
    down = false;
    await Promise.all([second, third]);
    // g1's batch (failed) again, then g2's: each once, in order.
    expect(touches.map((t) => [...t.grants.keys()])).toEqual([['g1'], ['g1'], ['g2']]);
  });
});
