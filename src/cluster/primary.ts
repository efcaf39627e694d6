/**
 * The primary process of `--workers N` (node:cluster): it forks N workers, each a whole proxy
 * (src/cli/main.ts runs startProxy in it) on the same listening socket, which the primary accepts
 * on and hands out round-robin. The primary does no request work. It
 *
 * - starts one worker first and the others once that one serves, so a start-up error (a database
 *   out of reach, a port taken) is printed once and the primary exits with that worker's code;
 * - restarts a worker that exits on its own, after a back-off that doubles while workers keep
 *   dying young, and gives up (exiting with the last exit code) when restarts keep failing to start;
 * - forwards SIGTERM and SIGINT as SIGTERM (each worker drains, src/http/drain.ts) and SIGHUP (each
 *   worker reloads), and exits once every worker has: 0 when all drained cleanly.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../log.js';
import { serveAggregatedMetrics } from './metrics.js';
import { isStartedMessage } from './worker.js';

export interface PrimaryOptions {
  readonly workers: number;
  readonly logger: Logger;
}

/** The first restart's delay; it doubles with each worker that dies young, up to the cap. */
const RESTART_DELAY_MS = 100;
const RESTART_DELAY_CAP_MS = 10_000;
/** A worker that served this long before dying resets the back-off. */
const STABLE_AFTER_MS = 30_000;
/** Restarted workers failing to start this many times in a row: the primary gives up. */
const START_FAILURES_LIMIT = 5;

/** Runs the workers until they have all exited after a signal (or a failed start); the exit code. */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  const { workers: wanted, logger } = options;
  const born = new Map<Worker, number>();
  const serving = new Set<Worker>();
  const restarts = new Set<NodeJS.Timeout>();
  let everServed = false;
  let stopping = false;
  let exitCode = 0;
  let startFailures = 0;
  let youngDeaths = 0;

  const fork = (): void => {
    const worker = cluster.fork();
    born.set(worker, Date.now());
  };

  return new Promise<number>((resolve) => {
    const finishIfDone = (): void => {
      if (!stopping || born.size > 0 || restarts.size > 0) return;
      process.off('SIGTERM', onStop);
      process.off('SIGINT', onStop);
      process.off('SIGHUP', onReload);
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
      resolve(exitCode);
    };
    const stop = (code: number): void => {
      if (!stopping) exitCode = code;
      stopping = true;
      for (const timer of restarts) clearTimeout(timer);
      restarts.clear();
      for (const worker of born.keys()) worker.process.kill('SIGTERM');
      finishIfDone();
    };
    // A second signal is forwarded too: a worker already draining has no handler left and ends at
    // once, as one process does on a second Ctrl-C.
    const onStop = (signal: NodeJS.Signals): void => {
      if (!stopping) logger.info('stopping workers', { signal, workers: born.size });
      stop(0);
    };
    // Only to workers that serve: one still starting has no handler yet, and SIGHUP would end it
    // (it reads the files as they are now anyway).
    const onReload = (): void => {
      for (const worker of serving) worker.process.kill('SIGHUP');
    };
    const onMessage = (worker: Worker, message: unknown): void => {
      if (!isStartedMessage(message) || stopping) return;
      serving.add(worker);
      startFailures = 0;
      logger.info('worker started', { id: worker.id, pid: worker.process.pid ?? null });
      if (!everServed) {
        everServed = true;
        for (let i = 1; i < wanted; i++) fork();
      }
      if (serving.size === wanted) logger.info('workers listening', { url: message.url, workers: wanted });
    };
    const onExit = (worker: Worker, code: number | null, signal: string | null): void => {
      const startedAt = born.get(worker) ?? Date.now();
      born.delete(worker);
      const served = serving.delete(worker);
      const fields = { id: worker.id, pid: worker.process.pid ?? null, code, signal };
      if (stopping) {
        // A worker stopped before it installed its handlers ends by the signal itself: clean too.
        const clean = code === 0 || (!served && signal === 'SIGTERM');
        if (!clean) {
          logger.warn('worker did not exit cleanly', fields);
          exitCode ||= 1;
        }
        finishIfDone();
        return;
      }
      if (!served) {
        startFailures++;
        // The first worker failing is a start-up error (it printed why): the same exit as one process.
        if (!everServed || startFailures >= START_FAILURES_LIMIT) {
          logger.error('worker failed to start; stopping', { ...fields, failures: startFailures });
          stop(code || 1);
          return;
        }
      }
      youngDeaths = Date.now() - startedAt < STABLE_AFTER_MS ? youngDeaths + 1 : 1;
      const delay = Math.min(RESTART_DELAY_MS * 2 ** (youngDeaths - 1), RESTART_DELAY_CAP_MS);
      logger.warn('worker exited; restarting', { ...fields, restart_in_ms: delay });
      const timer = setTimeout(() => {
        restarts.delete(timer);
        fork();
      }, delay);
      restarts.add(timer);
    };
    process.on('SIGTERM', onStop);
    process.on('SIGINT', onStop);
    process.on('SIGHUP', onReload);
    cluster.on('message', onMessage);
    cluster.on('exit', onExit);
    serveAggregatedMetrics();
    logger.info('starting workers', { workers: wanted });
    fork();
  });
}
