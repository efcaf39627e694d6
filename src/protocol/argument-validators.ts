/**
 * Compiled argument validators, one per capability, compiled on first use: compiling is
 * milliseconds (a few hundred for the largest schemas), validating microseconds.
 *
 * Kept within a budget. Compiled code grows with the schema, about 9 bytes of heap per character
 * of its JSON, and every capability's schema carries its own `$defs`: compiling all of Microsoft
 * Graph's 11,422 capabilities took the proxy past 1 GB. Validators are kept while their schemas
 * total at most `maxChars` characters (8 million by default, about 75 MB of heap); the next one
 * compiled past that starts a new generation: a fresh ajv instance, every kept validator dropped
 * and compiled again when next needed. Only a fresh instance frees the memory: ajv keeps what
 * its compiled functions refer to in one scope for the instance's life, `removeSchema` or not
 * (measured on Graph: evicting one validator at a time still grew the heap by 600 MB).
 *
 * `warm()` compiles the given capabilities (the composition root passes those someone holds a
 * grant on) in small slices after start-up, so their first execution does not pay for it; it
 * stops at the budget rather than start a new generation.
 */
import type { ValidateFunction } from 'ajv';
import { createSchemaValidator } from '../openapi/ajv.js';
import type { Capability } from '../openapi/types.js';
import type { ArgumentValidators } from './execute.js';

export const MAX_COMPILED_SCHEMA_CHARS = 8_000_000;

export class CompiledValidators implements ArgumentValidators {
  private readonly formats: readonly string[];
  private ajv;
  private compiled = new Map<string, ValidateFunction>();
  /** JSON characters of the schemas compiled in this generation. */
  private chars = 0;

  constructor(
    formats: Iterable<string>,
    private readonly maxChars = MAX_COMPILED_SCHEMA_CHARS,
  ) {
    this.formats = [...formats];
    this.ajv = createSchemaValidator(this.formats);
  }

  /** Validators kept now, in the order compiled (tests). */
  kept(): string[] {
    return [...this.compiled.keys()];
  }

  get(capability: Capability): ValidateFunction {
    const hit = this.compiled.get(capability.name);
    if (hit) return hit;
    if (this.chars >= this.maxChars) this.newGeneration();
    const schema = capability.argumentsSchema;
    const fn = this.ajv.compile(schema);
    this.compiled.set(capability.name, fn);
    this.chars += JSON.stringify(schema).length;
    return fn;
  }

  /** Compiles these capabilities' validators, yielding to the event loop between slices. */
  warm(capabilities: readonly Capability[], signal: AbortSignal): Promise<void> {
    const pending = [...capabilities];
    const done = (): boolean => pending.length === 0 || signal.aborted || this.chars >= this.maxChars;
    return new Promise((resolve) => {
      const step = (): void => {
        const until = performance.now() + 10;
        while (!done() && performance.now() < until) this.get(pending.shift() as Capability);
        if (done()) resolve();
        else setImmediate(step);
      };
      setImmediate(step);
    });
  }

  private newGeneration(): void {
    this.ajv = createSchemaValidator(this.formats);
    this.compiled = new Map();
    this.chars = 0;
  }
}
