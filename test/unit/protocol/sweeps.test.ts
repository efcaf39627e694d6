/**
 * Sweeps in bounded batches (issue 17): a batch at a time, an event-loop turn between batches, a
 * short batch ends the run, and a run stops at its budget, leaving the rest to the next.
 */
import { describe, expect, it } from 'vitest';
import { SWEEP_BATCHES_PER_RUN, inBatches } from '../../../src/protocol/sweeps.js';

describe('inBatches', () => {
  it('runs batches until one comes back short, yielding to the event loop between them', async () => {
    let backlog = 25;
    const turns: string[] = [];
    const run = inBatches(() => {
      turns.push('batch');
      const n = Math.min(10, backlog);
      backlog -= n;
      return Promise.resolve(n);
    }, 10);
    // A request arriving now is served before the run ends, not after the whole backlog.
    setImmediate(() => turns.push('request'));
    expect(await run).toBe(25);
    expect(turns.filter((t) => t === 'batch')).toHaveLength(3);
    expect(turns[0]).toBe('batch');
    expect(turns.at(-1)).toBe('batch');
    expect(turns).toContain('request');
  });

  it('stops at the run budget, leaving the rest of a backlog to the next run', async () => {
    let calls = 0;
    const done = await inBatches(() => {
      calls++;
      return Promise.resolve(5);
    }, 5);
    expect(calls).toBe(SWEEP_BATCHES_PER_RUN);
    expect(done).toBe(5 * SWEEP_BATCHES_PER_RUN);
  });
});
