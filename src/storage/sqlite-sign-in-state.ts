/**
 * The approval pages' short-lived state on SQLite (issue 13, migration 16): pending OIDC sign-ins,
 * WebAuthn challenges and used TOTP steps. One connection answers synchronously, so each call is
 * atomic already; an issue checks its bounds and inserts in one IMMEDIATE transaction all the
 * same, so a second process on the same file (the CLI) cannot slip in between. A take is one
 * `DELETE … RETURNING`; a TOTP step is inserted under its primary key. Bounds count unexpired
 * rows only, up to the bound: a range of the expiry index.
 */
import type Database from 'better-sqlite3';
import { ownerKind, type ChallengeLimits, type ChallengeRecord, type OidcPendingRecord } from './types.js';

type Prepare = (sql: string) => Database.Statement;

export class SqliteSignInState {
  constructor(
    private readonly db: Database.Database,
    private readonly stmt: Prepare,
  ) {}

  /** Unexpired rows of `table`, counted up to `bound`. */
  #live(table: string, now: number, bound: number): number {
    const sql = `SELECT count(*) AS n FROM (SELECT 1 FROM ${table} WHERE expires_at > ? LIMIT ?)`;
    return (this.stmt(sql).get(now, bound) as { n: number }).n;
  }

  insertOidcPending(p: OidcPendingRecord, max: number, now: number): void {
    this.db
      .transaction(() => {
        const n = this.#live('oidc_pending', now, max);
        if (n >= max) {
          this.stmt(
            `DELETE FROM oidc_pending WHERE state_hash IN (SELECT state_hash FROM oidc_pending
              WHERE expires_at > ? ORDER BY expires_at LIMIT ?)`,
          ).run(now, n - max + 1);
        }
        this.stmt(
          `INSERT INTO oidc_pending (state_hash, nonce, verifier, return_to, fresh, browser_hash, expires_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)`,
        ).run(p.stateHash, p.nonce, p.verifier, p.returnTo, p.fresh ? 1 : 0, p.browserHash, p.expiresAt);
      })
      .immediate();
  }

  takeOidcPending(stateHash: string, browserHash: string, now: number): OidcPendingRecord | undefined {
    const r = this.stmt('DELETE FROM oidc_pending WHERE state_hash = ? AND browser_hash = ? RETURNING *').get(
      stateHash,
      browserHash,
    ) as Record<string, unknown> | undefined;
    if (r === undefined || (r.expires_at as number) <= now) return undefined;
    return {
      stateHash: r.state_hash as string,
      nonce: r.nonce as string,
      verifier: r.verifier as string,
      returnTo: r.return_to as string,
      fresh: r.fresh === 1,
      browserHash: r.browser_hash as string,
      expiresAt: r.expires_at as number,
    };
  }

  issueChallenge(c: ChallengeRecord, limits: ChallengeLimits, now: number): boolean {
    const kind = ownerKind(c.owner);
    return this.db
      .transaction(() => {
        // The owner's newest perOwner - 1 stay; older ones go (clicking again never locks anyone out).
        this.stmt(
          `DELETE FROM webauthn_challenges WHERE id IN (SELECT id FROM webauthn_challenges
            WHERE owner = ? ORDER BY id DESC LIMIT -1 OFFSET ?)`,
        ).run(c.owner, limits.perOwner - 1);
        const open = this.stmt(
          `SELECT count(*) AS n FROM (SELECT 1 FROM webauthn_challenges
            WHERE expires_at > ? AND substr(owner, 1, ?) = ? LIMIT ?)`,
        ).get(now, kind.length, kind, limits.total) as { n: number };
        if (open.n >= limits.total) return false;
        this.stmt(
          'INSERT INTO webauthn_challenges (challenge_hash, owner, data, expires_at) VALUES (?, ?, ?, ?)',
        ).run(c.challengeHash, c.owner, c.data, c.expiresAt);
        return true;
      })
      .immediate();
  }

  takeChallenge(challengeHash: string, now: number): ChallengeRecord | undefined {
    const r = this.stmt(
      'DELETE FROM webauthn_challenges WHERE challenge_hash = ? RETURNING owner, data, expires_at',
    ).get(challengeHash) as { owner: string; data: string; expires_at: number } | undefined;
    if (r === undefined || r.expires_at <= now) return undefined;
    return { challengeHash, owner: r.owner, data: r.data, expiresAt: r.expires_at };
  }

  useTotpStep(userId: string, step: number, keepUntil: number): boolean {
    return (
      this.stmt(
        `INSERT INTO totp_steps (user_id, step, keep_until) SELECT @userId, @step, @keepUntil
          WHERE NOT EXISTS (SELECT 1 FROM totp_steps WHERE user_id = @userId AND step >= @step)
          ON CONFLICT DO NOTHING`,
      ).run({ userId, step, keepUntil }).changes > 0
    );
  }

  deleteExpiredSignInState(now: number, limit: number): number {
    const sweep = (table: string, key: string, expiry: string): number =>
      this.stmt(
        `DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${expiry} <= ?
          ORDER BY ${expiry} LIMIT ?)`,
      ).run(now, limit).changes;
    return Math.max(
      sweep('oidc_pending', 'state_hash', 'expires_at'),
      sweep('webauthn_challenges', 'id', 'expires_at'),
      sweep('totp_steps', 'rowid', 'keep_until'),
      sweep('passkey_enrolment_codes', 'user_id', 'expires_at'),
    );
  }
}
