/**
 * Replay protection (§4.6, §8.4): each accepted JWT's `jti` once per principal within its window,
 * held in memory (replay-cache.ts) and written ahead to the ledger (storage/replay-ledger.ts) so
 * that a restart, or another replica, forgets none.
 */
import { ProtocolError } from '../errors.js';
import type { ProtocolContext } from './context.js';
import { JwtError, MAX_CLOCK_SKEW_MS, replayHorizonMs, type Claims } from './jwt.js';

/**
 * §4.6 / §8.4: a jti is accepted once per principal (`partition`, e.g. `agent:${sub}` or
 * `host:${iss}`) within its effective window (§8.2). Called only for a token that is verified and
 * within its principal's limits, so that nothing else is ever remembered. Throws on a replay
 * (401), when the principal holds its cap of remembered jtis (429) and when the cache is full or
 * the ledger cannot record it (503).
 *
 * Memory first (the replay cache: the bound, and a replay to this process costs no I/O), then the
 * ledger (storage/replay-ledger.ts), then memory keeps it. The SQLite journal answers at once, so
 * this stays synchronous; the PostgreSQL table answers after one round trip (an INSERT … ON
 * CONFLICT DO NOTHING), the judge of a replay to another replica. Memory keeps the jti before that
 * answer, so that the same token sent twice at once to this replica is refused without waiting;
 * a jti whose recording then fails stays used up here (503: the client signs a new one).
 */
export function rememberJti(ctx: ProtocolContext, partition: string, claims: Claims): void | Promise<void> {
  const policy = {
    // The most skew any policy may allow, not the one in force: a reload (or a restart) that
    // raises it makes a used JWT acceptable again until its exp + the new skew, so its jti must
    // be remembered that long already (at most 30 s more than the skew in force asks).
    clockSkewSec: MAX_CLOCK_SKEW_MS / 1000,
    maxLifetimeSec: ctx.policy.lifetimes.maxJwtLifetimeSec,
  };
  let untilMs: number;
  try {
    untilMs = replayHorizonMs(claims, policy);
  } catch (err) {
    if (err instanceof JwtError) throw new ProtocolError('invalid_jwt', err.message);
    throw err;
  }
  const jti = String(claims.jti);
  const verdict = ctx.replay.check(partition, jti, untilMs);
  switch (verdict) {
    case 'replay':
      throw replayed();
    case 'identity_full': {
      const retryAfter = ctx.replay.retryAfterSec(partition);
      throw new ProtocolError(
        'rate_limited',
        `This principal already has ${ctx.replay.maxPerIdentity} JWTs within their validity window, the most one identity may have (policy replay.max_entries_per_identity); retry in ${retryAfter} s.`,
        { headers: { 'retry-after': String(retryAfter) } },
      );
    }
    case 'full': {
      const retryAfter = ctx.replay.retryAfterSec();
      throw new ProtocolError(
        'temporarily_unavailable',
        `Replay protection is at capacity (policy replay.max_entries = ${ctx.replay.maxEntries}); retry in ${retryAfter} s.`,
        { headers: { 'retry-after': String(retryAfter) } },
      );
    }
    case 'fresh':
    case 'extend':
      break;
  }
  let recorded: boolean | Promise<boolean> = true;
  if (ctx.replayLedger && untilMs > ctx.clock.now()) {
    try {
      recorded = ctx.replayLedger.record({ identity: partition, jti, expiresAt: untilMs });
    } catch (err) {
      // Written ahead: nothing is kept, and the request is refused.
      throw ledgerFailed(ctx, err);
    }
  }
  ctx.replay.keep(partition, jti, untilMs);
  if (recorded instanceof Promise) {
    const answered = recorded.then(
      (fresh) => {
        if (!fresh) throw replayed();
      },
      (err: unknown) => {
        throw ledgerFailed(ctx, err);
      },
    );
    if (verdict !== 'extend') return answered;
    // A replay either way: the record only made the ledger remember it longer.
    void answered.catch(() => undefined);
  }
  if (verdict === 'extend' || recorded === false) throw replayed();
}

function replayed(): ProtocolError {
  return new ProtocolError('invalid_jwt', 'This JWT (jti) was already used; sign a new one per request.');
}

/** The ledger refused the record (disk full, database unreachable): a later check could miss this jti. */
function ledgerFailed(ctx: ProtocolContext, err: unknown): ProtocolError {
  ctx.logger.error('replay ledger write failed', { error: err instanceof Error ? err.message : String(err) });
  return new ProtocolError('temporarily_unavailable', 'Replay protection is unavailable; retry shortly.', {
    headers: { 'retry-after': '1' },
  });
}
