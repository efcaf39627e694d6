/**
 * Notification streams (§10.10.2) of hosts nobody approved share one part of the total: anyone
 * can make such hosts, and before, 32 of them with 8 agents each held all 1,000 streams, leaving
 * none for approved hosts.
 */
import { describe, expect, it } from 'vitest';
import {
  NotificationStreamSlots,
  UNAPPROVED_STREAM_SHARE,
} from '../../../src/http/routes/approval-events.js';

const owner = (n: number) => ({ agentId: `agt_${n}`, hostId: `hst_${n}` });

describe('NotificationStreamSlots', () => {
  it(`hosts nobody approved get ${UNAPPROVED_STREAM_SHARE * 100} % of the total; approved ones the rest, and a refusal takes nothing`, () => {
    const slots = new NotificationStreamSlots({ perAgent: 4, perHost: 32, total: 10 });
    const strangers = [slots.acquire(owner(1), true), slots.acquire(owner(2), true)];
    expect(() => slots.acquire(owner(3), true)).toThrow(/Hosts awaiting approval already have 2/);
    const approved = Array.from({ length: 8 }, (_, n) => slots.acquire(owner(10 + n), false));
    expect(() => slots.acquire(owner(20), false)).toThrow(/The proxy already has 10/);
    // A stranger's slot freed is a stranger's to take again; the total still binds.
    strangers[0]?.release();
    const again = slots.acquire(owner(4), true);
    expect(() => slots.acquire(owner(5), true)).toThrow(/awaiting approval/);
    for (const s of [...approved, again, strangers[1]]) s?.release();
    expect(Array.from({ length: 10 }, (_, n) => slots.acquire(owner(30 + n), false))).toHaveLength(10);
  });

  it('a stranger refused by the per-agent cap keeps no share', () => {
    const slots = new NotificationStreamSlots({ perAgent: 1, perHost: 32, total: 10 });
    slots.acquire(owner(1), true);
    expect(() => slots.acquire(owner(1), true)).toThrow(/This agent already has 1/);
    slots.acquire(owner(2), true);
    expect(() => slots.acquire(owner(3), true)).toThrow(/awaiting approval/);
  });
});
