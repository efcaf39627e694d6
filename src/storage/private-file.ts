/**
 * Files only the proxy's user may read. The database holds what must not leak to other users of
 * the machine (per-call arguments and results, CSRF tokens, OIDC nonces and PKCE verifiers, user
 * codes, the activity log); created under the usual umask (022) it would be readable by all.
 * SQLite creates the database's -wal and -shm with the database file's own mode.
 */
import { closeSync, mkdirSync, openSync } from 'node:fs';

/** Creates `dir` and any missing parents with mode 0700; an existing directory is left as it is. */
export function makePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Creates `path` empty with mode 0600 when it does not exist (`exclusive`: and fails when it
 * does); an existing file keeps its mode, which is the operator's.
 */
export function createPrivateFile(path: string, exclusive = false): void {
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch (err) {
    if (exclusive || (err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}
