/**
 * A worker process of `--workers N` (src/cluster/primary.ts): a whole proxy, told apart in the
 * logs by its `worker` id, telling the primary once it serves, doing what the primary orders
 * (src/cluster/orders.ts), and letting go of the primary's IPC channel when it is done (that
 * channel alone would keep the process alive).
 */
import cluster from 'node:cluster';
import type { ProxyDeps } from '../app.js';
import { createLogger } from '../log.js';
import type { Settings } from '../config/settings.js';
import type { Controls } from './controls.js';
import { answerMetricsCollection, workerExposition } from './metrics.js';
import { isOrderMessage, sayTakingOrders, type Order } from './orders.js';

/** A worker's message to the primary: it serves (startProxy resolved) at `url`. */
export const STARTED = 'agent-auth-proxy:started';

/**
 * Signals a worker ignores from its start: the primary decides. A Ctrl-C, systemd's
 * KillMode=control-group and `kill -TERM -PGID` signal every process; acted on by each worker as
 * well as by the primary, a stop would reach each worker twice, and a second stop ends at once.
 */
const IGNORED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Exit codes of a worker ordered to stop: before it served (nothing to drain), or at once while draining. */
const STOPPED_BEFORE_SERVING = 0;
const ENDED_NOW = 1;

export function isStartedMessage(message: unknown): message is { type: typeof STARTED; url: string } {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === STARTED &&
    typeof (message as { url?: unknown }).url === 'string'
  );
}

/** Whether this process is a worker forked by the primary. */
export function isWorker(): boolean {
  return cluster.isWorker;
}

/** What startProxy takes in a worker: a logger marking its lines, metrics aggregated over all. */
export function workerDeps(settings: Settings): Pick<ProxyDeps, 'logger' | 'metricsExposition'> {
  const id = cluster.worker?.id ?? 0;
  return {
    logger: createLogger(settings.logLevel, undefined, Date.now, settings.logFormat, { worker: id }),
    metricsExposition: workerExposition,
  };
}

/** Tells the primary the worker serves at `url`. */
export function announceStarted(url: string): void {
  process.send?.({ type: STARTED, url }, undefined, undefined, () => undefined);
}

/**
 * Runs the worker's serve to its exit code, then disconnects from the primary so the process can
 * end. Before anything else loads: outside signals ignored, the metrics responder and the orders
 * listened for (the primary asks a worker for its metrics, and may order it, while it starts).
 */
export async function asWorker(serve: (controls: Controls) => Promise<number>): Promise<number> {
  const ignore = (): void => undefined;
  for (const signal of IGNORED_SIGNALS) process.on(signal, ignore);
  answerMetricsCollection();
  const controls = orderControls();
  try {
    return await serve(controls);
  } finally {
    cluster.worker?.disconnect();
  }
}

/** The primary's orders as the proxy's controls; listening from now on. */
function orderControls(): Controls {
  let reload: (() => void) | undefined;
  let asked = false;
  let stopping = false;
  let stop: (() => void) | undefined;
  const obey = (order: Order): void => {
    if (order === 'end-now') process.exit(ENDED_NOW);
    if (order === 'reload') {
      if (stopping) return;
      if (reload) reload();
      else asked = true;
      return;
    }
    // drain: a worker still starting has nothing in flight, and its start may take long.
    if (!stop) process.exit(STOPPED_BEFORE_SERVING);
    stopping = true;
    stop();
  };
  const onMessage = (message: unknown): void => {
    if (isOrderMessage(message)) obey(message.order);
  };
  process.on('message', onMessage);
  sayTakingOrders();
  return {
    serving(serve) {
      reload = serve;
      if (asked) serve();
      return new Promise<void>((resolve) => (stop = resolve));
    },
    dispose() {
      process.off('message', onMessage);
    },
  };
}
