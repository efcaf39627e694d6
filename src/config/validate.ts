/**
 * Schema validation of operator-written YAML with messages that name the file, the key path and
 * what was expected, e.g. `proxy.yaml: apis[0].upstream: must be an http(s) URL (got "ftp://x")`.
 */
import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { Ajv2020 as Ajv2020Class } from 'ajv/dist/2020.js';
import { UserError } from '../errors.js';

// Ajv (CommonJS) is required when a schema is first compiled: 30 ms of loading that a command
// reading no file (`health`, `--version`) need not pay.
const require = createRequire(import.meta.url);

export function compileConfigSchema(schema: object): ValidateFunction {
  const { Ajv2020 } = require('ajv/dist/2020.js') as { Ajv2020: typeof Ajv2020Class };
  // verbose: errors carry the offending value and their schema, which the messages quote
  // (`(got …)`, the allowed keys).
  const ajv = new Ajv2020({ allErrors: true, useDefaults: true, strict: true, verbose: true });
  return ajv.compile(schema);
}

/**
 * The validator compiled on first use: compiling the config or policy schema costs a quarter of a
 * second, which a start-up with neither file (`serve --spec …`) need not pay.
 */
export function lazyConfigSchema(schema: object): () => ValidateFunction {
  let validate: ValidateFunction | undefined;
  return () => (validate ??= compileConfigSchema(schema));
}

/** Validates (filling in defaults) or throws one UserError listing every problem. */
export function validateOrThrow(validate: ValidateFunction, data: unknown, file: string): void {
  if (validate(data)) return;
  const lines = (validate.errors ?? []).filter(isUseful).map((e) => `${file}: ${keyPath(e)}: ${describe(e)}`);
  throw new UserError([...new Set(lines)].join('\n'));
}

/** `/apis/0/include/1` → `apis[0].include[1]` */
export function keyPath(error: ErrorObject): string {
  const tokens = error.instancePath
    .split('/')
    .slice(1)
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (error.keyword === 'required') tokens.push(String(error.params.missingProperty));
  if (error.keyword === 'additionalProperties') tokens.push(String(error.params.additionalProperty));
  const path = tokens.reduce((acc, t) => (/^\d+$/.test(t) ? `${acc}[${t}]` : acc ? `${acc}.${t}` : t), '');
  return path || '(top level)';
}

function describe(error: ErrorObject): string {
  const got = error.data === undefined ? '' : ` (got ${JSON.stringify(error.data)})`;
  const schema = error.parentSchema as
    { properties?: Record<string, unknown>; description?: string } | undefined;
  switch (error.keyword) {
    case 'additionalProperties':
      return `unknown key; allowed keys: ${Object.keys(schema?.properties ?? {}).join(', ')}`;
    case 'required':
      return 'is required';
    case 'type':
      return `must be ${article(String(error.params.type))}${got}`;
    case 'enum':
      return `must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}${got}`;
    case 'pattern':
      return `${patternMeaning(String(error.params.pattern))}${got}`;
    case 'minimum':
    case 'maximum':
      return `must be ${error.keyword === 'minimum' ? '>=' : '<='} ${String(error.params.limit)}${got}`;
    case 'minItems':
      return error.params.limit === 1
        ? 'must not be empty'
        : `must have at least ${String(error.params.limit)} items`;
    case 'minProperties':
      return 'must set at least one key';
    case 'minLength':
      // A longer minimum is not "empty": "A" against 2 would be told the wrong thing.
      return error.params.limit === 1
        ? 'must not be empty'
        : `must be at least ${String(error.params.limit)} characters${got}`;
    default:
      return `${error.message ?? 'is invalid'}${got}`;
  }
}

function patternMeaning(pattern: string): string {
  if (pattern.startsWith('^https?://')) return 'must be an http(s) URL';
  if (pattern === '^/') return 'must start with "/"';
  return `must match ${pattern}`;
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/** `anyOf`/`if` wrappers repeat what their branches already said. */
function isUseful(error: ErrorObject): boolean {
  return error.keyword !== 'anyOf' && error.keyword !== 'oneOf' && error.keyword !== 'if';
}
