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
  /** SQLite file (absolute path) or `:memory:`. */
  readonly dbFile: string;
  /** Policy YAML (absolute path); absent: the built-in default policy. */
  readonly policyFile?: string;
  /** Enables the operator API. Never logged. */
  readonly adminToken?: string;
  /** Accepted by `POST /agent/introspect` besides the admin token. Never logged. */
  readonly introspectionToken?: string;
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
  readonly db?: string;
  readonly policy?: string;
  readonly adminToken?: string;
  readonly adminTokenFile?: string;
  readonly introspectionToken?: string;
  readonly introspectionTokenFile?: string;
}

/** Where secrets may also come from, so they stay out of argv and config files. */
export const ENV = {
  adminToken: 'AGENT_AUTH_PROXY_ADMIN_TOKEN',
  introspectionToken: 'AGENT_AUTH_PROXY_INTROSPECTION_TOKEN',
} as const;

const MIN_SECRET_LENGTH = 16;

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
  database?: string;
  policy?: string;
  admin_token_file?: string;
  introspection_token_file?: string;
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

export function resolveSettings(
  cli: CliOverrides,
  cwd = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): Settings {
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
  const dbFile =
    cli.db === ':memory:'
      ? ':memory:'
      : cli.db !== undefined
        ? resolve(cwd, cli.db)
        : config.database !== undefined
          ? resolve(base, config.database)
          : resolve(cwd, 'data/agent-auth-proxy.db');
  const policyFile =
    cli.policy !== undefined
      ? resolve(cwd, cli.policy)
      : config.policy !== undefined
        ? resolve(base, config.policy)
        : undefined;
  const adminToken = secret('admin token', [
    ['--admin-token', cli.adminToken],
    [
      '--admin-token-file',
      cli.adminTokenFile && readSecretFile(resolve(cwd, cli.adminTokenFile), '--admin-token-file'),
    ],
    [ENV.adminToken, env[ENV.adminToken]],
    [
      'admin_token_file',
      config.admin_token_file && readSecretFile(resolve(base, config.admin_token_file), 'admin_token_file'),
    ],
  ]);
  const introspectionToken = secret('introspection token', [
    ['--introspection-token', cli.introspectionToken],
    [
      '--introspection-token-file',
      cli.introspectionTokenFile &&
        readSecretFile(resolve(cwd, cli.introspectionTokenFile), '--introspection-token-file'),
    ],
    [ENV.introspectionToken, env[ENV.introspectionToken]],
    [
      'introspection_token_file',
      config.introspection_token_file &&
        readSecretFile(resolve(base, config.introspection_token_file), 'introspection_token_file'),
    ],
  ]);
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
    dbFile,
    ...(policyFile !== undefined ? { policyFile } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(introspectionToken !== undefined ? { introspectionToken } : {}),
  });
}

/** The first source that sets the secret wins; a weak secret is refused (its value is never shown). */
function secret(
  what: string,
  sources: readonly (readonly [string, string | undefined])[],
): string | undefined {
  for (const [from, value] of sources) {
    if (value === undefined || value === '') continue;
    if (value.length < MIN_SECRET_LENGTH || /\s/.test(value)) {
      throw new UserError(
        `${from}: the ${what} must be at least ${MIN_SECRET_LENGTH} characters without whitespace (e.g. openssl rand -hex 32)`,
      );
    }
    return value;
  }
  return undefined;
}

function readSecretFile(file: string, from: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    throw new UserError(`${from}: ${file}: not found or not readable`);
  }
}
