/**
 * Drift at a reload or start-up outlasts write conflicts (storage/conflicts.ts): a conflict is
 * run again after a growing wait, anything else is not.
 */
import { describe, expect, it } from 'vitest';
import { StoreConflictError, StoreUnavailableError } from '../../../src/errors.js';
import { outlastingConflicts } from '../../../src/storage/conflicts.js';

function failing(errors: readonly Error[]): { write: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    write: () => {
      const err = errors[calls++];
      return err ? Promise.reject(err) : Promise.resolve('done');
    },
    calls: () => calls,
  };
}

describe('outlastingConflicts', () => {
  it('runs a write again after each conflict, waiting longer each time, until it succeeds', async () => {
    const waits: number[] = [];
    const w = failing([1, 2, 3].map(() => new StoreConflictError('conflicted')));
    const result = await outlastingConflicts(w.write, 6, (ms) => {
      waits.push(ms);
      return Promise.resolve();
    });
    expect(result).toBe('done');
    expect(w.calls()).toBe(4);
    expect(waits).toHaveLength(3);
    // Jittered around 50, 100, 200 ms.
    waits.forEach((ms, i) => {
      expect(ms).toBeGreaterThanOrEqual(25 * 2 ** i);
      expect(ms).toBeLessThan(75 * 2 ** i);
    });
  });

  it('gives up after its rounds with the last conflict', async () => {
    const w = failing([1, 2, 3, 4].map((n) => new StoreConflictError(`conflict ${n}`)));
    await expect(outlastingConflicts(w.write, 2, () => Promise.resolve())).rejects.toThrow('conflict 3');
    expect(w.calls()).toBe(3);
  });

  it('does not run again after a database that cannot be reached, or any other failure', async () => {
    for (const err of [new StoreUnavailableError('gone'), new Error('bug')]) {
      const w = failing([err]);
      await expect(outlastingConflicts(w.write, 6, () => Promise.resolve())).rejects.toBe(err);
      expect(w.calls()).toBe(1);
    }
  });
});
