/**
 * One serving process per SQLite database. Each process keeps the replay memory (§4.6) and the hot
 * caches of statuses (§10.2) in its own memory: a second process on the same file would accept a
 * jti the first already accepted, and keep serving an agent the first revoked. `--workers` refuses
 * SQLite for that reason; this refuses a second `serve` started by hand, by a unit file or by a
 * rolling update (the README's Kubernetes example runs one replica with `Recreate`).
 *
 * The lock is an exclusive SQLite transaction held open on `<db>-lock`, a file of its own: SQLite's
 * lock is a POSIX record lock, which the kernel drops when the process dies, so a restart after a
 * SIGKILL or a crash is never refused (a pid file could name a pid reused since, as a container's
 * pid 1 always is). A file of its own, not the database's: `db backup` and a second connection of
 * a test still read the database while the proxy holds it.
 */
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { UserError } from '../errors.js';
import { createPrivateFile, makePrivateDir } from './private-file.js';

export interface DatabaseLock {
  release(): void;
}

/** The lock file of the database `file`. */
function lockFileOf(file: string): string {
  return `${file}-lock`;
}

/**
 * Takes the serving lock of `file` without waiting, for as long as the process runs (or until
 * released); throws a UserError naming the file when another process holds it. None for
 * `:memory:`, which nothing else can open. Creates the database's directory (0700) if missing.
 */
export function lockDatabase(file: string): DatabaseLock | undefined {
  if (file === ':memory:') return undefined;
  const path = lockFileOf(file);
  try {
    makePrivateDir(dirname(file));
  } catch {
    throw new UserError(`${file}: cannot create the database directory`);
  }
  let db: Database.Database;
  try {
    createPrivateFile(path);
    // timeout 0: a held lock is an answer now, not after the default five seconds.
    db = new Database(path, { timeout: 0 });
  } catch (err) {
    throw new UserError(`${path}: cannot open the database's lock file (${(err as Error).message})`);
  }
  try {
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: unknown }).code === 'SQLITE_BUSY') {
      throw new UserError(
        `${file}: the database is in use by another agent-auth-proxy process (it holds ${path}); SQLite serves one process per database: stop the other, or use PostgreSQL for several replicas`,
      );
    }
    throw new UserError(`${path}: cannot lock the database (${(err as Error).message})`);
  }
  return {
    // Closing rolls the empty transaction back and drops the lock.
    release: () => db.close(),
  };
}
