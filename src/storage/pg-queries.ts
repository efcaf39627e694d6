/**
 * SQL for the PostgreSQL store's filtered listings, built from the conditions actually given, as
 * for SQLite (sqlite-queries.ts): one statement per filter combination, so that each is planned
 * as a range of the index matching its filter and order, never `($1 IS NULL OR col = $1)`.
 */
import type { Statement } from './pg-rows.js';
import type { ActivityQuery, ListingPage } from './types.js';

/** Collects parameters and names each by its position ($1, $2 …). */
class Params {
  readonly values: unknown[] = [];

  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/**
 * `SELECT * FROM table` with one equality per given filter, oldest first by (created_at, id),
 * after the page's keyset position, at most its limit. A listing of every row, or of every row of
 * a status, must give a limit (the set grows with the deployment); an owner's rows may be read whole.
 */
export function listing(
  table: string,
  filters: Readonly<Record<string, string | undefined>>,
  page: ListingPage,
): Statement {
  const owned = Object.entries(filters).some(([column, value]) => value !== undefined && column !== 'status');
  if (page.limit === undefined && !owned) {
    throw new Error(`a listing of ${table} by status alone needs a page limit`);
  }
  const p = new Params();
  const where: string[] = [];
  for (const [column, value] of Object.entries(filters)) {
    if (value !== undefined) where.push(`${column} = ${p.add(value)}`);
  }
  if (page.after) {
    // A row value: one range of the (…, created_at, id) index, not an OR of two.
    where.push(`(created_at, id) > (${p.add(page.after.createdAt)}, ${p.add(page.after.id)})`);
  }
  let sql = `SELECT * FROM ${table}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`;
  if (page.limit !== undefined) sql += ` LIMIT ${p.add(page.limit)}`;
  return { sql, params: p.values };
}

/**
 * The operator's activity query, newest first: with an agent, host or capability a range of that
 * column's (column, id) index read backwards, the time window filtering the owner's rows; a time
 * window alone a range of activity (at, id) read backwards, so a window far in the past costs its
 * own rows (as for SQLite, sqlite-queries.ts); neither: the primary key backwards from `beforeId`.
 */
export function activityQuery(query: ActivityQuery): Statement {
  const owned = query.agentId !== undefined || query.hostId !== undefined || query.capability !== undefined;
  if (!owned && (query.since !== undefined || query.until !== undefined)) return activityWindow(query);
  const p = new Params();
  const where: string[] = [];
  const add = (condition: (param: string) => string, value: unknown): void => {
    if (value !== undefined) where.push(condition(p.add(value)));
  };
  add((v) => `agent_id = ${v}`, query.agentId);
  add((v) => `host_id = ${v}`, query.hostId);
  add((v) => `capability = ${v}`, query.capability);
  add((v) => `at >= ${v}`, query.since);
  add((v) => `at < ${v}`, query.until);
  add((v) => `id < ${v}`, query.beforeId);
  const filter = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  return {
    sql: `SELECT * FROM activity${filter} ORDER BY id DESC LIMIT ${p.add(query.limit)}`,
    params: p.values,
  };
}

/**
 * A time window without an owner, newest first by (at, id); the page cursor is an id, whose row
 * gives the position to continue below. A cursor row deleted since leaves the rows below its id.
 */
function activityWindow(query: ActivityQuery): Statement {
  const p = new Params();
  const where: string[] = [];
  if (query.since !== undefined) where.push(`at >= ${p.add(query.since)}`);
  if (query.until !== undefined) where.push(`at < ${p.add(query.until)}`);
  if (query.beforeId !== undefined) {
    const id = p.add(query.beforeId);
    const cursorAt = `(SELECT at FROM activity WHERE id = ${id})`;
    // One row-value bound, a range of the (at, id) index; with the cursor row gone, the id alone.
    where.push(`((at, id) < (${cursorAt}, ${id}) OR (${cursorAt} IS NULL AND id < ${id}))`);
  }
  return {
    sql: `SELECT * FROM activity WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT ${p.add(query.limit)}`,
    params: p.values,
  };
}

/** The approver's inbox (see InboxQuery), with or without a keyset position. */
export function inboxQuery(query: {
  userId: string;
  now: number;
  before?: { createdAt: number; id: string };
  limit: number;
}): Statement {
  const p = new Params();
  const user = p.add(query.userId);
  // `id = ANY (ARRAY(…))`: the openers' approval ids are fetched first (an InitPlan), so each side
  // of the OR is an index search (approvals_login_hint, the primary key) and the two are merged.
  let sql = `SELECT * FROM approvals
    WHERE status = 'pending' AND expires_at > ${p.add(query.now)}
      AND ((method = 'ciba' AND login_hint = ${user})
        OR (method = 'device_authorization'
          AND id = ANY (ARRAY(SELECT approval_id FROM approval_openers WHERE user_id = ${user}))))`;
  if (query.before) {
    sql += ` AND (created_at, id) < (${p.add(query.before.createdAt)}, ${p.add(query.before.id)})`;
  }
  sql += ` ORDER BY created_at DESC, id DESC LIMIT ${p.add(query.limit)}`;
  return { sql, params: p.values };
}
