/**
 * The config file: YAML read, validated against CONFIG_SCHEMA and filled in with its defaults, or
 * those defaults alone when no file is given. settings.ts overlays the flags on what this returns;
 * commands that need a key or two (`health`, `db backup`) read it here without the rest.
 */
import { readFileSync } from 'node:fs';
import { UserError } from '../errors.js';
import { CONFIG_SCHEMA, type FileConfig } from './schema.js';
import { schemaDefaults } from './schema-defaults.js';
import { lazyConfigSchema, validateOrThrow } from './validate.js';
import { parseYamlText } from './yaml-text.js';

const validateConfig = lazyConfigSchema(CONFIG_SCHEMA);

/** The file at `file` (an absolute path), or the defaults when there is none. */
export function configOf(file: string | undefined): FileConfig {
  return file ? readConfigFile(file) : defaultConfig();
}

/** No config file: `{}` with the schema's defaults, as parseConfig('{}') gives, without compiling it. */
export function defaultConfig(): FileConfig {
  return schemaDefaults(CONFIG_SCHEMA) as FileConfig;
}

export function readConfigFile(file: string): FileConfig {
  const data = readYaml(file);
  validateOrThrow(validateConfig(), data, file);
  return data as FileConfig;
}

export function parseConfig(text: string, file: string): FileConfig {
  const data = parseYamlText(text, file);
  validateOrThrow(validateConfig(), data, file);
  return data as FileConfig;
}

/** The file's text as YAML (`{}` when empty), unchecked, or a UserError naming each syntax error. */
export function readYaml(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UserError(`${file}: config file not found or not readable`);
  }
  return parseYamlText(text, file);
}
