/**
 * What the SQLite store keeps of per-call approvals (issue 16 §1): one execution waiting for a
 * person, then claimed, completed or failed. The engine (sqlite-store.ts) answers these calls
 * through this class, inside or outside a transaction alike: one connection, synchronous.
 */
import type Database from 'better-sqlite3';
import { PER_CALL, fromRow, insertSql, params, setClause, type Row } from './sqlite-columns.js';
import type { Patch, PerCallQuery, PerCallRecord, PerCallStatus } from './types.js';

type Prepare = (sql: string) => Database.Statement;

export class SqlitePerCalls {
  constructor(private readonly stmt: Prepare) {}

  private one(sql: string, ...args: unknown[]): PerCallRecord | undefined {
    return fromRow(PER_CALL, this.stmt(sql).get(...args) as Row | undefined);
  }

  private many(sql: string, ...args: unknown[]): PerCallRecord[] {
    return (this.stmt(sql).all(...args) as Row[]).map((r) => fromRow(PER_CALL, r) as PerCallRecord);
  }

  insertPerCall(record: PerCallRecord): void {
    const p = params(PER_CALL, record);
    this.stmt(insertSql('per_call_approvals', Object.keys(p))).run(p);
  }

  perCall(id: string): PerCallRecord | undefined {
    return this.one('SELECT * FROM per_call_approvals WHERE id = ?', id);
  }

  perCallsAddressedTo(userId: string | null, now: number, limit: number): PerCallRecord[] {
    // Two statements, so that each is one range of the (user_id, status, created_at, id) index,
    // read in order; `+expires_at` keeps the planner from the deadline index (all users' rows).
    const sql = (who: string): string =>
      `SELECT * FROM per_call_approvals WHERE user_id ${who} AND status = 'pending' AND +expires_at > ?
        ORDER BY created_at DESC, id DESC LIMIT ?`;
    return userId === null
      ? this.many(sql('IS NULL'), now, limit)
      : this.many(sql('= ?'), userId, now, limit);
  }

  perCalls(query: PerCallQuery): PerCallRecord[] {
    // A row-value keyset, so that each page is one range of its index (the first page starts
    // below the largest time).
    const values = {
      beforeAt: query.before?.createdAt ?? Number.MAX_SAFE_INTEGER,
      beforeId: query.before?.id ?? '',
      limit: query.limit,
    };
    const keyset = '(created_at, id) < (@beforeAt, @beforeId)';
    if (query.status === undefined) {
      return this.many(
        `SELECT * FROM per_call_approvals WHERE ${keyset} ORDER BY created_at DESC, id DESC LIMIT @limit`,
        values,
      );
    }
    return this.many(
      `SELECT * FROM per_call_approvals WHERE status = @status AND ${keyset}
        ORDER BY created_at DESC, id DESC LIMIT @limit`,
      { ...values, status: query.status },
    );
  }

  updatePerCall(id: string, from: PerCallStatus, patch: Patch<PerCallRecord>): boolean {
    const set = setClause('per_call_approvals', PER_CALL, patch);
    if (set === undefined) return false;
    const sql = `UPDATE per_call_approvals SET ${set.sql} WHERE id = @id AND status = @from`;
    return this.stmt(sql).run({ ...set.values, id, from }).changes > 0;
  }

  deletePerCall(id: string): void {
    this.stmt('DELETE FROM per_call_approvals WHERE id = ?').run(id);
  }

  countOpenPerCalls(agentId: string, now: number): number {
    return (
      this.stmt(
        "SELECT COUNT(*) AS n FROM per_call_approvals WHERE agent_id = ? AND status = 'pending' AND expires_at > ?",
      ).get(agentId, now) as { n: number }
    ).n;
  }

  pendingPerCallsOf(agentId: string, limit: number): PerCallRecord[] {
    return this.many(
      "SELECT * FROM per_call_approvals WHERE agent_id = ? AND status = 'pending' ORDER BY expires_at LIMIT ?",
      agentId,
      limit,
    );
  }

  overduePerCalls(now: number, limit: number): PerCallRecord[] {
    return this.many(
      "SELECT * FROM per_call_approvals WHERE status = 'pending' AND expires_at <= ? LIMIT ?",
      now,
      limit,
    );
  }

  // The per_call_status index's range of executing rows (few: each is a call in flight or lost),
  // in creation order; a claim comes after its row's creation, so none older is missed.
  abandonedPerCalls(claimedBefore: number, limit: number): PerCallRecord[] {
    return this.many(
      `SELECT * FROM per_call_approvals WHERE status = 'executing' AND created_at <= ?
        AND coalesce(decided_at, created_at) <= ? ORDER BY created_at, id LIMIT ?`,
      claimedBefore,
      claimedBefore,
      limit,
    );
  }

  deleteStalePerCalls(now: number, limit: number): number {
    return this.stmt(
      `DELETE FROM per_call_approvals WHERE id IN
        (SELECT id FROM per_call_approvals WHERE keep_until <= ? LIMIT ?)`,
    ).run(now, limit).changes;
  }
}
