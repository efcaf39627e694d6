/**
 * Compiles a large schema on a worker thread, so the event loop does not wait for it. ajv's
 * compilation is mostly code generation (0.4–0.8 s for Microsoft Graph's and DocuSign's largest
 * input schemas); the worker generates the validator's code with ajv's standalone mode, and this
 * thread only turns that code into a function (the event loop was held at most 12 ms for those).
 *
 * The worker compiles with the same options and formats as createSchemaValidator (ajv.ts), a
 * fresh ajv instance each time (nothing accumulates in it); the code it sends back refers to
 * ajv's runtime helpers, formatTable() and the document-pattern engine by name, all resolved here. One worker, started on
 * first use and unreferenced (it never keeps the process alive); if it dies, the next compilation
 * starts another.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { ValidateFunction } from 'ajv';
import { formatTable, OWN_FORMATS, SCHEMA_OPTIONS } from '../openapi/ajv.js';
import { DOCUMENT_PATTERN_MODULE, documentPatternEngine } from '../util/linear-regexp.js';

const require = createRequire(import.meta.url);

/** The name by which compiled code asks for formatTable(). */
const FORMATS_MODULE = 'agent-auth-proxy:formats';

// Plain JavaScript, run as the worker's script (eval): tests run src/ as TypeScript, which a
// worker could not load. It resolves ajv from the project (workerData.base).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const projectRequire = require('node:module').createRequire(workerData.base);
const { Ajv2020 } = projectRequire('ajv/dist/2020.js');
const standaloneCode = projectRequire('ajv/dist/standalone').default;
const addFormats = projectRequire('ajv-formats');
const { _ } = projectRequire('ajv');
// Code generation only names the pattern engine; the code calls the real one (linear-regexp.ts).
// ajv tells patterns apart by their toString().
const patterns = Object.assign((source, flags) => ({ test: () => true, toString: () => \`/\${source}/\${flags}\` }), {
  code: \`require(\${JSON.stringify(workerData.patternModule)})\`,
});
parentPort.on('message', ({ id, schema, annotations }) => {
  try {
    const ajv = new Ajv2020({
      ...workerData.options,
      code: { source: true, formats: _\`require("${FORMATS_MODULE}")\`, regExp: patterns },
    });
    addFormats(ajv);
    // Code generation needs each format's type only; the code calls the real definitions.
    for (const [name, type] of workerData.typedFormats) ajv.addFormat(name, { type, validate: () => true });
    for (const name of annotations) if (!ajv.formats[name]) ajv.addFormat(name, true);
    const validate = ajv.compile(schema);
    parentPort.postMessage({ id, code: standaloneCode(ajv, validate) });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
`;

/** A validator compiled off the event loop, and how long turning its code into it held the loop. */
export interface OffThreadResult {
  readonly validate: ValidateFunction;
  readonly blockedSeconds: number;
}

interface Pending {
  resolve(result: OffThreadResult): void;
  reject(err: Error): void;
}

export class OffThreadCompiler {
  #worker: Worker | undefined;
  #nextId = 0;
  readonly #pending = new Map<number, Pending>();
  #formats: Readonly<Record<string, unknown>> | undefined;

  /** The validator of `schema`, with `annotations` as formats that only annotate. */
  compile(schema: object, annotations: readonly string[]): Promise<OffThreadResult> {
    const id = this.#nextId++;
    const worker = this.#started();
    return new Promise<OffThreadResult>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ id, schema, annotations });
    });
  }

  /** Stops the worker; compilations under way fail. */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    await worker?.terminate();
  }

  #started(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        base: import.meta.url,
        options: SCHEMA_OPTIONS,
        typedFormats: Object.entries(OWN_FORMATS).map(([name, def]) => [name, def.type]),
        patternModule: DOCUMENT_PATTERN_MODULE,
      },
    });
    worker.unref();
    worker.on('message', (message: { id: number; code?: string; error?: string }) => {
      const pending = this.#pending.get(message.id);
      if (!pending) return;
      this.#pending.delete(message.id);
      if (message.code === undefined) {
        pending.reject(new Error(message.error ?? 'compilation failed'));
        return;
      }
      const started = performance.now();
      const validate = this.#evaluate(message.code);
      pending.resolve({ validate, blockedSeconds: (performance.now() - started) / 1000 });
    });
    const fail = (err: Error): void => {
      if (this.#worker === worker) this.#worker = undefined;
      for (const pending of this.#pending.values()) pending.reject(err);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the schema compiler's worker exited (${code})`)));
    this.#worker = worker;
    return worker;
  }

  /** The standalone module's code → its validate function (a CommonJS module's exports). */
  #evaluate(code: string): ValidateFunction {
    const formats = (this.#formats ??= formatTable());
    const resolve = (id: string): unknown =>
      id === FORMATS_MODULE ? formats : id === DOCUMENT_PATTERN_MODULE ? documentPatternEngine : require(id);
    const module = { exports: {} as unknown };
    // The code is ajv's, generated from the operator's documents as ajv.compile would evaluate it
    // (ajv itself turns its code into functions with the Function constructor, as here).
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const load = new Function('module', 'exports', 'require', code) as (
      module: { exports: unknown },
      exports: unknown,
      require: (id: string) => unknown,
    ) => void;
    load(module, module.exports, resolve);
    return module.exports as ValidateFunction;
  }
}
