/**
 * Compiled argument validators, one per capability, compiled once and kept: compiling is
 * milliseconds, validating microseconds. `warm()` compiles the whole catalog in small slices
 * after start-up so the first execution of each capability does not pay for it either.
 */
import type { ValidateFunction } from 'ajv';
import { createSchemaValidator } from '../openapi/ajv.js';
import type { Catalog } from '../openapi/catalog.js';
import type { Capability } from '../openapi/types.js';
import type { ArgumentValidators } from './execute.js';

export class CompiledValidators implements ArgumentValidators {
  private readonly ajv;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(formats: Iterable<string>) {
    this.ajv = createSchemaValidator(formats);
  }

  get(capability: Capability): ValidateFunction {
    let fn = this.compiled.get(capability.name);
    if (!fn) {
      fn = this.ajv.compile(capability.argumentsSchema);
      this.compiled.set(capability.name, fn);
    }
    return fn;
  }

  /** Compiles every capability's validator, yielding to the event loop between slices. */
  warm(catalog: Catalog, signal: AbortSignal): Promise<void> {
    const pending = [...catalog.capabilities];
    return new Promise((resolve) => {
      const step = (): void => {
        const until = performance.now() + 10;
        while (pending.length > 0 && performance.now() < until && !signal.aborted) {
          this.get(pending.shift() as Capability);
        }
        if (pending.length === 0 || signal.aborted) resolve();
        else setImmediate(step);
      };
      setImmediate(step);
    });
  }
}
