/**
 * The JSON Schema 2020-12 validator capability schemas are compiled with: strict about keywords
 * (the deriver emits only standard ones), no type coercion, ajv-formats plus OpenAPI's numeric
 * formats; formats it does not know are annotations, as JSON Schema 2020-12 makes them by default.
 */
import { createRequire } from 'node:module';
import type { Options } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FormatDefinition } from 'ajv';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const require = createRequire(import.meta.url);

const INT32 = 2 ** 31;

/** The options every capability schema is compiled with (here and off the event loop). */
export const SCHEMA_OPTIONS: Readonly<Options> = Object.freeze({
  strict: true,
  strictTypes: false, // real documents mix keywords of several types; that is legal JSON Schema
  strictTuples: false,
  strictRequired: false,
  allowUnionTypes: true,
  coerceTypes: false,
  useDefaults: false,
  allErrors: true,
  validateFormats: true,
  // Arguments are JSON.parse objects: without this, an optional property named `constructor` or
  // `toString` is read from the prototype, so leaving it out fails its type check.
  ownProperties: true,
});

/** OpenAPI's numeric formats, beside ajv-formats' own. */
export const OPENAPI_FORMATS: Readonly<Record<string, FormatDefinition<number>>> = Object.freeze({
  int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -INT32 && n < INT32 },
  int64: { type: 'number', validate: (n: number) => Number.isInteger(n) },
  float: { type: 'number', validate: () => true },
  double: { type: 'number', validate: () => true },
});

/**
 * Every format definition a compiled validator may call: ajv-formats' full set and OpenAPI's.
 * Code compiled off the event loop (validator-worker.ts) refers to its formats by name in this
 * table.
 */
export function formatTable(): Readonly<Record<string, unknown>> {
  const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: Record<string, unknown> };
  return { ...fullFormats, ...OPENAPI_FORMATS };
}

export function createSchemaValidator(extraFormats: Iterable<string> = []): Ajv2020 {
  const ajv = new Ajv2020({ ...SCHEMA_OPTIONS });
  addFormats(ajv);
  for (const [name, definition] of Object.entries(OPENAPI_FORMATS)) ajv.addFormat(name, definition);
  for (const format of extraFormats) {
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  return ajv;
}
