/**
 * What the SQLite store keeps of approvers (issue 11): their sessions, their passkeys and the
 * one-time codes for a first passkey. The engine (sqlite-store.ts) answers these calls through this
 * class, inside or outside a transaction alike: one connection, synchronous.
 */
import type Database from 'better-sqlite3';
import { PASSKEY, SESSION, fromRow, insertSql, params, passkeyFromRow, type Row } from './sqlite-columns.js';
import type { PasskeyRecord, SessionRecord } from './types.js';

type Prepare = (sql: string) => Database.Statement;

export class SqliteApprovers {
  constructor(private readonly stmt: Prepare) {}

  insertSession(session: SessionRecord): void {
    const p = params(SESSION, session);
    this.stmt(insertSql('sessions', Object.keys(p))).run(p);
  }

  session(idHash: string): SessionRecord | undefined {
    return fromRow(
      SESSION,
      this.stmt('SELECT * FROM sessions WHERE id_hash = ?').get(idHash) as Row | undefined,
    );
  }

  deleteSession(idHash: string): void {
    this.stmt('DELETE FROM sessions WHERE id_hash = ?').run(idHash);
  }

  deleteSessionsOf(userId: string): number {
    return this.stmt('DELETE FROM sessions WHERE user_id = ?').run(userId).changes;
  }

  deleteExpiredSessions(now: number, limit: number): number {
    return this.stmt(
      `DELETE FROM sessions WHERE id_hash IN
        (SELECT id_hash FROM sessions WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`,
    ).run(now, limit).changes;
  }

  insertPasskey(passkey: PasskeyRecord): void {
    const p = params(PASSKEY, passkey);
    p.public_key = Buffer.from(passkey.publicKey);
    this.stmt(insertSql('passkeys', Object.keys(p))).run(p);
  }

  passkey(id: string): PasskeyRecord | undefined {
    const row = this.stmt('SELECT * FROM passkeys WHERE id = ?').get(id) as Row | undefined;
    return passkeyFromRow(fromRow(PASSKEY, row));
  }

  passkeys(userId: string): PasskeyRecord[] {
    const rows = this.stmt('SELECT * FROM passkeys WHERE user_id = ? ORDER BY created_at, id').all(
      userId,
    ) as Row[];
    return rows.map((r) => passkeyFromRow(fromRow(PASSKEY, r)) as PasskeyRecord);
  }

  recordPasskeyUse(id: string, counter: number, at: number): void {
    this.stmt('UPDATE passkeys SET counter = ?, last_used_at = ? WHERE id = ?').run(counter, at, id);
  }

  deletePasskey(id: string, userId: string): boolean {
    return this.stmt('DELETE FROM passkeys WHERE id = ? AND user_id = ?').run(id, userId).changes > 0;
  }

  hasEnrolmentCode(userId: string, codeHash: string, now: number): boolean {
    const sql =
      'SELECT 1 FROM passkey_enrolment_codes WHERE user_id = ? AND code_hash = ? AND expires_at > ?';
    return this.stmt(sql).get(userId, codeHash, now) !== undefined;
  }

  putEnrolmentCode(userId: string, codeHash: string, expiresAt: number): void {
    this.stmt(
      `INSERT INTO passkey_enrolment_codes (user_id, code_hash, expires_at) VALUES (?, ?, ?)
        ON CONFLICT (user_id) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at`,
    ).run(userId, codeHash, expiresAt);
  }

  takeEnrolmentCode(userId: string, codeHash: string, now: number): boolean {
    const sql = 'DELETE FROM passkey_enrolment_codes WHERE user_id = ? AND code_hash = ? AND expires_at > ?';
    return this.stmt(sql).run(userId, codeHash, now).changes > 0;
  }
}
