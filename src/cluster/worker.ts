/**
 * A worker process of `--workers N` (src/cluster/primary.ts): a whole proxy, told apart in the
 * logs by its `worker` id, telling the primary once it serves, and letting go of the primary's
 * IPC channel when it is done (that channel alone would keep the process alive).
 */
import cluster from 'node:cluster';
import type { ProxyDeps } from '../app.js';
import { createLogger } from '../log.js';
import type { Settings } from '../config/settings.js';
import { workerExposition } from './metrics.js';

/** A worker's message to the primary: it serves (startProxy resolved) at `url`. */
export const STARTED = 'agent-auth-proxy:started';

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
  process.send?.({ type: STARTED, url });
}

/** Runs the worker's serve to its exit code, then disconnects from the primary so the process can end. */
export async function asWorker(serve: () => Promise<number>): Promise<number> {
  try {
    return await serve();
  } finally {
    cluster.worker?.disconnect();
  }
}
