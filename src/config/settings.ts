/**
 * Settings: the config file (validated against CONFIG_SCHEMA, defaults filled in) overlaid with
 * CLI flags, checked once and frozen. Everything downstream reads this object, never argv or YAML.
 * The file itself is read by config-file.ts; the APIs and how they are called are
 * api-execution.ts; secrets and the operator's tokens are secrets.ts.
 */
import { dirname, resolve } from 'node:path';
import { UserError } from '../errors.js';
import { shownUrl } from '../util/shown-url.js';
import { resolveDatabase, type DatabaseSettings } from './database.js';
import type { LogFormat, LogLevel } from '../log-levels.js';
import { formatDuration, parseConfigDuration as duration, parseTimerDuration } from './durations.js';
import { parseCidr } from './cidr.js';
import { requestIdHeaderOf, resolveApis, type ApiFlags, type ApiSettings } from './api-execution.js';
import type { FileConfig } from './schema.js';
import { configOf } from './config-file.js';
import { operatorTokens, resolveSecret } from './secrets.js';
import { resolveSignIn, type SignInSettings } from './sign-in.js';
import { resolveJwks, type JwksSettings } from './jwks.js';
import { resolveNotifications, type NotificationSettings } from './notifications.js';

/** Bounds on what one client can hold open; documented in README "Bounds". */
/** Where trusted proxies write the client address (server.forwarded_header). */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded';

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
  /** The header trusted proxies write the client address into; the other is never read. */
  readonly forwardedHeader: ForwardedHeader;
  /**
   * The header (lower case) the proxy's request id travels in, to the agent and the upstream; an
   * operation's own header parameter of that name stays the agent's (issue 10, class 15).
   */
  readonly requestIdHeader: string;
  readonly connections: ConnectionSettings;
  readonly providerName?: string;
  readonly providerDescription?: string;
  readonly allowRemoteRefs: boolean;
  /** A local document's `$ref`s may read files outside its own directory. */
  readonly allowLocalRefsAnywhere: boolean;
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
/** The command line's flags: `--spec`, `--upstream` and their options (ApiFlags), and the rest. */
export interface CliOverrides extends ApiFlags {
  readonly config?: string;
  readonly host?: string;
  readonly port?: number;
  readonly workers?: number;
  readonly internalPort?: number;
  readonly issuer?: string;
  readonly mockUpstream?: boolean;
  readonly allowRemoteRefs?: boolean;
  readonly allowLocalRefsAnywhere?: boolean;
  readonly allowHttpSpecs?: boolean;
  readonly logLevel?: LogLevel;
  readonly logFormat?: LogFormat;
  readonly db?: string;
  readonly policy?: string;
  readonly adminToken?: string;
  readonly adminTokenFile?: string;
  readonly introspectionToken?: string;
  readonly introspectionTokenFile?: string;
}

type DurationConfig = FileConfig['execution']['timeout'];

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
  const config = configOf(file);
  return resolveDatabase({
    flag: cli.db,
    configured: config.database,
    postgres: config.postgres,
    base: file ? dirname(file) : cwd,
    cwd,
    env,
  });
}

export function resolveSettings(
  cli: CliOverrides,
  cwd = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): Settings {
  const file = cli.config ? resolve(cwd, cli.config) : undefined;
  const config = configOf(file);
  const base = file ? dirname(file) : cwd;
  const where = file ?? '(defaults)';
  const requestIdHeader = requestIdHeaderOf(config, where);
  const apis = resolveApis({ config, cli, where, base, cwd, env, requestIdHeader });

  const port = cli.port ?? config.server.port;
  const internalPort = cli.internalPort ?? config.server.internal_port;
  if (internalPort !== undefined && internalPort !== 0 && internalPort === port) {
    throw new UserError(
      `${cli.internalPort !== undefined ? '--internal-port' : `${where}: server.internal_port`} ${internalPort}: is the public port too; the internal listener needs a port of its own`,
    );
  }
  const issuer = cli.issuer ?? config.server.issuer;
  if (issuer !== undefined)
    checkIssuer(issuer, cli.issuer !== undefined ? '--issuer' : `${where}: server.issuer`);
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
  const { adminToken, introspectionToken } = operatorTokens({ cli, config, cwd, base, env });
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
    forwardedHeader: config.server.forwarded_header,
    requestIdHeader,
    connections: connectionSettings(config.server, where),
    ...(providerName !== undefined ? { providerName } : {}),
    ...(providerDescription !== undefined ? { providerDescription } : {}),
    allowRemoteRefs: cli.allowRemoteRefs ?? config.specs.allow_remote_refs,
    allowLocalRefsAnywhere: cli.allowLocalRefsAnywhere ?? config.specs.allow_local_refs_anywhere,
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
      streamMaxDurationMs: parseTimerDuration(
        config.execution.stream_max_duration,
        `${where}: execution.stream_max_duration`,
        1,
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

/**
 * The listener's connection bounds. Each timeout becomes a timer (durations.ts MAX_TIMER_MS); a
 * zero headers timeout would close every connection at once, and Node refuses a headers timeout
 * longer than a request timeout (0 disables the latter) at start-up, which `check` must catch.
 */
function connectionSettings(server: FileConfig['server'], where: string): Settings['connections'] {
  const timer = (
    key: 'headers_timeout' | 'request_timeout' | 'keep_alive_timeout' | 'shutdown_grace',
    min: number,
  ) => parseTimerDuration(server[key], `${where}: server.${key}`, min);
  const headersTimeoutMs = timer('headers_timeout', 1);
  const requestTimeoutMs = timer('request_timeout', 0);
  if (requestTimeoutMs > 0 && headersTimeoutMs > requestTimeoutMs) {
    throw new UserError(
      `${where}: server.headers_timeout (${formatDuration(headersTimeoutMs)}) must not be longer than server.request_timeout (${formatDuration(requestTimeoutMs)})`,
    );
  }
  return Object.freeze({
    maxConnections: server.max_connections,
    maxConnectionsPerIp: server.max_connections_per_ip,
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: timer('keep_alive_timeout', 0),
    maxHeaderBytes: server.max_header_bytes,
    shutdownGraceMs: timer('shutdown_grace', 0),
  });
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

/**
 * The issuer is advertised in discovery and every URL derived from it (§5.1), so it carries no
 * user info (a `user:password@` would be published to every agent) and is not quoted when it does.
 */
function checkIssuer(issuer: string, at: string): void {
  const url = URL.parse(issuer);
  if (url !== null && (url.username !== '' || url.password !== '')) {
    throw new UserError(`${at}: must not carry user info (user:password@): it is published in discovery`);
  }
  if (!/^https?:\/\/[^/\s?#]+(\/[^\s?#]*)?$/i.test(issuer)) {
    throw new UserError(
      `${at} ${JSON.stringify(shownUrl(issuer))}: must be an http(s) URL without query or fragment`,
    );
  }
}
