/**
 * How the PostgreSQL store maps records to rows and back. The field ↔ column tables are SQLite's
 * (sqlite-columns.ts: the column names are the same); only the values differ: booleans are
 * booleans, JSON is sent as its text and parsed by the driver, bytea comes back as a Buffer.
 */
import type { Column, Columns } from './sqlite-columns.js';
import type { Patch } from './types.js';

export type Row = Record<string, unknown>;

export function toParam(value: unknown, kind: Column['kind']): unknown {
  if (value === undefined || value === null) return null;
  // Always a string: node-postgres would send a JS array as a PostgreSQL array, not as JSON.
  if (kind === 'json') return JSON.stringify(value);
  if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  return value;
}

export function fromRow<T>(columns: Columns<T>, row: Row): T {
  const out: Record<string, unknown> = {};
  for (const [field, { column }] of Object.entries<Column>(columns)) {
    const raw = row[column];
    // A Buffer is a Uint8Array subclass; WebAuthn verification wants a plain one (a copy).
    out[field] = raw === null || raw === undefined ? null : Buffer.isBuffer(raw) ? new Uint8Array(raw) : raw;
  }
  return out as T;
}

export interface Statement {
  readonly sql: string;
  readonly params: unknown[];
}

/** `INSERT INTO table (…) VALUES ($1, …)` with every column of the record but `skip`. */
export function insertOf<T>(
  table: string,
  columns: Columns<T>,
  record: T,
  skip: readonly string[] = [],
): Statement {
  const names: string[] = [];
  const params: unknown[] = [];
  for (const [field, { column, kind }] of Object.entries<Column>(columns)) {
    if (skip.includes(column)) continue;
    names.push(column);
    params.push(toParam((record as Record<string, unknown>)[field], kind));
  }
  const values = names.map((_, i) => `$${i + 1}`).join(', ');
  return { sql: `INSERT INTO ${table} (${names.join(', ')}) VALUES (${values})`, params };
}

/**
 * `UPDATE table SET … WHERE <key> = $n` for the patch's defined fields (and `extra` conditions,
 * each given with its value), or undefined when the patch sets nothing.
 */
export function updateOf<T>(
  table: string,
  columns: Columns<T>,
  patch: Patch<T>,
  where: readonly (readonly [column: string, value: unknown])[],
): Statement | undefined {
  const sets: string[] = [];
  const params: unknown[] = [];
  for (const [field, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    const col = (columns as Record<string, Column | undefined>)[field];
    if (!col) throw new Error(`unknown field ${table}.${field}`);
    params.push(toParam(value, col.kind));
    sets.push(`${col.column} = $${params.length}`);
  }
  if (sets.length === 0) return undefined;
  const conditions = where.map(([column, value]) => {
    params.push(value);
    return `${column} = $${params.length}`;
  });
  return { sql: `UPDATE ${table} SET ${sets.join(', ')} WHERE ${conditions.join(' AND ')}`, params };
}
