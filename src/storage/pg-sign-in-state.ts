/**
 * The approval pages' short-lived state on PostgreSQL (issue 13): pending OIDC sign-ins, WebAuthn
 * challenges and used TOTP steps, shared by every replica. Each rule holds across replicas by one
 * statement or one locked transaction:
 *
 * - a take is one `DELETE … RETURNING`: of two concurrent takes, the second deletes nothing;
 * - an issue (a challenge, a pending sign-in) checks its bounds and inserts under a transaction
 *   advisory lock, so two replicas never both see room for one more;
 * - a TOTP step is inserted under the user's advisory lock and its primary key: a second use of
 *   the code conflicts, and no earlier step is accepted once a later one was.
 *
 * Bounds count unexpired rows only, and at most up to the bound (`LIMIT`): a range of the expiry
 * index, never the whole table.
 */
import { transaction, type Connections } from './pg-pool.js';
import type { Query } from './pg-reader.js';
import { ownerKind, type ChallengeLimits, type ChallengeRecord, type OidcPendingRecord } from './types.js';

/** Advisory lock keys (any fixed numbers) under which issues are checked against their bounds. */
const CHALLENGE_LOCK = 0x6161_7000_0131;
const OIDC_LOCK = 0x6161_7000_0132;
/** The first key of the per-user TOTP lock (the second is the user id's hash). */
const TOTP_LOCK = 0x6161_7001;

const rowCount = (r: { rowCount: number | null }): number => r.rowCount ?? 0;

/** Unexpired rows of `table`, counted up to `bound`. */
async function live(query: Query, table: string, now: number, bound: number): Promise<number> {
  const { rows } = await query(
    `SELECT count(*) AS n FROM (SELECT 1 FROM ${table} WHERE expires_at > $1 LIMIT $2) live`,
    [now, bound],
  );
  return Number(rows[0]?.n ?? 0);
}

export function insertOidcPending(
  connections: Connections,
  p: OidcPendingRecord,
  max: number,
  now: number,
): Promise<void> {
  return transaction(connections, 'READ COMMITTED', async (query) => {
    await query(`SELECT pg_advisory_xact_lock(${OIDC_LOCK})`);
    const n = await live(query, 'oidc_pending', now, max);
    if (n >= max) {
      await query(
        `DELETE FROM oidc_pending WHERE state_hash = ANY (ARRAY(SELECT state_hash FROM oidc_pending
          WHERE expires_at > $1 ORDER BY expires_at LIMIT $2))`,
        [now, n - max + 1],
      );
    }
    await query(
      `INSERT INTO oidc_pending (state_hash, nonce, verifier, return_to, fresh, browser_hash, expires_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [p.stateHash, p.nonce, p.verifier, p.returnTo, p.fresh, p.browserHash, p.expiresAt],
    );
  });
}

export async function takeOidcPending(
  query: Query,
  stateHash: string,
  browserHash: string,
  now: number,
): Promise<OidcPendingRecord | undefined> {
  const { rows } = await query(
    'DELETE FROM oidc_pending WHERE state_hash = $1 AND browser_hash = $2 RETURNING *',
    [stateHash, browserHash],
  );
  const r = rows[0];
  if (r === undefined || (r.expires_at as number) <= now) return undefined;
  return {
    stateHash: r.state_hash as string,
    nonce: r.nonce as string,
    verifier: r.verifier as string,
    returnTo: r.return_to as string,
    fresh: r.fresh as boolean,
    browserHash: r.browser_hash as string,
    expiresAt: r.expires_at as number,
  };
}

export function issueChallenge(
  connections: Connections,
  c: ChallengeRecord,
  limits: ChallengeLimits,
  now: number,
): Promise<boolean> {
  return transaction(connections, 'READ COMMITTED', async (query) => {
    await query(`SELECT pg_advisory_xact_lock(${CHALLENGE_LOCK})`);
    // The owner's newest perOwner - 1 stay; older ones go (clicking again never locks anyone out).
    await query(
      `DELETE FROM webauthn_challenges WHERE id = ANY (ARRAY(SELECT id FROM webauthn_challenges
        WHERE owner = $1 ORDER BY id DESC OFFSET $2))`,
      [c.owner, limits.perOwner - 1],
    );
    const kind = ownerKind(c.owner);
    const { rows } = await query(
      `SELECT count(*) AS n FROM (SELECT 1 FROM webauthn_challenges
        WHERE expires_at > $1 AND substr(owner, 1, $2) = $3 LIMIT $4) open`,
      [now, kind.length, kind, limits.total],
    );
    if (Number(rows[0]?.n ?? 0) >= limits.total) return false;
    await query(
      'INSERT INTO webauthn_challenges (challenge_hash, owner, data, expires_at) VALUES ($1, $2, $3, $4)',
      [c.challengeHash, c.owner, c.data, c.expiresAt],
    );
    return true;
  });
}

export async function takeChallenge(
  query: Query,
  challengeHash: string,
  now: number,
): Promise<ChallengeRecord | undefined> {
  const { rows } = await query(
    'DELETE FROM webauthn_challenges WHERE challenge_hash = $1 RETURNING owner, data, expires_at',
    [challengeHash],
  );
  const r = rows[0] as { owner: string; data: string; expires_at: number } | undefined;
  if (r === undefined || r.expires_at <= now) return undefined;
  return { challengeHash, owner: r.owner, data: r.data, expiresAt: r.expires_at };
}

export async function useTotpStep(
  connections: Connections,
  userId: string,
  step: number,
  keepUntil: number,
): Promise<boolean> {
  // Under the user's own advisory lock: two replicas checking codes of one account take turns, so
  // of an earlier and a later step used at the same instant only one is accepted (the primary key
  // alone refuses only the same step twice). Other accounts never wait.
  return transaction(connections, 'READ COMMITTED', async (query) => {
    await query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [TOTP_LOCK, userId]);
    const inserted = await query(
      `INSERT INTO totp_steps (user_id, step, keep_until) SELECT $1, $2, $3
        WHERE NOT EXISTS (SELECT 1 FROM totp_steps WHERE user_id = $1 AND step >= $2)
        ON CONFLICT DO NOTHING`,
      [userId, step, keepUntil],
    );
    return rowCount(inserted) > 0;
  });
}

export async function deleteExpiredSignInState(query: Query, now: number, limit: number): Promise<number> {
  const sweep = async (table: string, key: string, expiry: string): Promise<number> =>
    rowCount(
      await query(
        `DELETE FROM ${table} WHERE ${key} = ANY (ARRAY(SELECT ${key} FROM ${table} WHERE ${expiry} <= $1
          ORDER BY ${expiry} LIMIT $2 FOR UPDATE SKIP LOCKED))`,
        [now, limit],
      ),
    );
  return Math.max(
    await sweep('oidc_pending', 'state_hash', 'expires_at'),
    await sweep('webauthn_challenges', 'id', 'expires_at'),
    // No single-column key: the rows' physical ids (a TID scan).
    await sweep('totp_steps', 'ctid', 'keep_until'),
    await sweep('passkey_enrolment_codes', 'user_id', 'expires_at'),
  );
}
