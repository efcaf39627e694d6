/**
 * An online backup of the SQLite database (`agent-auth-proxy db backup FILE`): SQLite's backup
 * API copies a consistent snapshot page by page while a running proxy keeps writing (WAL), then
 * the copy is checked. The replay journal beside the database is not copied: its entries expire
 * within lifetimes.max_jwt_lifetime plus twice the largest clock skew (README "Backups").
 */
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { UserError } from '../errors.js';
import { MIGRATIONS } from './migrations.js';
import { createPrivateFile } from './private-file.js';

/** A step size covering any database: the whole copy in one step (better-sqlite3's progress). */
const ALL_PAGES = 0x7fffffff;

export interface BackupResult {
  readonly schemaVersion: number;
  readonly bytes: number;
}

export async function backupDatabase(source: string, destination: string): Promise<BackupResult> {
  if (source === ':memory:') throw new UserError('an in-memory database (:memory:) has nothing to back up');
  if (existsSync(destination)) {
    throw new UserError(`${destination}: already exists; name a new file (a backup never overwrites)`);
  }
  if (!existsSync(dirname(destination))) {
    throw new UserError(`${destination}: the directory ${dirname(destination)} does not exist`);
  }
  let db: Database.Database;
  try {
    // Never creates the source: a mistyped path is an error, not an empty backup.
    db = new Database(source, { fileMustExist: true });
  } catch (err) {
    throw new UserError(`${source}: cannot open the database (${(err as Error).message})`);
  }
  try {
    db.pragma('busy_timeout = 5000');
    let schemaVersion: number;
    try {
      schemaVersion = db.pragma('user_version', { simple: true }) as number;
    } catch (err) {
      throw new UserError(`${source}: not a database this proxy can read (${(err as Error).message})`);
    }
    if (schemaVersion > MIGRATIONS.length) {
      throw new UserError(
        `${source}: database schema version ${schemaVersion} is newer than this proxy supports (${MIGRATIONS.length}); back it up with the proxy that wrote it`,
      );
    }
    // Created first, mode 0600, as the database it copies (private-file.ts); never over a file.
    createPrivateFile(destination, true);
    try {
      // Every page in one step: copied in steps of 100, any write of the running proxy between two
      // steps starts the backup over, and a proxy writing a few times a second is never copied
      // (174 MB: 1 s idle, unfinished after 60 s at 20 writes/s). One step is one read transaction,
      // which in WAL mode does not hold the proxy's writers back.
      await db.backup(destination, { progress: () => ALL_PAGES });
    } catch (err) {
      // Nothing half-copied is left behind to be taken for a backup, or to block the next try.
      for (const leftover of [destination, `${destination}-journal`]) rmSync(leftover, { force: true });
      throw new UserError(`${destination}: the backup failed (${(err as Error).message})`);
    }
  } finally {
    db.close();
  }
  const copy = new Database(destination, { fileMustExist: true, readonly: true });
  try {
    const check = copy.pragma('integrity_check', { simple: true }) as string;
    if (check !== 'ok') throw new UserError(`${destination}: the copy fails its integrity check (${check})`);
    return {
      schemaVersion: copy.pragma('user_version', { simple: true }) as number,
      bytes: statSync(destination).size,
    };
  } finally {
    copy.close();
  }
}
