/**
 * Resolves on the event loop's next turn, after the I/O that is waiting: a long piece of work
 * (loading a large API document on reload) awaits it between its steps, so that the requests the
 * proxy serves meanwhile wait for one step, not for all of them.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
