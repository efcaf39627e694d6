/**
 * Opening the SQLite store: the file (and its directory), WAL journal, synchronous=FULL so an
 * acknowledged commit survives a crash or power loss, a busy timeout for concurrent processes,
 * foreign keys on, the page cache, then the migrations this file lacks. What it returns is the
 * asynchronous Store (sqlite-async-store.ts) over the synchronous engine (sqlite-store.ts).
 */
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { UserError } from '../errors.js';
import { MIGRATIONS } from './migrations.js';
import { createPrivateFile, makePrivateDir } from './private-file.js';
import { SqliteAsyncStore } from './sqlite-async-store.js';
import { SqliteEngine, type WriteKind } from './sqlite-store.js';
import type { Store } from './types.js';

export interface SqliteStoreOptions {
  /** A file path, or `:memory:`. */
  readonly file: string;
  readonly busyTimeoutMs?: number;
  /**
   * Each write transaction's duration, commit included (the database latency metric): `state`
   * for `write` (fsynced), `activity` for the group-committed activity batches (not fsynced).
   */
  readonly onWrite?: (kind: WriteKind, seconds: number) => void;
  /**
   * Called with the SQL of each statement the store prepares (once per distinct statement): the
   * query-plan test runs EXPLAIN QUERY PLAN on each of them.
   */
  readonly onPrepare?: (sql: string) => void;
}

/** The page cache of the store's one connection, in KiB (a bound on its memory, README). */
const SQLITE_CACHE_KIB = 32_768;

export function openSqliteStore(options: SqliteStoreOptions): Store {
  if (options.file !== ':memory:') {
    try {
      makePrivateDir(dirname(options.file));
    } catch {
      throw new UserError(`${options.file}: cannot create the database directory`);
    }
    try {
      // A new database is the proxy's user's alone (private-file.ts), and so its -wal and -shm.
      createPrivateFile(options.file);
    } catch (err) {
      throw new UserError(`${options.file}: cannot create the database (${(err as Error).message})`);
    }
  }
  let db: Database.Database;
  try {
    db = new Database(options.file);
    db.pragma('journal_mode = WAL');
  } catch (err) {
    throw new UserError(`${options.file}: cannot open the database (${(err as Error).message})`);
  }
  // FULL: an acknowledged commit is on disk before the response goes out (the crash test relies on it).
  db.pragma('synchronous = FULL');
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  db.pragma('foreign_keys = ON');
  // 32 MiB of page cache (SQLite's default is 2 MiB): inserts into the indexes of a table of
  // millions of activity rows land on pages all over them, and each miss is a read system call.
  db.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
  try {
    checkWritable(db, options.file);
    migrate(db, options.file);
  } catch (err) {
    db.close();
    throw err;
  }
  return new SqliteAsyncStore(new SqliteEngine(db, options.onWrite, options.onPrepare), options.onWrite);
}

/**
 * A database the proxy cannot write is refused at start-up: started anyway it would answer ready,
 * fail every write (registrations, approvals, revocations) and run executions whose audit records
 * (§11) are never stored. SQLite opens a file it may not write read-only without a word, and
 * BEGIN IMMEDIATE takes no write, so this writes: the schema version, as it is, rolled back.
 */
function checkWritable(db: Database.Database, file: string): void {
  if (file === ':memory:') return;
  try {
    db.transaction(() => {
      const version = db.pragma('user_version', { simple: true }) as number;
      db.pragma(`user_version = ${version}`);
      throw new RolledBack();
    }).immediate();
  } catch (err) {
    if (err instanceof RolledBack) return;
    throw new UserError(`${file}: the database cannot be written (${(err as Error).message})`);
  }
}

/** Thrown to roll the write check's transaction back once its write went through. */
class RolledBack extends Error {}

function migrate(db: Database.Database, file: string): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > MIGRATIONS.length) {
    throw new UserError(
      `${file}: database schema version ${current} is newer than this proxy supports (${MIGRATIONS.length}); upgrade the proxy`,
    );
  }
  applyMigrations(db, current);
}

/**
 * The migrations from `from` on, each in its own write transaction. `from` is what this process
 * read before taking the lock; each is checked again under it.
 */
export function applyMigrations(db: Database.Database, from: number): void {
  for (let version = from; version < MIGRATIONS.length; version++) {
    db.transaction(() => {
      // Read again under the write lock: another process starting on the same file (an
      // overlapping restart) may have applied it meanwhile, and would fail it a second time.
      if ((db.pragma('user_version', { simple: true }) as number) > version) return;
      db.exec(MIGRATIONS[version] as string);
      db.pragma(`user_version = ${version + 1}`);
    }).immediate();
  }
}
