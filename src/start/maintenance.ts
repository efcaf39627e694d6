/**
 * The background work of a running proxy: the maintenance sweeps every 30 s and activity
 * retention every minute (§9.2). Each sweep runs in bounded batches, yielding between them
 * (protocol/sweeps.ts), so none holds the event loop for more than one batch; a run still going
 * (a large backlog) is not overlapped by the next.
 */
import type { AuditSettings } from '../config/settings.js';
import type { Logger } from '../log.js';
import { Retention } from '../protocol/retention.js';
import { expireApprovals } from '../protocol/approvals.js';
import type { ProtocolContext } from '../protocol/context.js';
import { outcomeUnknownAfterMs, sweepPerCalls } from '../protocol/per-call-decide.js';
import { EXPIRY_BATCH, PENDING_BATCH, SWEEP_BATCH, inBatches } from '../protocol/sweeps.js';
import { StoreUnavailableError } from '../storage/errors.js';
import type { Storage } from '../storage/open.js';

export const MAINTENANCE_EVERY_MS = 30_000;
export const RETENTION_EVERY_MS = 60_000;

/**
 * One maintenance run: overdue approvals expired (§7.1), stale pending agents and hosts deleted
 * (§10.9), expired sessions, sign-in state and async jobs deleted, per-call approvals swept, and
 * the storage's own sweeps (the replay journal's or ledger's expired ids).
 */
export function maintenanceRun(deps: {
  readonly ctx: ProtocolContext;
  readonly storage: Storage;
  /** The longest an upstream call may take now (the engine in force decides it). */
  readonly longestCallMs: () => number;
}): () => Promise<void> {
  const { ctx, storage } = deps;
  const { store, clock, logger } = ctx;
  return async () => {
    await inBatches(() => expireApprovals(ctx, EXPIRY_BATCH), EXPIRY_BATCH);
    const removed = { agents: 0, hosts: 0, rejected: 0 };
    await inBatches(async () => {
      const now = clock.now();
      const n = await store.deleteStalePending(
        now - ctx.policy.lifetimes.pendingCleanupMs,
        PENDING_BATCH,
        now,
      );
      removed.agents += n.agents;
      removed.hosts += n.hosts;
      removed.rejected += n.rejected;
      return Math.max(n.agents, n.hosts, n.rejected);
    }, PENDING_BATCH);
    if (removed.agents || removed.hosts || removed.rejected) {
      // This replica's hot cache may hold the rows deleted (the others hear of it: pg-store.ts).
      ctx.cache.clear();
      logger.info('pending cleanup', { ...removed });
    }
    await inBatches(() => store.deleteExpiredSessions(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    // Pending OIDC sign-ins, WebAuthn challenges, used TOTP steps, enrolment codes (shared by replicas).
    await inBatches(() => store.deleteExpiredSignInState(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    const jobs = await inBatches(() => store.deleteExpiredAsyncJobs(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    if (jobs) logger.info('expired async executions removed', { jobs });
    const calls = await sweepPerCalls(ctx, outcomeUnknownAfterMs(deps.longestCallMs()));
    if (calls.expired || calls.abandoned || calls.deleted)
      logger.info('per-call approvals swept', { ...calls });
    for (const { batch, run } of storage.sweeps) {
      await inBatches(() => Promise.resolve(run(clock.now(), batch)), batch);
    }
  };
}

/**
 * §9.2 retention: deletes activity and closed approval requests past `audit.retention` in
 * batches; how many activity records went.
 */
export function activityPruning(
  audit: AuditSettings,
  deps: { readonly ctx: ProtocolContext },
): () => Promise<number> {
  const { store, clock, logger } = deps.ctx;
  const retention = audit.retentionMs === null ? undefined : new Retention(store, clock, audit.retentionMs);
  return async () => {
    const deleted = (await retention?.prune()) ?? { activity: 0, approvals: 0 };
    if (deleted.activity) logger.info('activity past retention deleted', { records: deleted.activity });
    if (deleted.approvals) {
      logger.info('closed approval requests past retention deleted', { requests: deleted.approvals });
    }
    return deleted.activity;
  };
}

/** Runs `task` every `everyMs` in the background, never two runs at once; `stop` ends it. */
export function repeat(
  what: string,
  everyMs: number,
  task: () => Promise<unknown>,
  logger: Logger,
): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    task()
      .catch((err: unknown) => backgroundFailure(logger, what, err))
      .finally(() => {
        running = false;
      });
  }, everyMs).unref();
  return () => clearInterval(timer);
}

/**
 * Background work during a database outage (issue 13): the run stops at its first refused batch
 * and the next run starts over; what they delete is only due, never acknowledged state, so nothing
 * is kept. A warning, not an error: the outage is logged already.
 */
export function backgroundFailure(logger: Logger, what: string, err: unknown): void {
  const error = err instanceof Error ? err.message : String(err);
  if (err instanceof StoreUnavailableError) logger.warn(`${what} skipped: database unavailable`, { error });
  else logger.error(`${what} failed`, { error });
}
