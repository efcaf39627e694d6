/**
 * Storage failures a caller can act on. `StoreUnavailableError`: the database could not be
 * reached, went away mid-statement, or did not answer in time (PostgreSQL, issue 13); the HTTP
 * layer answers 503 and the client retries. Whether a write in flight when the connection broke
 * was committed is unknown, so a `write` is never re-run after one (only after a serialization
 * conflict, which PostgreSQL reports as rolled back).
 */
import { StoreConflictError, StoreInputError, StoreUnavailableError } from '../errors.js';

export { StoreConflictError, StoreInputError, StoreUnavailableError };

/** Node socket errors of a database that cannot be reached or dropped the connection. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOENT', // a unix socket path with no server behind it
]);

/**
 * SQLSTATEs of the same: class 08 (connection exception), the server shutting down or starting
 * (57P01–57P03), too many connections (53300), and a statement cancelled by statement_timeout
 * (57014: the database is too slow to serve now).
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '57014']);

/**
 * node-postgres's own errors for a connection that failed, closed or timed out (`timeout expired`:
 * a single client's connection timeout, as the migrations' connection at start-up has).
 */
const DRIVER_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Client was closed and is not queryable|connection timeout|^timeout expired$/i;

export function isUnavailable(err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true;
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.has(code) || code.startsWith('08')) return true;
  }
  if (err instanceof AggregateError && err.errors.some(isUnavailable)) return true;
  return DRIVER_MESSAGES.test(err.message);
}

/**
 * SQLSTATEs of text PostgreSQL cannot hold: a NUL character (22021), one the database's encoding
 * lacks (22P05), or a value too large for an index entry (54000: a B-tree holds at most 2,704
 * bytes). A value a request brought; any NUL a lookup is given matches nothing.
 */
const UNSTORABLE_TEXT_STATES = new Set(['22021', '22P05', '54000']);

/**
 * `err` as a StoreUnavailableError when it means the database is unavailable, as a StoreInputError
 * when the database refused a value's text, else unchanged.
 */
export function storeError(err: unknown): unknown {
  if (err instanceof Error && UNSTORABLE_TEXT_STATES.has(String((err as { code?: unknown }).code))) {
    return new StoreInputError(`the database refused a value: ${err.message}`, { cause: err });
  }
  if (err instanceof StoreUnavailableError || !isUnavailable(err)) return err;
  return new StoreUnavailableError(`database unavailable: ${(err as Error).message || 'no answer'}`, {
    cause: err,
  });
}

/**
 * SQLite's result codes (better-sqlite3's `code`, extended codes included) of a database that
 * cannot take a write now: a read-only file or directory, a full disk, an I/O error, a file that
 * went away, a lock another process held past the busy timeout. Not a bug of the request: 503, and
 * the activity log keeps its records for a retry.
 */
const SQLITE_UNAVAILABLE_CODES = /^SQLITE_(READONLY|FULL|IOERR|CANTOPEN|BUSY)/;

/** `err` as a StoreUnavailableError when SQLite says it cannot write now (above), else unchanged. */
export function sqliteStoreError(err: unknown): unknown {
  if (!(err instanceof Error) || err instanceof StoreUnavailableError) return err;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !SQLITE_UNAVAILABLE_CODES.test(code)) return err;
  return new StoreUnavailableError(`database unavailable: ${err.message} (${code})`, { cause: err });
}

/** SQLite's result codes for a value the statement cannot store. */
const REFUSED_VALUE_CODES = /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH)/;

/**
 * The database refused what it was given, not the request to write it: retrying the same values
 * fails the same way. PostgreSQL's data exceptions (class 22) and integrity violations (23), and
 * SQLite's constraint, size and type errors.
 */
export function isRefusedValue(err: unknown): boolean {
  if (err instanceof StoreInputError) return true;
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return /^2[23][0-9A-Z]{3}$/.test(code) || REFUSED_VALUE_CODES.test(code);
}
