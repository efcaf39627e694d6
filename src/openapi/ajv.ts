/**
 * The JSON Schema 2020-12 validator capability schemas are compiled with: strict about keywords
 * (the deriver emits only standard ones), no type coercion, ajv-formats plus OpenAPI's numeric
 * formats; formats it does not know are annotations, as JSON Schema 2020-12 makes them by default.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const INT32 = 2 ** 31;

export function createSchemaValidator(extraFormats: Iterable<string> = []): Ajv2020 {
  const ajv = new Ajv2020({
    strict: true,
    strictTypes: false, // real documents mix keywords of several types; that is legal JSON Schema
    strictTuples: false,
    strictRequired: false,
    allowUnionTypes: true,
    coerceTypes: false,
    useDefaults: false,
    allErrors: true,
    validateFormats: true,
  });
  addFormats(ajv);
  ajv.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && n >= -INT32 && n < INT32,
  });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('float', { type: 'number', validate: () => true });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  for (const format of extraFormats) {
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  return ajv;
}
