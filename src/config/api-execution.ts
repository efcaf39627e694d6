/**
 * The APIs a proxy serves, from the config's `apis` list and the `--spec`/`--upstream` flags: where
 * each document is, and how its operations are called (timeouts, retries, credentials, static and
 * identity headers, per-operation settings), secrets resolved and checked.
 */
import { resolve } from 'node:path';
import { UserError } from '../errors.js';
import { shownUrl } from '../util/shown-url.js';
import type { OperationSelector } from '../openapi/selectors.js';
import { parseTimerDuration } from './durations.js';
import type { FileConfig, SecretConfig } from './schema.js';
import { resolveSecret, type Env } from './secrets.js';

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

/**
 * The shortest service credential or secret header the proxy accepts. Each is redacted from
 * upstream answers; a shorter one would match ordinary text, so it is refused at start-up rather
 * than silently left unredacted (issue 10, class 12).
 */
export const MIN_SERVICE_SECRET_LENGTH = 8;

type ApiConfig = FileConfig['apis'][number];

/** The `--spec` flags and what applies to them. */
export interface ApiFlags {
  readonly specs?: readonly string[];
  readonly upstreams?: readonly string[];
  /** e.g. `10s`, for the --spec APIs. */
  readonly upstreamTimeout?: string;
  /** `Name: value` headers for the --spec APIs. */
  readonly upstreamHeaders?: readonly string[];
}

/** `server.request_id_header`, lower-cased; refused when the proxy sends that header for another purpose. */
export function requestIdHeaderOf(config: FileConfig, where: string): string {
  const requestIdHeader = config.server.request_id_header.toLowerCase();
  if (PROXY_OWNED_HEADERS.has(requestIdHeader)) {
    throw new UserError(
      `${where}: server.request_id_header: ${config.server.request_id_header} is a header the proxy sets for another purpose`,
    );
  }
  return requestIdHeader;
}

/** The config's APIs, then one per `--spec`; at least one. */
export function resolveApis(from: {
  readonly config: FileConfig;
  readonly cli: ApiFlags;
  /** The config file (or "(defaults)"), for messages. */
  readonly where: string;
  /** The config file's directory: its relative paths start there. */
  readonly base: string;
  readonly cwd: string;
  readonly env: Env;
  readonly requestIdHeader: string;
}): ApiSettings[] {
  const { config, cli, where, base, cwd, env, requestIdHeader } = from;
  const location = (spec: string, dir: string): string =>
    /^https?:\/\//i.test(spec) ? spec : resolve(dir, spec);
  const defaults: UpstreamLimits = {
    timeoutMs: parseTimerDuration(config.execution.timeout, `${where}: execution.timeout`, 1),
    retries: config.execution.retries,
    retryBackoffMs: parseTimerDuration(
      config.execution.retry_backoff,
      `${where}: execution.retry_backoff`,
      0,
    ),
    maxResponseBytes: config.execution.max_response_bytes,
  };
  const apis: ApiSettings[] = config.apis.map((api, i) => {
    if (api.upstream !== undefined) refuseUrlSecrets(api.upstream, `${where}: apis[${i}].upstream`);
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
    // Checked first, so that the message below never quotes a secret.
    refuseUrlSecrets(u, '--upstream');
    if (!/^https?:\/\/\S+$/i.test(u))
      throw new UserError(`--upstream ${JSON.stringify(shownUrl(u))}: must be an http(s) URL`);
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
  return apis;
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
  env: Env,
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
        ? { timeoutMs: parseTimerDuration(op.timeout, `${where}.operations.${name}.timeout`, 1) }
        : {}),
      pin: op.pin ?? {},
    };
  }
  const identity = api.identity_headers;
  return Object.freeze({
    timeoutMs:
      api.timeout !== undefined ? parseTimerDuration(api.timeout, `${where}.timeout`, 1) : defaults.timeoutMs,
    retries: api.retries ?? defaults.retries,
    retryBackoffMs:
      api.retry_backoff !== undefined
        ? parseTimerDuration(api.retry_backoff, `${where}.retry_backoff`, 0)
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

/**
 * An upstream URL carries no user info, query or fragment: the proxy would never send them (a
 * request goes to the origin, the base path and the operation's path), and the URL is logged at
 * start-up. Credentials belong under `credentials` or `headers`, which are secrets. The message
 * does not quote the URL.
 */
function refuseUrlSecrets(upstream: string, at: string): void {
  const url = URL.parse(upstream);
  if (url === null) return;
  if (url.username !== '' || url.password !== '') {
    throw new UserError(
      `${at}: must not carry user info (user:password@), which would never be sent; give the credential under \`credentials\` (http basic) or \`headers\``,
    );
  }
  if (url.search !== '' || url.hash !== '' || upstream.includes('?') || upstream.includes('#')) {
    throw new UserError(
      `${at}: must not carry a query or fragment (?… or #…), which would never be sent; give an API key under \`credentials\` (an apiKey scheme in the query) or \`headers\``,
    );
  }
}
