/**
 * The database at start-up: opened (SQLite: the replay journal beside the file and this process's
 * own limiter; PostgreSQL: the replay ledger, rate budgets and change notices the replicas share,
 * storage/open.ts), then brought in line with the documents in force. A database that cannot be
 * opened or reached stops the start with one line naming it.
 */
import type { Clock } from '../clock.js';
import { describeDatabase } from '../config/database.js';
import type { Settings } from '../config/settings.js';
import { UserError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { ProtocolContext } from '../protocol/context.js';
import { applyDrift, logDrift } from '../protocol/drift.js';
import { applyPolicyHosts, logSkippedPolicyHosts } from '../protocol/hosts.js';
import { replicaChangeHandlers } from '../protocol/replica-changes.js';
import { outlastingConflicts } from '../storage/conflicts.js';
import { StoreConflictError, StoreUnavailableError } from '../storage/errors.js';
import { openStorage, type Storage } from '../storage/open.js';

export async function openDatabase(
  settings: Settings,
  deps: { readonly clock: Clock; readonly logger: Logger; readonly metrics: Metrics },
): Promise<Storage> {
  try {
    return await openStorage(settings.database, deps.clock, {
      onWrite: (kind, s) => deps.metrics.databaseWrite(kind, s),
      // The pool replaces the connection; requests meanwhile get 503 from the store's error.
      onConnectionError: (err) => deps.logger.warn('database connection lost', { cause: err.message }),
    });
  } catch (err) {
    throw startupDatabaseError(err, settings.database);
  }
}

/**
 * The policy's hosts written (an entry the stored state rules out is skipped with a warning, not
 * fatal: protocol/hosts.ts applyPolicyHostsIn), drift between the stored grants and the documents
 * applied, and other replicas' commits followed into this one's caches and streams
 * (replica-changes.ts).
 */
export async function adoptDocuments(
  ctx: ProtocolContext,
  storage: Storage,
  settings: Settings,
): Promise<void> {
  try {
    logSkippedPolicyHosts(ctx.logger, await outlastingConflicts(() => applyPolicyHosts(ctx)));
    logDrift(ctx.logger, await outlastingConflicts(() => applyDrift(ctx)));
    await storage.follow?.(replicaChangeHandlers(ctx));
  } catch (err) {
    // The database went away right after opening: the same start-up error as when opening.
    throw err instanceof StoreUnavailableError ? startupDatabaseError(err, settings.database) : err;
  }
}

/**
 * A database that cannot be opened at start-up: the proxy does not start (exit code 2, one line
 * naming the database without its password, and the cause). Waiting for it instead would hide a
 * wrong address or password behind a process that looks alive; an orchestrator's restart policy
 * (Kubernetes, systemd, compose `restart:`) already retries with a backoff, and a replica already
 * running rides an outage out (503 and unready, then ready again by itself).
 */
function startupDatabaseError(err: unknown, at: Settings['database']): unknown {
  if (at.kind !== 'postgres' || err instanceof UserError) return err;
  let cause = err instanceof Error ? err.message : String(err);
  // The driver's messages do not quote the password; should one ever do, it is not printed.
  for (const secret of passwordForms(at.url)) cause = cause.replaceAll(secret, '***');
  const why =
    err instanceof StoreConflictError
      ? 'is too busy to start against now (its writes kept conflicting with other replicas)'
      : err instanceof StoreUnavailableError
        ? 'cannot be reached'
        : 'cannot be opened';
  return new UserError(`database ${describeDatabase(at)} ${why}: ${cause}`);
}

/** The URL's password as written (percent-encoded) and decoded; none when it has none. */
function passwordForms(url: string): string[] {
  try {
    const raw = new URL(url).password;
    return raw === '' ? [] : [raw, decodeURIComponent(raw)];
  } catch {
    return [];
  }
}
