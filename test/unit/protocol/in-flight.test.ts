/** Fair share (issue 10 class 7): the in-flight counters behind `rate_limits.in_flight_*`. */
import { describe, expect, it } from 'vitest';
import { InFlightSlots, type Slot } from '../../../src/protocol/in-flight.js';

const A1 = { agentId: 'a1', hostId: 'h1' };
const A2 = { agentId: 'a2', hostId: 'h1' };
const B1 = { agentId: 'b1', hostId: 'h2' };

function take(slots: InFlightSlots, owner: { agentId: string; hostId: string }): Slot {
  const result = slots.acquire(owner);
  if (!result.ok) throw new Error(`refused: ${result.scope}`);
  return result.slot;
}

describe('InFlightSlots', () => {
  it('an agent at its cap is refused while an agent of another host still gets a slot', () => {
    const slots = new InFlightSlots({ perAgent: 2, perHost: 10, total: 10 });
    take(slots, A1);
    take(slots, A1);
    expect(slots.acquire(A1)).toEqual({ ok: false, scope: 'agent', limit: 2 });
    expect(slots.acquire(B1).ok).toBe(true);
    expect(slots.count({ agentId: 'a1' })).toBe(2);
  });

  it('a host cannot exceed its cap by spreading calls over many agents', () => {
    const slots = new InFlightSlots({ perAgent: 2, perHost: 3, total: 10 });
    take(slots, A1);
    take(slots, A1);
    take(slots, A2);
    expect(slots.acquire(A2)).toEqual({ ok: false, scope: 'host', limit: 3 });
    expect(slots.acquire({ agentId: 'a3', hostId: 'h1' })).toEqual({ ok: false, scope: 'host', limit: 3 });
    expect(slots.acquire(B1).ok).toBe(true);
  });

  it('the total cap holds over every host', () => {
    const slots = new InFlightSlots({ perAgent: null, perHost: null, total: 2 });
    take(slots, A1);
    take(slots, B1);
    expect(slots.acquire({ agentId: 'c1', hostId: 'h3' })).toEqual({ ok: false, scope: 'total', limit: 2 });
  });

  it('a refusal changes no counter (refused calls cannot pile up phantom slots)', () => {
    const slots = new InFlightSlots({ perAgent: 1, perHost: 5, total: 5 });
    const held = take(slots, A1);
    for (let i = 0; i < 100; i++) expect(slots.acquire(A1).ok).toBe(false);
    expect(slots.count()).toBe(1);
    expect(slots.count({ hostId: 'h1' })).toBe(1);
    held.release();
    expect(slots.acquire(A1).ok).toBe(true);
  });

  it('releasing a slot twice frees it once (a double release cannot grant an extra slot)', () => {
    const slots = new InFlightSlots({ perAgent: 2, perHost: 10, total: 10 });
    const first = take(slots, A1);
    take(slots, A1);
    first.release();
    first.release();
    first.release();
    expect(slots.count({ agentId: 'a1' })).toBe(1);
    take(slots, A1);
    expect(slots.acquire(A1)).toEqual({ ok: false, scope: 'agent', limit: 2 });
    expect(slots.count()).toBe(2);
  });

  it('forgets owners with nothing in flight, so memory follows the calls running, not the agents seen', () => {
    const slots = new InFlightSlots({ perAgent: 1, perHost: 1, total: null });
    for (let i = 0; i < 1000; i++) take(slots, { agentId: `a${i}`, hostId: `h${i}` }).release();
    expect(slots.tracked).toBe(0);
    expect(slots.count()).toBe(0);
  });

  it('null disables a cap', () => {
    const slots = new InFlightSlots({ perAgent: null, perHost: null, total: null });
    for (let i = 0; i < 500; i++) take(slots, A1);
    expect(slots.count({ agentId: 'a1' })).toBe(500);
  });

  it('refuses a cap that is not a positive whole number when built', () => {
    expect(() => new InFlightSlots({ perAgent: 0, perHost: null, total: null })).toThrow(RangeError);
    expect(() => new InFlightSlots({ perAgent: null, perHost: 1.5, total: null })).toThrow(RangeError);
  });
});
