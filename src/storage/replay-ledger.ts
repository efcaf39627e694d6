/**
 * Where accepted JWT ids are recorded beyond this process's memory (§4.6, §8.4, §10.3), chosen
 * where the store is opened (open.ts). The in-memory ReplayCache stays the first check and the
 * memory bound; the ledger is what a restart, or another replica, still knows:
 *
 * - SQLite (one process): the journal beside the database file (replay-journal.ts). `record` is
 *   one write() and always says "first": the memory has already judged, and a restart reads the
 *   journal back (`takeRestored`).
 * - PostgreSQL (replicas): the `seen_jtis` table (pg-shared.ts). `record` is one INSERT … ON
 *   CONFLICT DO NOTHING round trip per accepted token; a conflict means another replica (or this
 *   one before a restart) accepted the jti first: a replay. Nothing is read back at start-up.
 */
import type { SeenJti } from './types.js';

export interface ReplayLedger {
  /** Jtis recorded before this process started that are still live, for the memory; handed over once. */
  takeRestored(): SeenJti[];
  /**
   * Records `seen`, or raises its expiry when the jti is known with an earlier one (a second
   * token reusing a jti, remembered to its end). True: the first sighting anywhere; false: it was
   * recorded before. Throws, or rejects, when it cannot be recorded (the caller refuses with 503).
   */
  record(seen: SeenJti): boolean | Promise<boolean>;
  /**
   * While `busy()` is true, records of one event-loop turn may share one write, each settling
   * once it is written (the journal); a ledger that cannot group ignores it.
   */
  groupWhile?(busy: () => boolean): void;
  /** Forgets at most about `limit` expired jtis (the journal: its expired files); how many. */
  sweep(now: number, limit: number): number | Promise<number>;
  close(): void;
}
