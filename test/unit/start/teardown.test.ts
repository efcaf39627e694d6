import { describe, expect, it } from 'vitest';
import { Teardown } from '../../../src/start/teardown.js';

describe('start-up teardown', () => {
  it('a failed step closes what was opened before it, newest first, then passes the error on', async () => {
    const teardown = new Teardown();
    const closed: string[] = [];
    expect(await teardown.step(() => 'listeners')).toBe('listeners');
    teardown.add(() => {
      closed.push('listeners');
      return undefined;
    });
    teardown.add(() => {
      closed.push('upstream client');
      return Promise.resolve();
    });
    const failure = new Error('database cannot be reached');
    await expect(
      teardown.step(() => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(closed).toEqual(['upstream client', 'listeners']);
    // Each is closed once: a later failure finds nothing left to close.
    await expect(teardown.step(() => Promise.reject(new Error('again')))).rejects.toThrow('again');
    expect(closed).toHaveLength(2);
  });

  it('closes nothing while the steps succeed', async () => {
    const teardown = new Teardown();
    let closed = 0;
    teardown.add(() => {
      closed++;
      return Promise.resolve();
    });
    expect(await teardown.step(() => Promise.resolve(42))).toBe(42);
    expect(closed).toBe(0);
  });
});
