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

/**
 * The `$comment` of a schema whose values are secrets (credentials, passwords, webhook URLs): no
 * message quotes a value at or under it, since messages go to stderr, CI logs and the log of a
 * refused reload.
 */
export const SECRET_MARK = 'secret: never quoted in messages';

/** Validates (filling in defaults) or throws one UserError listing every problem. */
export function validateOrThrow(validate: ValidateFunction, data: unknown, file: string): void {
  if (validate(data)) return;
  const lines = (validate.errors ?? [])
    .filter(isUseful)
    .map((e) => `${file}: ${keyPath(e)}: ${describe(e, quotable(e, validate.schema))}`);
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

/**
 * What a message may quote of the offending value: a scalar, or a list of scalars, outside every
 * secret schema, with the user info of a URL in it masked. Of an object only its kind: one may
 * hold a secret beside the mistake (a credential with a misspelt key), and the path names it.
 */
export function quotable(error: ErrorObject, root: ValidateFunction['schema']): string {
  const { data } = error;
  if (data === undefined) return '';
  const scalar = (v: unknown): boolean => typeof v !== 'object' || v === null;
  if (!scalar(data) && !(Array.isArray(data) && data.every(scalar))) {
    return Array.isArray(data) ? ' (got a list)' : ' (got an object)';
  }
  if (underSecret(error.schemaPath, root)) return '';
  return ` (got ${JSON.stringify(data).replace(/\/\/[^/@\s"]*@/g, '//…@')})`;
}

/** Whether a schema on the way from the root to `schemaPath` (`#/properties/a/anyOf/0/…`) is secret. */
function underSecret(schemaPath: string, root: unknown): boolean {
  let node = root;
  for (const token of ['', ...schemaPath.split('/').slice(1)]) {
    if (token !== '') {
      if (typeof node !== 'object' || node === null) return false;
      node = (node as Record<string, unknown>)[token.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    if (
      typeof node === 'object' &&
      node !== null &&
      (node as { $comment?: unknown }).$comment === SECRET_MARK
    ) {
      return true;
    }
  }
  return false;
}

function describe(error: ErrorObject, got: string): string {
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
