import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../../src/util/collect-garbage.js';

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
