/**
 * SQL for the store's filtered listings, built from the conditions actually given (issue 17).
 * A single statement with `(@x IS NULL OR col = @x)` for every optional filter is planned once
 * for all values, so SQLite cannot use an index and scans the table; one statement per filter
 * combination lets each be a range of the index that matches its filter and order (migration 15).
 * The store caches each distinct SQL text, so there are at most 2^filters statements per listing.
 */
import type { ActivityQuery, ListingPage } from './types.js';

export interface Built {
  readonly sql: string;
  readonly params: Readonly<Record<string, unknown>>;
}

/**
 * `SELECT * FROM table` with one equality per given filter, oldest first by (created_at, id),
 * after the page's keyset position, at most its limit.
 */
export function listing(
  table: string,
  filters: Readonly<Record<string, string | undefined>>,
  page: ListingPage,
): Built {
  const where: string[] = [];
  const params: Record<string, unknown> = {};
  const owned = Object.entries(filters).some(([column, value]) => value !== undefined && column !== 'status');
  if (page.limit === undefined && !owned) {
    // All rows, or all rows of a status: a set that grows with the deployment, so only a page of
    // it may be asked for. An owner's (a host's, an agent's, a user's) rows may be read whole.
    throw new Error(`a listing of ${table} by status alone needs a page limit`);
  }
  for (const [column, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    where.push(`${column} = @${column}`);
    params[column] = value;
  }
  if (page.after) {
    // A row value: one range of the (…, created_at, id) index, not an OR of two.
    where.push('(created_at, id) > (@afterAt, @afterId)');
    params.afterAt = page.after.createdAt;
    params.afterId = page.after.id;
  }
  let sql = `SELECT * FROM ${table}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`;
  if (page.limit !== undefined) {
    sql += ' LIMIT @limit';
    params.limit = page.limit;
  }
  return { sql, params };
}

/**
 * The operator's activity query, newest first. With an agent, host or capability it is a range of
 * that column's (column, id) index read backwards, the time window filtering the owner's rows.
 * A time window alone is a range of the activity_at index read backwards (newest `at` first, then
 * id), so a window far in the past costs its own rows, not every newer row of the table. Without
 * either it walks the primary key backwards from `beforeId`, reading `limit` rows.
 */
export function activityQuery(query: ActivityQuery): Built {
  const owned = query.agentId !== undefined || query.hostId !== undefined || query.capability !== undefined;
  if (!owned && (query.since !== undefined || query.until !== undefined)) return activityWindow(query);
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: query.limit };
  const add = (condition: string, name: string, value: unknown): void => {
    if (value === undefined) return;
    where.push(condition);
    params[name] = value;
  };
  add('agent_id = @agentId', 'agentId', query.agentId);
  add('host_id = @hostId', 'hostId', query.hostId);
  add('capability = @capability', 'capability', query.capability);
  // `+at`: the window filters the owner's rows met in id order; activity_at would need a sort.
  add('+at >= @since', 'since', query.since);
  add('+at < @until', 'until', query.until);
  add('id < @beforeId', 'beforeId', query.beforeId);
  const filter = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  return { sql: `SELECT * FROM activity${filter} ORDER BY id DESC LIMIT @limit`, params };
}

/**
 * A time window without an owner: newest first by (at, id), the order of the activity_at index
 * (its entries end with the rowid, which is `id`). The page cursor stays an id: the row it names
 * gives the position `(at, id)` to continue below. The upper end is one bound, the lower of the
 * window's end and the cursor's `at`, so SQLite starts its backward walk there.
 */
function activityWindow(query: ActivityQuery): Built {
  const params: Record<string, unknown> = { limit: query.limit };
  const where: string[] = [];
  if (query.since !== undefined) {
    where.push('at >= @since');
    params.since = query.since;
  }
  const cursorAt = '(SELECT at FROM activity WHERE id = @beforeId)';
  const ends: string[] = [];
  if (query.until !== undefined) {
    ends.push('@last');
    params.last = query.until - 1;
  }
  if (query.beforeId !== undefined) {
    params.beforeId = query.beforeId;
    // A cursor row deleted since (retention) leaves the window's end, or no end, as the bound.
    ends.push(`coalesce(${cursorAt}, ${query.until !== undefined ? '@last' : '9007199254740991'})`);
    where.push(`(at < ${cursorAt} OR id < @beforeId)`);
  }
  if (ends.length > 0) where.push(`at <= ${ends.length === 1 ? ends[0] : `min(${ends.join(', ')})`}`);
  return {
    sql: `SELECT * FROM activity WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT @limit`,
    params,
  };
}
