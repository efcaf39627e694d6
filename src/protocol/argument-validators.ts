/**
 * Compiled argument validators, one per capability, compiled on first use: compiling is
 * milliseconds (up to about a second for the largest schemas), validating microseconds.
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
 * A schema of at least OFF_THREAD_MIN_CHARS characters is compiled on a worker thread
 * (off-thread-compiler.ts): its call waits for it, the event loop does not (it waits only while
 * the code the worker sends is evaluated: at most 12 ms, where compiling here took 0.4–0.8 s).
 * Such a validator counts 2.5 times its schema's characters toward the budget (OFF_THREAD_WEIGHT).
 * A smaller one is compiled here at once. Should the worker fail, the schema is compiled here.
 *
 * `warm()` compiles the given capabilities (the composition root passes those someone holds a
 * grant on) in small slices after start-up, so their first execution does not pay for it; it
 * stops at the budget rather than start a new generation.
 */
import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { createSchemaValidator } from '../openapi/ajv.js';
import type { Capability } from '../openapi/types.js';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ArgumentValidators } from './execute.js';
import { OffThreadCompiler } from './off-thread-compiler.js';

export const MAX_COMPILED_SCHEMA_CHARS = 8_000_000;

/** Schemas this long or longer (JSON characters) are compiled on the worker thread. */
export const OFF_THREAD_MIN_CHARS = 64 * 1024;

/**
 * How much more of the budget a schema compiled on the worker thread takes: its code carries
 * every definition it reaches, where validators compiled here share the definitions one ajv
 * instance compiled already (Microsoft Graph's 15 largest inputs: 126 MB of heap against 51).
 */
const OFF_THREAD_WEIGHT = 2.5;

/** A validator at once, or the compilation it waits for. */
export type ValidatorOrPending = ReturnType<ArgumentValidators['get']>;

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

  /** Off-thread compilations under way, by digest: one per schema however many ask. */
  readonly #compiling = new Map<string, Promise<ValidateFunction>>();

  constructor(
    formats: Iterable<string>,
    private readonly maxChars = MAX_COMPILED_SCHEMA_CHARS,
    /** Told how long each compilation held the event loop (a metric). */
    private readonly observe: (seconds: number) => void = () => undefined,
    /** Where large schemas are compiled; absent, every schema is compiled here. */
    private readonly offThread?: OffThreadCompiler,
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

  /** The validator of `schema`: at once when compiled already or small, else when compiled. */
  validator(schema: object): ValidatorOrPending {
    const text = JSON.stringify(schema);
    const digest = createHash('sha256').update(text).digest('base64');
    const hit = this.#generation.bySchema.get(digest);
    if (hit) return hit;
    if (!this.offThread || text.length < OFF_THREAD_MIN_CHARS) return this.#compileHere(schema, text, digest);
    let compiling = this.#compiling.get(digest);
    if (!compiling) {
      compiling = this.offThread.compile(schema, this.formats).then(
        ({ validate, blockedSeconds }) => {
          this.observe(blockedSeconds);
          return this.#keep(digest, Math.ceil(text.length * OFF_THREAD_WEIGHT), validate);
        },
        // The worker failed (it died, or refused what ajv here accepts): compile here instead.
        () => this.#compileHere(schema, text, digest),
      );
      const settled = (): void => void this.#compiling.delete(digest);
      void compiling.then(settled, settled);
      this.#compiling.set(digest, compiling);
    }
    return compiling;
  }

  #compileHere(schema: object, text: string, digest: string): ValidateFunction {
    if (this.full) this.#generation = this.#fresh();
    const started = performance.now();
    const fn = this.#generation.ajv.compile(schema);
    this.observe((performance.now() - started) / 1000);
    return this.#keep(digest, text.length, fn);
  }

  #keep(digest: string, chars: number, fn: ValidateFunction): ValidateFunction {
    if (this.full) this.#generation = this.#fresh();
    this.#generation.bySchema.set(digest, fn);
    this.#generation.chars += chars;
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

  get(capability: Capability): ValidatorOrPending {
    this.followGeneration();
    const hit = this.byName.get(capability.name);
    if (hit) return hit;
    const got = this.compiler.validator(capability.argumentsSchema);
    if (typeof got === 'function') return this.remember(capability.name, got);
    return got.then((fn) => this.remember(capability.name, fn));
  }

  /**
   * Compiles these capabilities' validators one after another, yielding to the event loop at
   * least every 10 ms (a large one waits for the worker thread without holding it).
   */
  async warm(capabilities: readonly Capability[], signal: AbortSignal): Promise<void> {
    let sliceStart = performance.now();
    for (const capability of capabilities) {
      if (signal.aborted || this.compiler.full) return;
      const got = this.get(capability);
      if (typeof got !== 'function') {
        await got;
        sliceStart = performance.now();
      } else if (performance.now() - sliceStart >= 10) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
  }

  private remember(name: string, fn: ValidateFunction): ValidateFunction {
    // Compiling may have started a new generation: what this engine kept belongs to the old one.
    this.followGeneration();
    this.byName.set(name, fn);
    return fn;
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
  readonly #offThread = new OffThreadCompiler();

  constructor(private readonly observe?: (seconds: number) => void) {}

  for(formats: Iterable<string>): SchemaCompiler {
    const list = [...formats];
    if (!this.#current?.accepts(list)) {
      this.#current = new SchemaCompiler(list, MAX_COMPILED_SCHEMA_CHARS, this.observe, this.#offThread);
    }
    return this.#current;
  }

  /** Stops the worker thread (shutdown); a later large schema would start another. */
  close(): Promise<void> {
    return this.#offThread.close();
  }
}
