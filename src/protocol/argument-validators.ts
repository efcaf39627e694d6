/**
 * Compiled argument validators, one per capability, compiled on first use: compiling is
 * milliseconds (up to about a second for the largest schemas, in one piece on the event loop),
 * validating microseconds.
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
 * The compiled functions live in a SchemaCompiler, by the SHA-256 of the schema's JSON, which
 * every engine of the process shares (start-up's and each reload's): a reload keeps the
 * validator of every capability whose argument schema did not change, so a reload of unchanged
 * documents compiles nothing again. Each engine still maps names to the validators of its own
 * catalog (CompiledValidators), so a request validates against the catalog it started with. The
 * validators of schemas a reload changed or removed stay in the generation until it is replaced;
 * they count toward its budget, so memory stays within it all the same.
 *
 * `warm()` compiles the given capabilities (the composition root passes those someone holds a
 * grant on) in small slices after start-up, so their first execution does not pay for it; it
 * stops at the budget rather than start a new generation.
 */
import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { createSchemaValidator } from '../openapi/ajv.js';
import type { Capability } from '../openapi/types.js';
import type { ArgumentValidators } from './execute.js';

export const MAX_COMPILED_SCHEMA_CHARS = 8_000_000;

/** One ajv instance and what it compiled, by schema digest; replaced whole when the budget is spent. */
interface Generation {
  readonly ajv: ReturnType<typeof createSchemaValidator>;
  readonly bySchema: Map<string, ValidateFunction>;
  /** JSON characters of the schemas compiled in it. */
  chars: number;
}

/** Compiles schemas for the engines of one process, within the budget (see above). */
export class SchemaCompiler {
  readonly formats: readonly string[];
  #generation: Generation;

  constructor(
    formats: Iterable<string>,
    private readonly maxChars = MAX_COMPILED_SCHEMA_CHARS,
    /** Told how long each compilation took (a metric: each one blocks the event loop). */
    private readonly observe: (seconds: number) => void = () => undefined,
  ) {
    this.formats = [...formats].sort();
    this.#generation = this.#fresh();
  }

  /** The generation in force: an engine drops its name map when this changes. */
  get generation(): object {
    return this.#generation;
  }

  get full(): boolean {
    return this.#generation.chars >= this.maxChars;
  }

  /** Whether this compiler serves a catalog using `formats` (else the engine needs a new one). */
  accepts(formats: Iterable<string>): boolean {
    const wanted = [...formats].sort();
    return wanted.length === this.formats.length && wanted.every((f, i) => f === this.formats[i]);
  }

  compile(schema: object): ValidateFunction {
    const text = JSON.stringify(schema);
    const digest = createHash('sha256').update(text).digest('base64');
    const hit = this.#generation.bySchema.get(digest);
    if (hit) return hit;
    if (this.full) this.#generation = this.#fresh();
    const started = performance.now();
    const fn = this.#generation.ajv.compile(schema);
    this.observe((performance.now() - started) / 1000);
    this.#generation.bySchema.set(digest, fn);
    this.#generation.chars += text.length;
    return fn;
  }

  #fresh(): Generation {
    return { ajv: createSchemaValidator(this.formats), bySchema: new Map(), chars: 0 };
  }
}

/** One engine's validators by capability name, drawn from the process's SchemaCompiler. */
export class CompiledValidators implements ArgumentValidators {
  private byName = new Map<string, ValidateFunction>();
  private generation: object;

  constructor(private readonly compiler: SchemaCompiler) {
    this.generation = compiler.generation;
  }

  /** Validators kept now, in the order compiled (tests). */
  kept(): string[] {
    this.followGeneration();
    return [...this.byName.keys()];
  }

  get(capability: Capability): ValidateFunction {
    this.followGeneration();
    const hit = this.byName.get(capability.name);
    if (hit) return hit;
    const fn = this.compiler.compile(capability.argumentsSchema);
    // Compiling may have started a new generation: what this engine kept belongs to the old one.
    this.followGeneration();
    this.byName.set(capability.name, fn);
    return fn;
  }

  /** Compiles these capabilities' validators, yielding to the event loop between slices. */
  warm(capabilities: readonly Capability[], signal: AbortSignal): Promise<void> {
    const pending = [...capabilities];
    const done = (): boolean => pending.length === 0 || signal.aborted || this.compiler.full;
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

  /** Drops the name map when the compiler has moved to a new generation (freeing the old one). */
  private followGeneration(): void {
    if (this.generation === this.compiler.generation) return;
    this.generation = this.compiler.generation;
    this.byName = new Map();
  }
}

/** The process's SchemaCompiler, replaced only when a catalog needs other formats. */
export class SchemaCompilers {
  #current: SchemaCompiler | undefined;

  constructor(private readonly observe?: (seconds: number) => void) {}

  for(formats: Iterable<string>): SchemaCompiler {
    const list = [...formats];
    if (!this.#current?.accepts(list)) {
      this.#current = new SchemaCompiler(list, MAX_COMPILED_SCHEMA_CHARS, this.observe);
    }
    return this.#current;
  }
}
