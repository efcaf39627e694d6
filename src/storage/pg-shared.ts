/**
 * What replicas on one PostgreSQL share beyond the Store contract (issue 13): the JWT ids they
 * accepted (§4.6) and the §8.13 rate budgets, in migration 2's tables (pg-schema.ts). Each call
 * is one autocommit statement on the pool, found by primary key: one round trip.
 *
 * Rate budgets are util/rate-limit.ts's token buckets, same integer arithmetic, updated in place
 * by `INSERT … ON CONFLICT DO UPDATE … RETURNING`: the row lock makes concurrent takes from any
 * replica run one after another, so a budget of N admits N whoever asks. The tolerance is the
 * replicas' clock skew: each passes its own `now`, and a bucket's time never goes back
 * (GREATEST), so a replica running behind refills nothing until it catches up; a replica δ ms
 * ahead lets a bucket refill up to δ × count / window requests early. A crash of the database
 * (the table is UNLOGGED) gives every client a fresh burst.
 */
import type { Clock } from '../clock.js';
import {
  checkLimit,
  creditAt,
  retryAfterSec,
  type Limiter,
  type RateTake,
  type RateVerdict,
} from '../util/rate-limit.js';
import type { Query } from './pg-reader.js';
import type { ReplayLedger } from './replay-ledger.js';
import type { SeenJti } from './types.js';

/** A shared bucket as stored: its credit (tokens × window ms), when, and under which window. */
export interface StoredBucket {
  readonly credit: number;
  readonly at: number;
  readonly windowMs: number;
}

export class PgShared {
  readonly #takes = new Map<number, string>();

  constructor(private readonly query: Query) {}

  /** §4.6: true when (identity, jti) was new; false when recorded before (its expiry raised if later). */
  async recordJti(seen: SeenJti): Promise<boolean> {
    const params = [seen.identity, seen.jti, seen.expiresAt];
    const inserted = await this.query(
      'INSERT INTO seen_jtis (identity, jti, expires_at) VALUES ($1, $2, $3) ON CONFLICT (identity, jti) DO NOTHING',
      params,
      'agent_auth_proxy_record_jti',
    );
    if (inserted.rowCount === 1) return true;
    // A replay: off the accepted path. A later-expiring token reusing the jti is remembered to its end.
    await this.query(
      'UPDATE seen_jtis SET expires_at = $3 WHERE identity = $1 AND jti = $2 AND expires_at < $3',
      params,
    );
    return false;
  }

  /** Deletes at most `limit` jtis whose window ended at or before `now`, earliest first; how many. */
  async deleteExpiredJtis(now: number, limit: number): Promise<number> {
    // ctid: the rows just locked, deleted where they are (a TID scan), whatever their key.
    const { rowCount } = await this.query(
      `DELETE FROM seen_jtis WHERE ctid = ANY (ARRAY(SELECT ctid FROM seen_jtis WHERE expires_at <= $1
        ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      [now, limit],
    );
    return rowCount ?? 0;
  }

  /**
   * Takes one request from each bucket in order, stopping at the first with none left (Limiter's
   * `take`), in one statement: one round trip whatever the number of buckets.
   */
  async takeRates(now: number, takes: readonly RateTake[]): Promise<RateVerdict> {
    if (takes.length === 0) return { ok: true };
    let sql = this.#takes.get(takes.length);
    if (sql === undefined) {
      sql = takeStatement(takes.length);
      this.#takes.set(takes.length, sql);
    }
    const params: unknown[] = [now];
    for (const { key, limit } of takes) params.push(key, limit.count, limit.windowMs);
    // Prepared: planning this statement costs several times running it (measured: ~1.5 ms vs ~0.3 ms).
    const { rows } = await this.query(sql, params, `agent_auth_proxy_take_${takes.length}`);
    const byStage = new Map(rows.map((r) => [r.stage as number, r]));
    for (let i = 0; i < takes.length; i++) {
      const row = byStage.get(i);
      if (row === undefined || row.admitted === true) continue;
      return {
        ok: false,
        refused: i,
        retryAfterSec: retryAfterSec(row.credit as number, (takes[i] as RateTake).limit),
      };
    }
    return { ok: true };
  }

  /** Gives one request back to `key`'s bucket, up to full; no bucket is full already. */
  async giveRate(now: number, { key, limit }: RateTake): Promise<void> {
    await this.query(GIVE_STATEMENT, [now, key, limit.count, limit.windowMs], 'agent_auth_proxy_give');
  }

  /** A bucket as stored, for a check that takes nothing; undefined when there is none (full). */
  async rateBucket(key: string): Promise<StoredBucket | undefined> {
    const { rows } = await this.query('SELECT credit, at, window_ms FROM rate_buckets WHERE key = $1', [key]);
    const row = rows[0];
    return row === undefined
      ? undefined
      : { credit: row.credit as number, at: row.at as number, windowMs: row.window_ms as number };
  }

  /** Deletes at most `limit` buckets full again at `now` (the same as none); how many. */
  async deleteFullRateBuckets(now: number, limit: number): Promise<number> {
    const { rowCount } = await this.query(
      `DELETE FROM rate_buckets WHERE key = ANY (ARRAY(SELECT key FROM rate_buckets WHERE full_at <= $1
        ORDER BY full_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
      [now, limit],
    );
    return rowCount ?? 0;
  }
}

/**
 * `n` chained upserts, one per bucket: stage i runs only if stage i − 1 admitted (it reads that
 * stage's RETURNING), so a refused take leaves the wider buckets after it untouched. Parameters:
 * $1 now, then key, count, window per stage. In SET every expression reads the row as it was.
 * Stages lock distinct rows in the callers' fixed order (agent, host, user, everyone), so two
 * statements cannot wait on each other in a cycle.
 */
function takeStatement(n: number): string {
  const now = '$1::bigint';
  const stages: string[] = [];
  const results: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = `$${2 + 3 * i}`;
    const count = `$${3 + 3 * i}::bigint`;
    const win = `$${4 + 3 * i}::bigint`;
    const { cap, available } = bucketCredit(now, count, win);
    const ok = `(${available} >= ${win})`;
    const left = `(${available} - CASE WHEN ${ok} THEN ${win} ELSE 0 END)`;
    const at = `GREATEST(b.at, ${now})`;
    stages.push(`t${i} AS (
      INSERT INTO rate_buckets AS b (key, credit, at, window_ms, admitted, full_at)
        SELECT ${key}, ${cap} - ${win}, ${now}, ${win}, true, ${now} + ceil(${win}::numeric / ${count})::bigint
        ${i === 0 ? '' : `WHERE (SELECT admitted FROM t${i - 1})`}
      ON CONFLICT (key) DO UPDATE SET admitted = ${ok}, credit = ${left}, at = ${at}, window_ms = ${win},
        full_at = ${at} + ceil((${cap} - ${left})::numeric / ${count})::bigint
      RETURNING admitted, credit)`);
    results.push(`SELECT ${i} AS stage, admitted, credit FROM t${i}`);
  }
  return `WITH ${stages.join(',\n')}\n${results.join(' UNION ALL ')}`;
}

/**
 * A stored bucket `b` in SQL: its capacity, and its credit at `now` under the limit (`count`,
 * `win`): rescaled if its window changed, refilled for the time since, never past full.
 */
function bucketCredit(now: string, count: string, win: string): { cap: string; available: string } {
  const cap = `${count} * ${win}`;
  const stored = `CASE WHEN b.window_ms = ${win} THEN b.credit ELSE floor(b.credit::numeric / b.window_ms * ${win})::bigint END`;
  // Elapsed time past a window adds nothing (a bucket refills from empty within one), and
  // capping it keeps the product within bigint however long the bucket sat idle.
  const available = `LEAST(${cap}, ${stored} + LEAST(GREATEST(0, ${now} - b.at), ${win}) * ${count})`;
  return { cap, available };
}

/**
 * One request back to a bucket: its credit now plus one window, never past full. Parameters:
 * $1 now, $2 key, $3 count, $4 window.
 */
const GIVE_STATEMENT = (() => {
  const now = '$1::bigint';
  const count = '$3::bigint';
  const win = '$4::bigint';
  const { cap, available } = bucketCredit(now, count, win);
  const credit = `LEAST(${cap}, ${available} + ${win})`;
  const at = `GREATEST(b.at, ${now})`;
  return `UPDATE rate_buckets AS b SET credit = ${credit}, at = ${at}, window_ms = ${win},
    full_at = ${at} + ceil((${cap} - ${credit})::numeric / ${count})::bigint WHERE b.key = $2`;
})();

/**
 * How long past its window a jti stays in the shared ledger. The sweep runs on one replica's
 * clock; a replica whose clock is behind still accepts the token for that much longer, and
 * must still find its jti (README: replicas' clocks within a minute of each other).
 */
export const REPLICA_CLOCK_MARGIN_MS = 60_000;

/** The replay ledger of replicas (replay-ledger.ts): the `seen_jtis` table. */
export function sharedReplayLedger(shared: PgShared): ReplayLedger {
  return {
    takeRestored: () => [],
    record: (seen) => shared.recordJti(seen),
    sweep: (now, limit) => shared.deleteExpiredJtis(now - REPLICA_CLOCK_MARGIN_MS, limit),
    close: () => undefined,
  };
}

/** The rate budgets of replicas: every take and check on the shared buckets, at this replica's time. */
export function sharedLimiter(shared: PgShared, clock: Clock): Limiter {
  return {
    take(takes) {
      for (const t of takes) checkLimit(t.limit);
      return shared.takeRates(clock.now(), takes);
    },
    give(take) {
      checkLimit(take.limit);
      return shared.giveRate(clock.now(), take);
    },
    async check({ key, limit }) {
      checkLimit(limit);
      const bucket = await shared.rateBucket(key);
      if (bucket === undefined) return { ok: true };
      const credit = creditAt(
        { credit: bucket.credit, at: bucket.at, limit: { windowMs: bucket.windowMs } },
        clock.now(),
        limit,
      );
      if (credit >= limit.windowMs) return { ok: true };
      return { ok: false, refused: 0, retryAfterSec: retryAfterSec(credit, limit) };
    },
  };
}
