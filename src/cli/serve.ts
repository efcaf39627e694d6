/**
 * `serve`: one process, or with `--workers N` (N > 1) the primary of N worker processes
 * (src/cluster/), each of which comes back here and serves like one process. Loaded only by this
 * command: the server is most of the program, and the other commands start without it.
 */
import { resolve } from 'node:path';
import { resolveSettings, type CliOverrides, type Settings } from '../config/settings.js';
import { startProxy, type ProxyDeps } from '../app.js';
import { signalControls, type Controls } from '../cluster/controls.js';
import { runPrimary } from '../cluster/primary.js';
import { announceStarted, asWorker, isWorker, workerDeps } from '../cluster/worker.js';
import { createLogger } from '../log.js';
import { fileStamps, watchedFiles, watchFilesSince, type FileStamps } from '../watch.js';

export async function serve(cli: CliOverrides, watching: boolean): Promise<number> {
  // A worker takes its orders from the primary, and ignores signals, from its first moment.
  if (isWorker()) {
    return asWorker((controls) => {
      const { settings, read } = readSettings(cli, watching);
      return serveOne(cli, settings, read, controls, workerDeps(settings));
    });
  }
  const { settings, read } = readSettings(cli, watching);
  if (settings.workers === 1) return serveOne(cli, settings, read, signalControls(), {});
  const logger = createLogger(settings.logLevel, undefined, Date.now, settings.logFormat, { worker: 0 });
  return runPrimary({ workers: settings.workers, logger });
}

/**
 * The settings, and with `--watch` each watched file's stamp from before it was read: the config
 * file's before the settings are resolved, the policy's and documents' before the proxy loads them.
 */
function readSettings(cli: CliOverrides, watching: boolean): { settings: Settings; read?: FileStamps } {
  const config = watching && cli.config ? fileStamps([resolve(cli.config)]) : new Map<string, string>();
  const settings = resolveSettings(cli);
  if (!watching) return { settings };
  return { settings, read: new Map([...fileStamps(watchedFiles(settings, cli.config)), ...config]) };
}

async function serveOne(
  cli: CliOverrides,
  settings: Settings,
  read: FileStamps | undefined,
  controls: Controls,
  deps: Pick<ProxyDeps, 'logger' | 'metricsExposition'>,
): Promise<number> {
  // A reload reads the config file again with the same flags and environment (README "Live changes").
  const proxy = await startProxy(settings, { ...deps, rereadSettings: () => resolveSettings(cli) }).catch(
    (err: unknown) => {
      controls.dispose();
      throw err;
    },
  );
  if (isWorker()) announceStarted(proxy.url);
  // The outcome is logged and counted by the reload itself; a signal has nobody to answer.
  const reload = (): void => void proxy.reload();
  const stopAsked = controls.serving(reload);
  // A file changed while the proxy was loading, before the watch began, reloads it now.
  const unwatch = read ? watchFilesSince(read, reload) : undefined;
  await stopAsked;
  unwatch?.();
  await proxy.close();
  return 0;
}
