/**
 * The primary process of `--workers N` (node:cluster): it forks N workers, each a whole proxy
 * (src/cli/main.ts runs startProxy in it) on the same listening socket, which the primary accepts
 * on and hands out round-robin. The primary does no request work. It
 *
 * - starts one worker first and the others once that one serves, so a start-up error (a database
 *   out of reach, a port taken) is printed once and the primary exits with that worker's code;
 * - restarts a worker that exits on its own, after a back-off that doubles while workers keep
 *   dying young, and gives up (exiting with the last exit code) when restarts keep failing to start;
 * - on SIGTERM or SIGINT orders every worker to drain (src/http/drain.ts), on a second one to end
 *   at once, and on SIGHUP to reload, a worker still starting included (it reloads once it
 *   serves); orders go over the IPC channel (src/cluster/orders.ts), since workers ignore
 *   signals; it exits once every worker has: 0 when all drained cleanly.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../log.js';
import { serveAggregatedMetrics } from './metrics.js';
import { isTakingOrders, OrderBook, type Order } from './orders.js';
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
  const orders = new OrderBook();
  let everServed = false;
  let stopping = false;
  let exitCode = 0;
  let startFailures = 0;
  let youngDeaths = 0;

  const fork = (): void => {
    const worker = cluster.fork();
    born.set(worker, Date.now());
  };

  const orderAll = (order: Order): void => {
    for (const worker of born.keys()) orders.give(worker, order);
  };

  return new Promise<number>((resolve) => {
    const stopMetrics = serveAggregatedMetrics({ serving: () => serving, expected: wanted });
    const finishIfDone = (): void => {
      if (!stopping || born.size > 0 || restarts.size > 0) return;
      // The signal handlers stay: a signal between here and the exit would otherwise end the
      // primary by its default action (SIGHUP too), and they do nothing once stopping.
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
      stopMetrics();
      resolve(exitCode);
    };
    const stop = (code: number): void => {
      if (!stopping) exitCode = code;
      stopping = true;
      for (const timer of restarts) clearTimeout(timer);
      restarts.clear();
      orderAll('drain');
      finishIfDone();
    };
    // A second signal ends every worker at once, as a second Ctrl-C ends one process.
    const onStop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn('ending workers now', { signal, workers: born.size });
        orderAll('end-now');
        return;
      }
      logger.info('stopping workers', { signal, workers: born.size });
      stop(0);
    };
    // Every worker, one still starting too: it read the files before this reload was asked, maybe,
    // and reloads once it serves (a reload of files that read the same changes nothing).
    const onReload = (): void => {
      if (!stopping) orderAll('reload');
    };
    const onMessage = (worker: Worker, message: unknown): void => {
      if (isTakingOrders(message)) orders.taking(worker);
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
      orders.forget(worker);
      const served = serving.delete(worker);
      const fields = { id: worker.id, pid: worker.process.pid ?? null, code, signal };
      if (stopping) {
        // A worker signalled (a Ctrl-C, the process group) while it still loads, before it ignores
        // signals, ends by the signal itself: it served nothing, so that is clean too.
        const clean = code === 0 || (!served && (signal === 'SIGTERM' || signal === 'SIGINT'));
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
    logger.info('starting workers', { workers: wanted });
    fork();
  });
}
