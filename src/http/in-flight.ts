/**
 * The HTTP side of the in-flight caps (src/protocol/in-flight.ts): a full cap is `429
 * rate_limited` with `Retry-After` (§8.13). Slots free up as calls finish, not on a schedule, so
 * there is no exact time to give: the client is told to retry after one second.
 */
import { ProtocolError } from '../errors.js';
import type { InFlightSlots, Slot, SlotOwner } from '../protocol/in-flight.js';

export const IN_FLIGHT_RETRY_AFTER_SEC = 1;

const WHO = { agent: 'This agent', host: "This agent's host", total: 'The proxy' } as const;

/** A slot for `owner`'s upstream call, or a 429. The caller releases it when the call is over. */
export function takeUpstreamSlot(slots: InFlightSlots, owner: SlotOwner): Slot {
  const result = slots.acquire(owner);
  if (result.ok) return result.slot;
  throw new ProtocolError(
    'rate_limited',
    `${WHO[result.scope]} already has ${result.limit} upstream calls in flight; retry when one has finished.`,
    { headers: { 'retry-after': String(IN_FLIGHT_RETRY_AFTER_SEC) } },
  );
}
