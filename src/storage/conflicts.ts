/**
 * Patience with write conflicts, for the few writes that must not fail because requests happened
 * to write at the same moment: drift at a reload or a start-up (protocol/drift.ts) is one large
 * SERIALIZABLE transaction that reads every grant it may change, so on PostgreSQL a handful of
 * approvals decided meanwhile could outlast the store's own re-runs (pg-pool.ts) and refuse the
 * reload. Requests are not run this way: their 503 asks the client to try again.
 */
import { StoreConflictError } from './errors.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `write()`, run again while it fails with StoreConflictError (rolled back, nothing applied), at
 * most `rounds` more times: after 50 ms, then twice as long each time, jittered (about 3 s in all
 * with the default 6), so that it does not collide with the same writers again.
 */
export async function outlastingConflicts<T>(
  write: () => Promise<T>,
  rounds = 6,
  wait: (ms: number) => Promise<void> = sleep,
): Promise<T> {
  for (let round = 0; ; round++) {
    try {
      return await write();
    } catch (err) {
      if (!(err instanceof StoreConflictError) || round >= rounds) throw err;
      await wait((0.5 + Math.random()) * 50 * 2 ** round);
    }
  }
}
