/**
 * Which store the proxy uses (issue 13): a file path keeps the embedded SQLite store; a
 * `postgres://` or `postgresql://` URL selects PostgreSQL, for several replicas sharing one truth.
 * The password may stay out of the URL (and so out of argv and config files): it then comes from
 * `AGENT_AUTH_PROXY_DB_PASSWORD` or `postgres.password_file`, like the proxy's other secrets.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { UserError } from '../errors.js';
import type { StoreLocation } from '../storage/open.js';

/** Where the store is: the SQLite file, or the PostgreSQL URL with its pool's settings. */
export type DatabaseSettings = StoreLocation;

/** The `postgres:` section of the config file (defaults applied by the schema). */
export interface PostgresConfig {
  readonly pool_size: number;
  readonly connection_timeout_ms: number;
  readonly statement_timeout_ms: number;
  readonly password_file?: string;
}

export const DB_PASSWORD_ENV = 'AGENT_AUTH_PROXY_DB_PASSWORD';

const DEFAULT_FILE = 'data/agent-auth-proxy.db';

export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}

/**
 * The database a command line names: --db, else the config's `database` (a file relative to the
 * config), else ./data/agent-auth-proxy.db.
 */
export function resolveDatabase(o: {
  readonly flag: string | undefined;
  readonly configured: string | undefined;
  readonly postgres: PostgresConfig;
  /** The config file's directory (or the working directory without one). */
  readonly base: string;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}): DatabaseSettings {
  const named = o.flag ?? o.configured;
  if (named !== undefined && isPostgresUrl(named)) {
    const from = o.flag !== undefined ? '--db' : 'database';
    return {
      kind: 'postgres',
      url: withPassword(named, from, password(o)),
      poolSize: o.postgres.pool_size,
      connectionTimeoutMs: o.postgres.connection_timeout_ms,
      statementTimeoutMs: o.postgres.statement_timeout_ms,
    };
  }
  // A throwaway database from the key as from the flag, not a file named ":memory:".
  if (named === ':memory:') return { kind: 'sqlite', file: ':memory:' };
  if (o.flag !== undefined) return { kind: 'sqlite', file: resolve(o.cwd, o.flag) };
  if (o.configured !== undefined) return { kind: 'sqlite', file: resolve(o.base, o.configured) };
  return { kind: 'sqlite', file: resolve(o.cwd, DEFAULT_FILE) };
}

/** The password from the environment or `postgres.password_file`, if either is set. */
function password(o: {
  readonly postgres: PostgresConfig;
  readonly base: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}): { readonly value: string; readonly from: string } | undefined {
  const fromEnv = o.env[DB_PASSWORD_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, from: DB_PASSWORD_ENV };
  if (o.postgres.password_file === undefined) return undefined;
  const file = resolve(o.base, o.postgres.password_file);
  let value: string;
  try {
    // Not settings.ts's readSecretFile: that trims and wants a token's shape (16+ characters, no
    // white space); a database password is whatever the DBA set, so only the file's final line
    // break is dropped.
    value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
  } catch {
    throw new UserError(`postgres.password_file: ${file}: not found or not readable`);
  }
  if (value === '') throw new UserError(`postgres.password_file: ${file} is empty`);
  return { value, from: 'postgres.password_file' };
}

function withPassword(raw: string, from: string, given: { value: string; from: string } | undefined): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Never echo the value: it may hold a password.
    throw new UserError(`${from}: not a valid postgres:// URL`);
  }
  if (url.hostname === '' && !url.searchParams.has('host')) {
    throw new UserError(`${from}: the postgres:// URL names no host`);
  }
  if (given === undefined) return raw;
  if (url.password !== '') {
    throw new UserError(`${from}: the URL has a password and ${given.from} gives another; keep one`);
  }
  url.password = given.value;
  return url.toString();
}

/** The URL as it may be logged or shown: the password replaced by `***`. */
export function redactedUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password !== '') url.password = '***';
    url.searchParams.forEach((_, key) => {
      if (/pass/i.test(key)) url.searchParams.set(key, '***');
    });
    return url.toString();
  } catch {
    return '(invalid URL)';
  }
}

/** Where the database is, for logs and messages: the file, or the URL without its password. */
export function describeDatabase(db: DatabaseSettings): string {
  return db.kind === 'sqlite' ? db.file : redactedUrl(db.url);
}
