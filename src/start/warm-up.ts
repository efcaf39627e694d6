/**
 * Argument validators compiled in the background after start-up and after each reload, so the
 * first calls need not pay for it: only those of capabilities someone holds a grant on, since
 * executions need no other (argument-validators.ts).
 */
import type { BuiltEngine } from '../engine.js';
import type { Logger } from '../log.js';
import type { Catalog } from '../openapi/catalog.js';
import type { Store } from '../storage/types.js';
import { backgroundFailure } from './maintenance.js';

export class ValidatorWarmUp {
  readonly #stopped = new AbortController();
  readonly #store: Store;
  readonly #logger: Logger;

  constructor(store: Store, logger: Logger) {
    this.#store = store;
    this.#logger = logger;
  }

  warm(validators: BuiltEngine['validators'], served: Catalog): void {
    const { signal } = this.#stopped;
    this.#store
      .grantedCapabilities(served.capabilities.map((c) => c.name))
      .then((held) =>
        validators.warm(
          served.capabilities.filter((c) => held.has(c.name)),
          signal,
        ),
      )
      .catch((err: unknown) => {
        // Shutting down closed the store under the query: nothing to report.
        if (!signal.aborted) backgroundFailure(this.#logger, 'validator warm-up', err);
      });
  }

  stop(): void {
    this.#stopped.abort();
  }
}
