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

  /** `step`'s result; when it throws, everything opened before it is closed, then the error goes on. */
  async step<T>(step: () => Promise<T> | T): Promise<T> {
    try {
      return await step();
    } catch (err) {
      for (const close of this.#closers.splice(0).reverse()) await close();
      throw err;
    }
  }
}
