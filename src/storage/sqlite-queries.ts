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
 * that column's (column, id) index read backwards; without one it walks the primary key backwards
 * from `beforeId`, which reads `limit` rows unless a time window skips the newest ones.
 */
export function activityQuery(query: ActivityQuery): Built {
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
  // `+at`: the time window filters rows met in id order; the activity_at index would need a sort.
  add('+at >= @since', 'since', query.since);
  add('+at < @until', 'until', query.until);
  add('id < @beforeId', 'beforeId', query.beforeId);
  const filter = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  return { sql: `SELECT * FROM activity${filter} ORDER BY id DESC LIMIT @limit`, params };
}
