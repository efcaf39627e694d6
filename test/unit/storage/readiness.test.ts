/**
 * `/readyz`'s database check (src/storage/readiness.ts): one ping per interval however many
 * probes, a probe never held past the timeout, never a rejection, and the return noticed by itself.
 * The store's ping is scripted here; the real pings are the store contract's and outage.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import { DatabaseReadiness } from '../../../src/storage/readiness.js';

/** A ping answered by hand: each call waits until the test settles it. */
function scriptedPing(): {
  store: { ping(): Promise<void> };
  calls: () => number;
  answer: (ok: boolean) => void;
} {
  const pending: { resolve: () => void; reject: (err: Error) => void }[] = [];
  let calls = 0;
  return {
    store: {
      ping: () =>
        new Promise<void>((resolve, reject) => {
          calls++;
          pending.push({ resolve, reject });
        }),
    },
    calls: () => calls,
    answer: (ok) => {
      for (const p of pending.splice(0)) {
        if (ok) p.resolve();
        else p.reject(new Error('database unavailable: connect ECONNREFUSED'));
      }
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('DatabaseReadiness', () => {
  it('pings once for many probes within the interval, and again after it', async () => {
    let pings = 0;
    const readiness = new DatabaseReadiness(
      {
        ping: () => {
          pings++;
          return Promise.resolve();
        },
      },
      { intervalMs: 40, timeoutMs: 1_000 },
    );
    expect(await Promise.all([readiness.up(), readiness.up(), readiness.up()])).toEqual([true, true, true]);
    expect(await readiness.up()).toBe(true);
    expect(pings).toBe(1);
    await sleep(60);
    expect(await readiness.up()).toBe(true);
    expect(pings).toBe(2);
  });

  it('says down when the ping fails, never rejecting, and up again once one succeeds', async () => {
    const changes: boolean[] = [];
    let fail = true;
    const readiness = new DatabaseReadiness(
      { ping: () => (fail ? Promise.reject(new Error('down')) : Promise.resolve()) },
      { intervalMs: 20, timeoutMs: 1_000, onChange: (up) => changes.push(up) },
    );
    expect(await readiness.up()).toBe(false);
    fail = false;
    expect(await readiness.up()).toBe(false); // the cached answer, within the interval
    await sleep(30);
    expect(await readiness.up()).toBe(true);
    expect(changes).toEqual([false, true]);
  });

  it('answers "down" once the timeout passes, while the ping hangs, and shares the hanging ping', async () => {
    const ping = scriptedPing();
    const changes: boolean[] = [];
    const readiness = new DatabaseReadiness(ping.store, {
      intervalMs: 1_000,
      timeoutMs: 30,
      onChange: (up) => changes.push(up),
    });
    const started = performance.now();
    expect(await readiness.up()).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
    // Within the interval the answer is cached: no second ping while the first hangs.
    expect(await readiness.up()).toBe(false);
    expect(ping.calls()).toBe(1);
    ping.answer(true);
    await sleep(0);
    expect(await readiness.up()).toBe(true);
    expect(changes).toEqual([false, true]);
  });

  it('says nothing while the database stays up', async () => {
    const changes: boolean[] = [];
    const readiness = new DatabaseReadiness(
      { ping: () => Promise.resolve() },
      { intervalMs: 1, timeoutMs: 100, onChange: (up) => changes.push(up) },
    );
    for (let i = 0; i < 3; i++) {
      expect(await readiness.up()).toBe(true);
      await sleep(2);
    }
    expect(changes).toEqual([]);
  });
});
