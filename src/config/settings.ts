/**
 * Settings: the config file (validated against CONFIG_SCHEMA, defaults filled in) overlaid with
 * CLI flags, checked once and frozen. Everything downstream reads this object, never argv or YAML.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { UserError } from '../errors.js';
import type { LogLevel } from '../log.js';
import type { OperationSelector } from '../openapi/selectors.js';
import { CONFIG_SCHEMA } from './schema.js';
import { compileConfigSchema, validateOrThrow } from './validate.js';

export interface ApiSettings {
  readonly id?: string;
  /** Absolute file path or http(s) URL. */
  readonly spec: string;
  readonly upstream?: string;
  readonly prefix?: string;
  readonly include?: readonly OperationSelector[];
  readonly exclude?: readonly OperationSelector[];
}

export interface Settings {
  readonly host: string;
  readonly port: number;
  /** Explicit issuer; when absent it follows the address the server actually listens on. */
  readonly issuer?: string;
  readonly maxBodyBytes: number;
  readonly providerName?: string;
  readonly providerDescription?: string;
  readonly allowRemoteRefs: boolean;
  readonly allowHttpSpecs: boolean;
  readonly specMaxBytes: number;
  readonly specTimeoutMs: number;
  readonly apis: readonly ApiSettings[];
  readonly mockUpstream: boolean;
  readonly logLevel: LogLevel;
}

/** What the CLI parsed; every field optional so config-file values show through. */
export interface CliOverrides {
  readonly config?: string;
  readonly specs?: readonly string[];
  readonly upstreams?: readonly string[];
  readonly host?: string;
  readonly port?: number;
  readonly issuer?: string;
  readonly mockUpstream?: boolean;
  readonly allowRemoteRefs?: boolean;
  readonly allowHttpSpecs?: boolean;
  readonly logLevel?: LogLevel;
}

interface FileConfig {
  server: { host: string; port: number; issuer?: string; max_body_bytes: number };
  provider: { name?: string; description?: string };
  specs: { allow_remote_refs: boolean; allow_http: boolean; max_bytes: number; timeout_ms: number };
  apis: {
    id?: string;
    spec: string;
    upstream?: string;
    prefix?: string;
    include?: OperationSelector[];
    exclude?: OperationSelector[];
  }[];
  mock_upstream: boolean;
  log_level: LogLevel;
}

const validateConfig = compileConfigSchema(CONFIG_SCHEMA);

export function readConfigFile(file: string): FileConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UserError(`${file}: config file not found or not readable`);
  }
  return parseConfig(text, file);
}

export function parseConfig(text: string, file: string): FileConfig {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new UserError(doc.errors.map((e) => `${file}: ${e.message.split('\n')[0] ?? ''}`).join('\n'));
  }
  const data: unknown = doc.toJS() ?? {};
  validateOrThrow(validateConfig, data, file);
  return data as FileConfig;
}

export function resolveSettings(cli: CliOverrides, cwd = process.cwd()): Settings {
  const file = cli.config ? resolve(cwd, cli.config) : undefined;
  const config = file ? readConfigFile(file) : parseConfig('{}', '(defaults)');
  const base = file ? dirname(file) : cwd;
  const location = (spec: string, from: string): string =>
    /^https?:\/\//i.test(spec) ? spec : resolve(from, spec);

  const apis: ApiSettings[] = config.apis.map((api) => ({ ...api, spec: location(api.spec, base) }));
  const cliSpecs = cli.specs ?? [];
  const upstreams = cli.upstreams ?? [];
  if (upstreams.length > 0 && cliSpecs.length === 0) {
    throw new UserError(
      '--upstream needs a --spec to apply to (set `upstream` per API in the config file instead)',
    );
  }
  if (upstreams.length > 1 && upstreams.length !== cliSpecs.length) {
    throw new UserError(
      `--upstream was given ${upstreams.length} times for ${cliSpecs.length} --spec; give one for all, or one per --spec in the same order`,
    );
  }
  for (const u of upstreams) {
    if (!/^https?:\/\/\S+$/i.test(u))
      throw new UserError(`--upstream ${JSON.stringify(u)}: must be an http(s) URL`);
  }
  cliSpecs.forEach((spec, i) => {
    const upstream = upstreams.length === 1 ? upstreams[0] : upstreams[i];
    apis.push({ spec: location(spec, cwd), ...(upstream ? { upstream } : {}) });
  });
  if (apis.length === 0) {
    throw new UserError('no API to serve: pass --spec FILE|URL, or --config FILE with an `apis` list');
  }

  const port = cli.port ?? config.server.port;
  const issuer = cli.issuer ?? config.server.issuer;
  if (issuer !== undefined && !/^https?:\/\/[^/\s?#]+(\/[^\s?#]*)?$/i.test(issuer)) {
    throw new UserError(
      `--issuer ${JSON.stringify(issuer)}: must be an http(s) URL without query or fragment`,
    );
  }
  const providerName = config.provider.name;
  const providerDescription = config.provider.description;
  return Object.freeze({
    host: cli.host ?? config.server.host,
    port,
    ...(issuer !== undefined ? { issuer: issuer.replace(/\/+$/, '') } : {}),
    maxBodyBytes: config.server.max_body_bytes,
    ...(providerName !== undefined ? { providerName } : {}),
    ...(providerDescription !== undefined ? { providerDescription } : {}),
    allowRemoteRefs: cli.allowRemoteRefs ?? config.specs.allow_remote_refs,
    allowHttpSpecs: cli.allowHttpSpecs ?? config.specs.allow_http,
    specMaxBytes: config.specs.max_bytes,
    specTimeoutMs: config.specs.timeout_ms,
    apis: Object.freeze(apis.map((a) => Object.freeze(a))),
    mockUpstream: cli.mockUpstream ?? config.mock_upstream,
    logLevel: cli.logLevel ?? config.log_level,
  });
}
