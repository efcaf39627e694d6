/** `db backup FILE`: SQLite's online backup of the proxy's database. */
import { resolve } from 'node:path';
import { resolveDatabaseOnly } from '../config/settings.js';
import { UserError } from '../errors.js';
import { backupDatabase } from '../storage/backup.js';
import type { CliOutput } from './output.js';

export async function databaseCommand(
  args: readonly string[],
  where: { db: string | undefined; config: string | undefined },
  io: CliOutput,
): Promise<number> {
  const [action, file, extra] = args;
  if (action !== 'backup' || file === undefined || extra !== undefined) {
    throw new UserError('db: the command is db backup FILE\nRun agent-auth-proxy db --help for usage.');
  }
  const database = resolveDatabaseOnly({
    ...(where.db !== undefined ? { db: where.db } : {}),
    ...(where.config !== undefined ? { config: where.config } : {}),
  });
  if (database.kind !== 'sqlite') {
    throw new UserError(
      "db backup copies a SQLite file; back up PostgreSQL with its own tools (pg_dump, or your provider's snapshots)",
    );
  }
  const source = database.file;
  const target = resolve(file);
  const copied = await backupDatabase(source, target);
  io.out(
    `backed up ${source} (schema version ${copied.schemaVersion}, ${copied.bytes} bytes) to ${target}\n`,
  );
  return 0;
}
