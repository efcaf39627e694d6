/**
 * `serve`: one process, or with `--workers N` (N > 1) the primary of N worker processes
 * (src/cluster/), each of which comes back here and serves like one process. Loaded only by this
 * command: the server is most of the program, and the other commands start without it.
 */
import { resolveSettings, type CliOverrides, type Settings } from '../config/settings.js';
import { startProxy, type ProxyDeps } from '../app.js';
import { runPrimary } from '../cluster/primary.js';
import { announceStarted, asWorker, isWorker, workerDeps } from '../cluster/worker.js';
import { createLogger } from '../log.js';
import { watchedFiles, watchFiles } from '../watch.js';

export async function serve(cli: CliOverrides, watching: boolean): Promise<number> {
  const settings = resolveSettings(cli);
  if (settings.workers === 1) return serveOne(cli, settings, watching, {});
  if (!isWorker()) {
    const logger = createLogger(settings.logLevel, undefined, Date.now, settings.logFormat, { worker: 0 });
    return runPrimary({ workers: settings.workers, logger });
  }
  return asWorker(() => serveOne(cli, settings, watching, workerDeps(settings)));
}

async function serveOne(
  cli: CliOverrides,
  settings: Settings,
  watching: boolean,
  deps: Pick<ProxyDeps, 'logger' | 'metricsExposition'>,
): Promise<number> {
  // SIGHUP's default action ends the process: a reload asked for while a large document is still
  // loading (seconds) is kept for once the proxy serves, since what it would read may have changed.
  let reloadAsked = false;
  let whenStarted = (): void => {
    reloadAsked = true;
  };
  const reload = (): void => whenStarted();
  process.on('SIGHUP', reload);
  // A reload reads the config file again with the same flags and environment (README "Live changes").
  const proxy = await startProxy(settings, { ...deps, rereadSettings: () => resolveSettings(cli) }).catch(
    (err: unknown) => {
      process.off('SIGHUP', reload);
      throw err;
    },
  );
  if (isWorker()) announceStarted(proxy.url);
  // The outcome is logged and counted by the reload itself; a signal has nobody to answer.
  whenStarted = (): void => void proxy.reload();
  if (reloadAsked) whenStarted();
  const unwatch = watching ? watchFiles(watchedFiles(settings, cli.config), reload) : undefined;
  // A worker stops when the primary says so (SIGTERM): a Ctrl-C reaches the whole process group,
  // and the primary, which gets it too, stops every worker in turn.
  const stopSignals: NodeJS.Signals[] = isWorker() ? ['SIGTERM'] : ['SIGINT', 'SIGTERM'];
  const ignore = (): void => undefined;
  if (isWorker()) process.on('SIGINT', ignore);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      for (const signal of stopSignals) process.off(signal, stop);
      process.off('SIGHUP', reload);
      unwatch?.();
      resolve();
    };
    for (const signal of stopSignals) process.once(signal, stop);
  });
  await proxy.close();
  return 0;
}
