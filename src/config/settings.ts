/**
 * Settings: the config file (validated against CONFIG_SCHEMA, defaults filled in) overlaid with
 * CLI flags, checked once and frozen. Everything downstream reads this object, never argv or YAML.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { UserError } from '../errors.js';
import { resolveDatabase, type DatabaseSettings } from './database.js';
import type { LogFormat, LogLevel } from '../log.js';
import type { OperationSelector } from '../openapi/selectors.js';
import { parseDuration } from './durations.js';
import { parseCidr } from './cidr.js';
import { CONFIG_SCHEMA, type FileConfig, type SecretConfig } from './schema.js';
import { resolveSignIn, type SignInSettings } from './sign-in.js';
import { resolveJwks, type JwksSettings } from './jwks.js';
import { resolveNotifications, type NotificationSettings } from './notifications.js';
import { schemaDefaults } from './schema-defaults.js';
import { lazyConfigSchema, validateOrThrow } from './validate.js';

export interface ApiSettings {
  readonly id?: string;
  /** Absolute file path or http(s) URL. */
  readonly spec: string;
  readonly upstream?: string;
  readonly prefix?: string;
  readonly include?: readonly OperationSelector[];
  readonly exclude?: readonly OperationSelector[];
  /** How this API's operations are called; secrets already resolved. */
  readonly execution: ApiExecutionSettings;
}

/** A service credential for one security scheme. Values are secrets: never logged or returned. */
export type ServiceCredential =
  | { readonly kind: 'secret'; readonly value: string }
  | { readonly kind: 'basic'; readonly username: string; readonly password: string }
  | {
      readonly kind: 'oauth2';
      readonly clientId: string;
      readonly clientSecret: string;
      readonly tokenUrl?: string;
      readonly scopes: readonly string[];
      readonly audience?: string;
    };

export type PinnedValue = { readonly from: 'user_id' | 'agent_id' | 'host_id' } | string | number | boolean;

export interface UpstreamLimits {
  readonly timeoutMs: number;
  readonly retries: number;
  readonly retryBackoffMs: number;
  readonly maxResponseBytes: number;
}

export interface ApiExecutionSettings extends UpstreamLimits {
  readonly serverVariables: Readonly<Record<string, string>>;
  readonly credentials: Readonly<Record<string, ServiceCredential>>;
  /** Static headers (name as configured → value). */
  readonly headers: Readonly<Record<string, string>>;
  readonly identityHeaders?: { readonly agent?: string; readonly host?: string; readonly user?: string };
  readonly operations: Readonly<
    Record<string, { readonly timeoutMs?: number; readonly pin: Readonly<Record<string, PinnedValue>> }>
  >;
}

/** Bounds on what one client can hold open; documented in README "Bounds". */
export interface ConnectionSettings {
  /** Open connections in total; more are closed as they arrive. */
  readonly maxConnections: number;
  /** Per peer address; trusted proxies are exempt (they carry many clients). */
  readonly maxConnectionsPerIp: number;
  /** From connect to the end of the request headers; a silent socket is shed after this. */
  readonly headersTimeoutMs: number;
  /** From connect to the end of the request body. */
  readonly requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number;
  /** Request line plus headers. */
  readonly maxHeaderBytes: number;
  /** SIGTERM: how long requests in progress may take to finish (server.shutdown_grace). */
  readonly shutdownGraceMs: number;
}

export interface ExecutionSettings {
  readonly streamMaxDurationMs: number;
  readonly streamRevocationCheckMs: number;
  readonly asyncJobTtlMs: number;
}

/** Group commit of activity records (src/protocol/execution-log.ts). */
export interface AuditSettings {
  readonly commitWindowMs: number;
  readonly maxBatch: number;
  /** Activity older than this is pruned (§9.2); null keeps it forever. */
  readonly retentionMs: number | null;
}

export interface Settings {
  readonly host: string;
  readonly port: number;
  /**
   * Processes serving the port (src/cluster/): 1 is one process and no cluster at all; more only
   * on PostgreSQL, the one store whose replay ledger and rate budgets processes share.
   */
  readonly workers: number;
  /**
   * The internal listener (/metrics, /healthz, /readyz, /admin/), when configured: operators'
   * endpoints off the public port (issue 12).
   */
  readonly internal?: { readonly host: string; readonly port: number };
  /** Explicit issuer; when absent it follows the address the server actually listens on. */
  readonly issuer?: string;
  readonly maxBodyBytes: number;
  /** Load balancers whose Forwarded / X-Forwarded-For are believed (validated CIDRs). */
  readonly trustedProxies: readonly string[];
  /**
   * The header (lower case) the proxy's request id travels in, to the agent and the upstream; an
   * operation's own header parameter of that name stays the agent's (issue 10, class 15).
   */
  readonly requestIdHeader: string;
  readonly connections: ConnectionSettings;
  readonly providerName?: string;
  readonly providerDescription?: string;
  readonly allowRemoteRefs: boolean;
  readonly allowHttpSpecs: boolean;
  readonly specMaxBytes: number;
  readonly specTimeoutMs: number;
  readonly apis: readonly ApiSettings[];
  readonly mockUpstream: boolean;
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;
  /** The SQLite file, or the PostgreSQL URL (issue 13). */
  readonly database: DatabaseSettings;
  /** Policy YAML (absolute path); absent: the built-in default policy. */
  readonly policyFile?: string;
  /** Enables the operator API. Never logged. */
  readonly adminToken?: string;
  /** Accepted by `POST /agent/introspect` besides the admin token. Never logged. */
  readonly introspectionToken?: string;
  readonly execution: ExecutionSettings;
  readonly audit: AuditSettings;
  /** Who may approve on the pages (issue 11); see src/config/sign-in.ts. */
  readonly signIn: SignInSettings;
  /** Who hears of new approval requests (§7.2); see src/config/notifications.ts. */
  readonly notifications: NotificationSettings;
  /** Fetching keys from JWKS URLs (§8.12); see src/config/jwks.ts. */
  readonly jwks: JwksSettings;
}

/** What the CLI parsed; every field optional so config-file values show through. */
export interface CliOverrides {
  readonly config?: string;
  readonly specs?: readonly string[];
  readonly upstreams?: readonly string[];
  readonly host?: string;
  readonly port?: number;
  readonly workers?: number;
  readonly internalPort?: number;
  readonly issuer?: string;
  readonly mockUpstream?: boolean;
  readonly allowRemoteRefs?: boolean;
  readonly allowHttpSpecs?: boolean;
  readonly logLevel?: LogLevel;
  readonly logFormat?: LogFormat;
  readonly db?: string;
  readonly policy?: string;
  readonly adminToken?: string;
  readonly adminTokenFile?: string;
  readonly introspectionToken?: string;
  readonly introspectionTokenFile?: string;
  /** `Name: value` headers for the --spec APIs. */
  readonly upstreamHeaders?: readonly string[];
  /** e.g. `10s`, for the --spec APIs. */
  readonly upstreamTimeout?: string;
}

/** Where secrets may also come from, so they stay out of argv and config files. */
export const ENV = {
  adminToken: 'AGENT_AUTH_PROXY_ADMIN_TOKEN',
  introspectionToken: 'AGENT_AUTH_PROXY_INTROSPECTION_TOKEN',
} as const;

const MIN_SECRET_LENGTH = 16;

/**
 * The shortest service credential or secret header the proxy accepts. Each is redacted from
 * upstream answers; a shorter one would match ordinary text, so it is refused at start-up rather
 * than silently left unredacted (issue 10, class 12).
 */
export const MIN_SERVICE_SECRET_LENGTH = 8;

type ApiConfig = FileConfig['apis'][number];
type DurationConfig = FileConfig['execution']['timeout'];

const validateConfig = lazyConfigSchema(CONFIG_SCHEMA);

/** No config file: `{}` with the schema's defaults, as parseConfig('{}') gives, without compiling it. */
export function defaultConfig(): FileConfig {
  return schemaDefaults(CONFIG_SCHEMA) as FileConfig;
}

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
  validateOrThrow(validateConfig(), data, file);
  return data as FileConfig;
}

/** Listen addresses that mean every interface: no URL can be derived from them. */
const ALL_INTERFACES: ReadonlySet<string> = new Set(['0.0.0.0', '::', '[::]', '']);

/**
 * Only the database of a command line (`db` commands): --db, else the config's `database`, else
 * the default; the rest of the config is validated but no API is needed.
 */
export function resolveDatabaseOnly(
  cli: Pick<CliOverrides, 'db' | 'config'>,
  cwd = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): DatabaseSettings {
  const file = cli.config ? resolve(cwd, cli.config) : undefined;
  const config = file ? readConfigFile(file) : defaultConfig();
  return resolveDatabase({
    flag: cli.db,
    configured: config.database,
    postgres: config.postgres,
    base: file ? dirname(file) : cwd,
    cwd,
    env,
  });
}

/**
 * Only where a command line's proxy listens (the `health` command): --host/--port, else the
 * config's server.host/port, else the defaults; no API is needed.
 */
export function resolveListenAddress(
  cli: Pick<CliOverrides, 'config' | 'host' | 'port'>,
  cwd = process.cwd(),
): { host: string; port: number } {
  const config = cli.config ? readConfigFile(resolve(cwd, cli.config)) : defaultConfig();
  return { host: cli.host ?? config.server.host, port: cli.port ?? config.server.port };
}

export function resolveSettings(
  cli: CliOverrides,
  cwd = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): Settings {
  const file = cli.config ? resolve(cwd, cli.config) : undefined;
  const config = file ? readConfigFile(file) : defaultConfig();
  const base = file ? dirname(file) : cwd;
  const location = (spec: string, from: string): string =>
    /^https?:\/\//i.test(spec) ? spec : resolve(from, spec);

  const where = file ?? '(defaults)';
  const defaults: UpstreamLimits = {
    timeoutMs: duration(config.execution.timeout, `${where}: execution.timeout`),
    retries: config.execution.retries,
    retryBackoffMs: duration(config.execution.retry_backoff, `${where}: execution.retry_backoff`),
    maxResponseBytes: config.execution.max_response_bytes,
  };
  const requestIdHeader = config.server.request_id_header.toLowerCase();
  if (PROXY_OWNED_HEADERS.has(requestIdHeader)) {
    throw new UserError(
      `${where}: server.request_id_header: ${config.server.request_id_header} is a header the proxy sets for another purpose`,
    );
  }
  const apis: ApiSettings[] = config.apis.map((api, i) => {
    return {
      ...(api.id !== undefined ? { id: api.id } : {}),
      ...(api.upstream !== undefined ? { upstream: api.upstream } : {}),
      ...(api.prefix !== undefined ? { prefix: api.prefix } : {}),
      ...(api.include !== undefined ? { include: api.include } : {}),
      ...(api.exclude !== undefined ? { exclude: api.exclude } : {}),
      spec: location(api.spec, base),
      execution: apiExecution(api, `${where}: apis[${i}]`, defaults, base, env),
    };
  });
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
  const cliExecution = apiExecution(
    {
      spec: '',
      ...(cli.upstreamTimeout !== undefined ? { timeout: cli.upstreamTimeout } : {}),
      headers: parseHeaderFlags(cli.upstreamHeaders ?? []),
    },
    '--upstream-timeout/--upstream-header',
    defaults,
    cwd,
    env,
  );
  cliSpecs.forEach((spec, i) => {
    const upstream = upstreams.length === 1 ? upstreams[0] : upstreams[i];
    apis.push({ spec: location(spec, cwd), ...(upstream ? { upstream } : {}), execution: cliExecution });
  });
  if (cliSpecs.length === 0 && (cli.upstreamHeaders?.length || cli.upstreamTimeout !== undefined)) {
    throw new UserError(
      '--upstream-header and --upstream-timeout apply to --spec APIs; set `headers` and `timeout` per API in the config file instead',
    );
  }
  if (apis.length === 0) {
    throw new UserError('no API to serve: pass --spec FILE|URL, or --config FILE with an `apis` list');
  }
  apis.forEach((api, i) => {
    const identity = Object.values(api.execution.identityHeaders ?? {});
    for (const name of [...Object.keys(api.execution.headers), ...identity]) {
      if (name.toLowerCase() === requestIdHeader) {
        throw new UserError(
          `${where}: apis[${i}]: header ${name} is server.request_id_header, where the proxy sends its request id`,
        );
      }
    }
  });

  const port = cli.port ?? config.server.port;
  const internalPort = cli.internalPort ?? config.server.internal_port;
  const issuer = cli.issuer ?? config.server.issuer;
  if (issuer !== undefined && !/^https?:\/\/[^/\s?#]+(\/[^\s?#]*)?$/i.test(issuer)) {
    throw new UserError(
      `--issuer ${JSON.stringify(issuer)}: must be an http(s) URL without query or fragment`,
    );
  }
  const host = cli.host ?? config.server.host;
  if (issuer === undefined && ALL_INTERFACES.has(host)) {
    // Every advertised URL (discovery, verification_uri, status_url) derives from the issuer, and
    // http://0.0.0.0:8080 reaches nobody: refuse rather than advertise it.
    throw new UserError(
      `server.host ${host} listens on every interface, so the URL agents reach the proxy at cannot be derived: set --issuer (server.issuer), e.g. --issuer https://agents.example.com`,
    );
  }
  const database = resolveDatabase({
    flag: cli.db,
    configured: config.database,
    postgres: config.postgres,
    base,
    cwd,
    env,
  });
  const workers = cli.workers ?? config.server.workers;
  if (workers > 1 && database.kind !== 'postgres') {
    // Each process would keep its own replay cache and rate buckets: a jti accepted by one worker
    // would be accepted again by another (§4.6), and every budget would be multiplied.
    const from = cli.workers !== undefined ? '--workers' : `${where}: server.workers:`;
    throw new UserError(
      `${from} ${workers} needs a shared store: replay and rate state live in one process with SQLite; use --db postgres://… (or database: in the config)`,
    );
  }
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
    host,
    port,
    workers,
    ...(internalPort !== undefined
      ? { internal: Object.freeze({ host: config.server.internal_host, port: internalPort }) }
      : {}),
    ...(issuer !== undefined ? { issuer: issuer.replace(/\/+$/, '') } : {}),
    maxBodyBytes: config.server.max_body_bytes,
    trustedProxies: Object.freeze(trustedProxies(config.server.trusted_proxies, where)),
    requestIdHeader,
    connections: Object.freeze({
      maxConnections: config.server.max_connections,
      maxConnectionsPerIp: config.server.max_connections_per_ip,
      headersTimeoutMs: duration(config.server.headers_timeout, `${where}: server.headers_timeout`),
      requestTimeoutMs: duration(config.server.request_timeout, `${where}: server.request_timeout`),
      keepAliveTimeoutMs: duration(config.server.keep_alive_timeout, `${where}: server.keep_alive_timeout`),
      maxHeaderBytes: config.server.max_header_bytes,
      shutdownGraceMs: duration(config.server.shutdown_grace, `${where}: server.shutdown_grace`),
    }),
    ...(providerName !== undefined ? { providerName } : {}),
    ...(providerDescription !== undefined ? { providerDescription } : {}),
    allowRemoteRefs: cli.allowRemoteRefs ?? config.specs.allow_remote_refs,
    allowHttpSpecs: cli.allowHttpSpecs ?? config.specs.allow_http,
    specMaxBytes: config.specs.max_bytes,
    specTimeoutMs: config.specs.timeout_ms,
    apis: Object.freeze(apis.map((a) => Object.freeze(a))),
    mockUpstream: cli.mockUpstream ?? config.mock_upstream,
    logLevel: cli.logLevel ?? config.log_level,
    logFormat: cli.logFormat ?? config.log_format,
    database,
    ...(policyFile !== undefined ? { policyFile } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(introspectionToken !== undefined ? { introspectionToken } : {}),
    execution: Object.freeze({
      streamMaxDurationMs: duration(
        config.execution.stream_max_duration,
        `${where}: execution.stream_max_duration`,
      ),
      streamRevocationCheckMs: revocationCheck(config.execution.stream_revocation_check, where),
      asyncJobTtlMs: duration(config.execution.async_job_ttl, `${where}: execution.async_job_ttl`),
    }),
    audit: Object.freeze({
      commitWindowMs: commitWindow(config.audit.commit_window, where),
      maxBatch: config.audit.commit_max_records,
      retentionMs:
        config.audit.retention === null
          ? null
          : duration(config.audit.retention, `${where}: audit.retention`),
    }),
    signIn: resolveSignIn(config.sign_in, where, (value, at) => resolveSecret(value, at, base, env)),
    notifications: resolveNotifications(config.notifications, where, (value, at) =>
      resolveSecret(value, at, base, env),
    ),
    jwks: resolveJwks(config.jwks, where, base),
  });
}

/** Each entry an IP address or CIDR range; the first bad one stops start-up, named. */
function trustedProxies(entries: readonly string[], where: string): string[] {
  entries.forEach((entry, i) => {
    try {
      parseCidr(entry);
    } catch (err) {
      throw new UserError(`${where}: server.trusted_proxies[${i}]: ${(err as Error).message}`);
    }
  });
  return [...entries];
}

/** Tens of milliseconds is the point (issue 10 class 14); a second is the most a crash may lose. */
function commitWindow(value: string, where: string): number {
  const ms = duration(value, `${where}: audit.commit_window`);
  if (ms < 1 || ms > 1_000) {
    throw new UserError(
      `${where}: audit.commit_window must be between 1ms and 1s (got ${JSON.stringify(value)})`,
    );
  }
  return ms;
}

/** §5.11: a long stream MUST re-check revocation periodically; this proxy allows at most 60 s. */
function revocationCheck(value: DurationConfig, where: string): number {
  const ms = duration(value, `${where}: execution.stream_revocation_check`);
  if (ms < 10 || ms > 60_000) {
    throw new UserError(`${where}: execution.stream_revocation_check must be between 10ms and 60s (§5.11)`);
  }
  return ms;
}

function duration(value: DurationConfig, where: string): number {
  return parseDuration(value, where, { allowMs: true });
}

/** Framing and hop-by-hop headers (RFC 9110 §7.6.1): the HTTP client owns them. */
const FORBIDDEN_STATIC_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'keep-alive',
  'proxy-connection',
  'expect',
]);

/** Headers the proxy sends with their own meaning; the request id cannot travel in one of them. */
const PROXY_OWNED_HEADERS = new Set([
  ...FORBIDDEN_STATIC_HEADERS,
  'authorization',
  'proxy-authorization',
  'cookie',
  'content-type',
  'accept',
  'traceparent',
  'tracestate',
]);

const DEFAULT_IDENTITY_HEADERS = { agent: 'X-Agent-Id', host: 'X-Agent-Host-Id', user: 'X-Agent-User-Id' };

function apiExecution(
  api: ApiConfig,
  where: string,
  defaults: UpstreamLimits,
  base: string,
  env: Readonly<Record<string, string | undefined>>,
): ApiExecutionSettings {
  const read = (value: SecretConfig, at: string, secret = false): string => {
    const v = resolveSecret(value, at, base, env);
    // A value read from a file or variable could carry a line break: it must not split a header.
    // eslint-disable-next-line no-control-regex -- control characters are exactly what must not pass
    if (/[\0-\x08\x0a-\x1f\x7f]/.test(v)) throw new UserError(`${at}: the value contains control characters`);
    if (secret && v.length < MIN_SERVICE_SECRET_LENGTH) {
      throw new UserError(
        `${at}: the secret is ${v.length} characters long; service secrets need at least ` +
          `${MIN_SERVICE_SECRET_LENGTH}, or they could not be redacted from upstream answers without ` +
          `rewriting ordinary text`,
      );
    }
    return v;
  };
  const credentials: Record<string, ServiceCredential> = {};
  for (const [scheme, c] of Object.entries(api.credentials ?? {})) {
    const at = `${where}.credentials.${scheme}`;
    if (typeof c === 'object' && 'username' in c) {
      credentials[scheme] = {
        kind: 'basic',
        username: read(c.username, `${at}.username`),
        password: read(c.password, `${at}.password`, true),
      };
    } else if (typeof c === 'object' && 'client_id' in c) {
      credentials[scheme] = {
        kind: 'oauth2',
        clientId: read(c.client_id, `${at}.client_id`),
        clientSecret: read(c.client_secret, `${at}.client_secret`, true),
        ...(c.token_url !== undefined ? { tokenUrl: c.token_url } : {}),
        scopes: c.scopes ?? [],
        ...(c.audience !== undefined ? { audience: c.audience } : {}),
      };
    } else {
      credentials[scheme] = { kind: 'secret', value: read(c, at, true) };
    }
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(api.headers ?? {})) {
    if (FORBIDDEN_STATIC_HEADERS.has(name.toLowerCase())) {
      throw new UserError(
        `${where}.headers.${name}: this header is set by the proxy's HTTP client and cannot be configured`,
      );
    }
    // A value from env, file or `{value}` is a secret; an inline string is one only when long
    // enough to redact (redaction.ts), so `X-Tenant: acme` stays plain configuration.
    headers[name] = read(value, `${where}.headers.${name}`, typeof value === 'object');
  }
  const operations: Record<string, { timeoutMs?: number; pin: Record<string, PinnedValue> }> = {};
  for (const [name, op] of Object.entries(api.operations ?? {})) {
    operations[name] = {
      ...(op.timeout !== undefined
        ? { timeoutMs: duration(op.timeout, `${where}.operations.${name}.timeout`) }
        : {}),
      pin: op.pin ?? {},
    };
  }
  const identity = api.identity_headers;
  return Object.freeze({
    timeoutMs: api.timeout !== undefined ? duration(api.timeout, `${where}.timeout`) : defaults.timeoutMs,
    retries: api.retries ?? defaults.retries,
    retryBackoffMs:
      api.retry_backoff !== undefined
        ? duration(api.retry_backoff, `${where}.retry_backoff`)
        : defaults.retryBackoffMs,
    maxResponseBytes: api.max_response_bytes ?? defaults.maxResponseBytes,
    serverVariables: api.server_variables ?? {},
    credentials,
    headers,
    ...(identity === true ? { identityHeaders: DEFAULT_IDENTITY_HEADERS } : {}),
    ...(typeof identity === 'object' ? { identityHeaders: identity } : {}),
    operations,
  });
}

function resolveSecret(
  value: SecretConfig,
  where: string,
  base: string,
  env: Readonly<Record<string, string | undefined>>,
): string {
  if (typeof value === 'string') return value;
  if (value.value !== undefined) return value.value;
  if (value.env !== undefined) {
    const v = env[value.env];
    if (v === undefined || v === '')
      throw new UserError(`${where}: environment variable ${value.env} is not set`);
    return v;
  }
  if (value.file !== undefined) return readSecretFile(resolve(base, value.file), where);
  throw new UserError(`${where}: expected env, file or value`);
}

/** `--upstream-header "Name: value"` → {Name: value}. */
function parseHeaderFlags(flags: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const flag of flags) {
    const colon = flag.indexOf(':');
    const name = colon > 0 ? flag.slice(0, colon).trim() : '';
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      throw new UserError('--upstream-header: expected "Name: value" with a valid header name');
    }
    headers[name] = flag.slice(colon + 1).trim();
  }
  return headers;
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
