/**
 * §4.6 replay record: the verified token's jti is used up and the principal's use recorded
 * (§2.4). It runs only after the token is verified and within its principal's limits, so a
 * forged, replayed or throttled request leaves nothing in the replay cache.
 */
import { acceptAgent, acceptHost } from '../../protocol/authenticate.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { step, type SharedStep } from '../pipeline.js';

export function replayRecord(ctx: ProtocolContext): SharedStep {
  // A promise only when the ledger is shared by replicas (PostgreSQL): one round trip.
  return step('replay-record', (x) => {
    if (x.agent) return acceptAgent(ctx, x.agent);
    if (x.host) return acceptHost(ctx, x.host);
    return undefined;
  });
}
