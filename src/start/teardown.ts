/**
 * What start-up has opened so far, closed in reverse order when a later step fails: a failed start
 * leaves no listener, upstream connection or database handle behind (issue 12).
 */
export class Teardown {
  readonly #closers: (() => Promise<unknown> | undefined)[] = [];

  /** `close` runs if a later step fails. */
  add(close: () => Promise<unknown> | undefined): void {
    this.#closers.push(close);
  }

  /**
   * `step(...args)`'s result; when it throws, everything opened before it is closed, then the
   * error goes on. Arguments are passed, not captured in a closure, where that matters: V8 keeps
   * every variable that any closure of a function names for as long as the longest-lived of them,
   * and start-up's closures live as long as the proxy, so capturing the first catalog would keep
   * it in memory after a reload has replaced it.
   */
  async step<A extends unknown[], T>(step: (...args: A) => Promise<T> | T, ...args: A): Promise<T> {
    try {
      return await step(...args);
    } catch (err) {
      for (const close of this.#closers.splice(0).reverse()) await close();
      throw err;
    }
  }
}
