/**
 * What tells a proxy to reload or to stop. One process is told by signals (signalControls); a
 * worker of `--workers` by the primary's orders over the cluster's IPC channel (src/cluster/worker.ts),
 * so that a signal sent to every process at once (a Ctrl-C, systemd's KillMode=control-group,
 * `kill -TERM -PGID`) reaches each worker once, through the primary, and not twice.
 */

export interface Controls {
  /**
   * The proxy serves: from now on each reload asked for calls `reload`, and one asked while it was
   * starting calls it once now (what it read may have changed since). Resolves when it is told to
   * stop, and it drains; reloads asked after that are ignored, without ending the process.
   */
  serving(reload: () => void): Promise<void>;
  /** Start-up failed: nothing is listened for any more. */
  dispose(): void;
}

/** The signals that stop one process: a second one ends it at once (the default action). */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/**
 * One process: SIGHUP reloads, SIGINT or SIGTERM drains. The SIGHUP handler is installed before
 * anything loads and kept while the proxy drains (and until the process ends): SIGHUP's default
 * action ends the process. A stop signal before the proxy serves takes its default action: there
 * is nothing to drain yet.
 */
export function signalControls(): Controls {
  let reload: (() => void) | undefined;
  let asked = false;
  let stopping = false;
  const onHangUp = (): void => {
    if (stopping) return;
    if (reload) reload();
    else asked = true;
  };
  process.on('SIGHUP', onHangUp);
  return {
    serving(serve) {
      reload = serve;
      if (asked) serve();
      return new Promise<void>((resolve) => {
        const stop = (): void => {
          // Gone after the first: a second signal ends the process at once, as a second Ctrl-C.
          for (const signal of STOP_SIGNALS) process.off(signal, stop);
          stopping = true;
          resolve();
        };
        for (const signal of STOP_SIGNALS) process.once(signal, stop);
      });
    },
    dispose() {
      process.off('SIGHUP', onHangUp);
    },
  };
}
