/**
 * The JSON Schema 2020-12 validator capability schemas are compiled with: strict about keywords
 * (the deriver emits only standard ones), no type coercion, ajv-formats plus OpenAPI's numeric
 * formats; formats it does not know are annotations, as JSON Schema 2020-12 makes them by default.
 * Every regular expression a document brings (`pattern`, `patternProperties`) and `format: url`
 * run in linear time (util/linear-regexp.ts), since agents choose the strings they are tried on.
 */
import { createRequire } from 'node:module';
import type { Options } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FormatDefinition } from 'ajv';
import { documentPatternEngine } from '../util/linear-regexp.js';
import { isUrl } from './url-format.js';

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

/**
 * The formats defined here rather than taken from ajv-formats: OpenAPI's numeric ones, and `url`,
 * whose ajv-formats expression takes quadratic time (url-format.ts).
 */
export const OWN_FORMATS: Readonly<Record<string, FormatDefinition<number> | FormatDefinition<string>>> =
  Object.freeze({
    int32: { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -INT32 && n < INT32 },
    int64: { type: 'number', validate: (n: number) => Number.isInteger(n) },
    float: { type: 'number', validate: () => true },
    double: { type: 'number', validate: () => true },
    url: { type: 'string', validate: isUrl },
  });

/**
 * Every format definition a compiled validator may call: ajv-formats' full set and OWN_FORMATS.
 * Code compiled off the event loop (validator-worker.ts) refers to its formats by name in this
 * table.
 */
export function formatTable(): Readonly<Record<string, unknown>> {
  const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: Record<string, unknown> };
  return { ...fullFormats, ...OWN_FORMATS };
}

export function createSchemaValidator(extraFormats: Iterable<string> = []): Ajv2020 {
  const ajv = new Ajv2020({ ...SCHEMA_OPTIONS, code: { regExp: documentPatternEngine } });
  addFormats(ajv);
  for (const [name, definition] of Object.entries(OWN_FORMATS)) ajv.addFormat(name, definition);
  for (const format of extraFormats) {
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  return ajv;
}
