/**
 * The operator's policy (`--policy FILE`): parsed from YAML, validated against POLICY_SCHEMA
 * (defaults filled in), then resolved against the capability catalog into the model the protocol
 * layer reads. Globs and selectors become sets of concrete capability names, durations become
 * milliseconds, rate limits become count + window. Every problem is reported at once, as one
 * UserError whose lines name the file, the key path and what was expected.
 *
 * Precedence, applied here so that consumers never have to: `blocked` and `high_risk` win over
 * every "granted without asking" list. A capability that is high-risk or blocked is removed from
 * `defaults`, `autonomous.grants` and each host's `default_capabilities`; a blocked one is also
 * removed from `public`.
 */
import { readFileSync } from 'node:fs';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { parseDocument } from 'yaml';
import { compileConfigSchema, keyPath, validateOrThrow } from '../config/validate.js';
import { UserError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import { globToRegExp, matchesSelector, type OperationSelector } from '../openapi/selectors.js';
import type { Capability } from '../openapi/types.js';
import { parseConstraints, type Constraints } from '../protocol/constraints.js';
import { parseDuration } from '../protocol/durations.js';
import { parsePublicJwk } from '../protocol/keys.js';
import { POLICY_SCHEMA } from './schema.js';

export interface RateLimitSpec {
  readonly count: number;
  readonly windowMs: number;
}

export interface PreRegisteredHost {
  readonly name?: string;
  readonly publicJwk: { kty: 'OKP'; crv: 'Ed25519'; x: string };
  readonly userId?: string;
  readonly defaultCapabilities: readonly string[];
}

export type AgentModeName = 'delegated' | 'autonomous';
export type ApprovalMethodName = 'device_authorization' | 'ciba';

export interface Policy {
  readonly modes: readonly AgentModeName[];
  readonly approval: {
    readonly methods: readonly ApprovalMethodName[];
    readonly expiresInMs: number;
    readonly intervalMs: number;
    readonly approvers: readonly string[];
    /** §7.1 verification URI; null: the proxy's own `/device` page. */
    readonly verificationUri: string | null;
  };
  readonly lifetimes: {
    /** Sliding, from the last request (§2.4); null: disabled. */
    readonly sessionTtlMs: number | null;
    /** From the last activation; null: disabled. */
    readonly maxLifetimeMs: number | null;
    /** From creation, then revoked; null: disabled. */
    readonly absoluteLifetimeMs: number | null;
    readonly maxJwtLifetimeSec: number;
    readonly clockSkewSec: number;
    readonly pendingCleanupMs: number;
  };
  /** Resolved against the catalog: sets of concrete capability names. */
  readonly defaults: ReadonlySet<string>;
  readonly highRisk: ReadonlySet<string>;
  readonly blocked: ReadonlySet<string>;
  readonly public: ReadonlySet<string>;
  /** Server-imposed constraints (§2.13) by capability name, validated against its input fields. */
  readonly constraints: ReadonlyMap<string, Constraints>;
  readonly autonomousGrants: ReadonlySet<string>;
  readonly hosts: readonly PreRegisteredHost[];
  readonly rateLimits: {
    readonly perAgent: RateLimitSpec | null;
    readonly perHost: RateLimitSpec | null;
    readonly perUser: RateLimitSpec | null;
    readonly perIp: RateLimitSpec | null;
    readonly unknownHostRegistration: RateLimitSpec | null;
    readonly perCapability: ReadonlyMap<string, RateLimitSpec>;
  };
  /** What one capabilities list may ask the proxy to store (§5.3, §5.4). */
  readonly capabilityRequests: {
    readonly maxEntries: number;
    readonly maxConstraintBytes: number;
    readonly maxConstraintDepth: number;
  };
  /** Bounds on what hosts nobody approved yet can make the proxy store (§2.11). */
  readonly pendingHosts: {
    readonly maxHosts: number;
    readonly maxAgents: number;
    readonly maxOpenApprovals: number;
  };
  /** The jti replay cache's memory bounds (§4.6). */
  readonly replay: {
    readonly maxEntries: number;
    readonly maxEntriesPerIdentity: number;
  };
  readonly audit: { readonly logArguments: boolean };
}

/** §8.2: servers SHOULD NOT tolerate more than 30 seconds of clock skew. */
export const MAX_CLOCK_SKEW_MS = 30_000;

// ---------------------------------------------------------------------------------------------
// The file as the schema leaves it (defaults filled in).

type Duration = string | number;
type CapabilityListItem = string | OperationSelector;

interface PolicyFile {
  modes: AgentModeName[];
  approval: {
    methods: ApprovalMethodName[];
    expires_in: Duration;
    interval: Duration;
    approvers: string[];
    verification_uri: string | null;
  };
  lifetimes: {
    session_ttl: Duration | null;
    max_lifetime: Duration | null;
    absolute_lifetime: Duration | null;
    max_jwt_lifetime: Duration;
    clock_skew: Duration;
    pending_cleanup: Duration;
  };
  capabilities: {
    defaults: CapabilityListItem[];
    high_risk: CapabilityListItem[];
    blocked: CapabilityListItem[];
    public: CapabilityListItem[];
    constraints: Record<string, unknown>;
  };
  autonomous: { grants: CapabilityListItem[] };
  hosts: {
    name?: string;
    public_key: Record<string, unknown>;
    user_id?: string;
    default_capabilities: CapabilityListItem[];
  }[];
  rate_limits: {
    per_agent: string | null;
    per_host: string | null;
    per_user: string | null;
    per_ip: string | null;
    unknown_host_registration: string | null;
    per_capability: Record<string, string | null>;
  };
  capability_requests: {
    max_entries: number;
    max_constraint_bytes: number;
    max_constraint_depth: number;
  };
  pending_hosts: { max_hosts: number; max_agents: number; max_open_approvals: number };
  replay: { max_entries: number; max_entries_per_identity: number };
  audit: { log_arguments: boolean };
}

// ---------------------------------------------------------------------------------------------
// Loading

const validatePolicySchema = compileConfigSchema(POLICY_SCHEMA);

export function loadPolicyFile(file: string, catalog: Catalog): Policy {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UserError(`${file}: policy file not found or not readable`);
  }
  return parsePolicy(text, file, catalog);
}

/** Parses + validates YAML text (file is for messages) and resolves it against the catalog. */
export function parsePolicy(text: string, file: string, catalog: Catalog): Policy {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new UserError(doc.errors.map((e) => `${file}: ${e.message.split('\n')[0] ?? ''}`).join('\n'));
  }
  let data: unknown;
  try {
    data = doc.toJS() ?? {};
  } catch (err) {
    // e.g. an alias bomb: the yaml library refuses to expand too many aliases.
    throw new UserError(`${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  checkSchema(data, file);
  return resolvePolicy(data as PolicyFile, file, catalog);
}

/**
 * The policy used when no --policy is given: delegated mode; GET and HEAD operations are granted
 * by default, every other method is high-risk; nothing blocked; every capability public — any
 * self-signed host key may list them anyway (§5.2 host mode precedes registration), so hiding
 * them from anonymous callers would protect nothing; lifetimes, approval and rate limits as the
 * schema's defaults.
 */
export function defaultPolicy(catalog: Catalog): Policy {
  const base = parsePolicy('{}', '(default policy)', catalog);
  const safe = (c: Capability): boolean => c.operation.method === 'get' || c.operation.method === 'head';
  return Object.freeze({
    ...base,
    defaults: new Set(catalog.capabilities.filter(safe).map((c) => c.name)),
    highRisk: new Set(catalog.capabilities.filter((c) => !safe(c)).map((c) => c.name)),
    public: new Set(catalog.capabilities.map((c) => c.name)),
  });
}

// ---------------------------------------------------------------------------------------------
// Schema errors

const DURATION_EXPECTED =
  'must be a duration: a whole number with a unit s, m, h or d ("30s", "10m", "24h", "30d"), or a whole number of seconds';

/**
 * Errors that read better as one sentence than as ajv's per-branch complaints. Keyed by the
 * schema object (ajv reports it as `parentSchema`) and keyword; the anchor's sub-errors (its
 * `anyOf` branches, its `contains` item checks) are dropped.
 */
const EXPECTED: readonly (readonly [schema: object, keyword: string, message: string])[] = [
  [POLICY_SCHEMA.$defs.duration, 'anyOf', DURATION_EXPECTED],
  [POLICY_SCHEMA.$defs.optionalDuration, 'anyOf', `${DURATION_EXPECTED}, or null to disable`],
  [
    POLICY_SCHEMA.$defs.rateLimit,
    'anyOf',
    'must be a rate limit "COUNT/DURATION" with COUNT >= 1, e.g. "60/1m" or "5/1h", or null to disable',
  ],
  [
    POLICY_SCHEMA.$defs.capabilityList.items.then,
    'pattern',
    'must be a capability name or a glob over names: lowercase letters, digits, "_", and "*" or "?" as wildcards',
  ],
  [
    POLICY_SCHEMA.$defs.publicJwk.properties.x,
    'pattern',
    'must be the 32-byte Ed25519 public key in base64url without padding (43 characters)',
  ],
  [
    POLICY_SCHEMA.$defs.publicJwk.properties.d,
    'not',
    'is private key material: give only the public key (kty, crv, x); the server never holds private keys (§8.1)',
  ],
  [
    POLICY_SCHEMA.properties.approval.properties.methods,
    'contains',
    'must include "device_authorization": every server supports device authorization (§7.1)',
  ],
];

function checkSchema(data: unknown, file: string): void {
  if (validatePolicySchema(data)) return;
  const errors = validatePolicySchema.errors ?? [];
  const anchors = new Map<ErrorObject, string>();
  for (const e of errors) {
    const hit = EXPECTED.find(([schema, keyword]) => e.parentSchema === schema && e.keyword === keyword);
    if (hit) anchors.set(e, hit[2]);
  }
  const covered = (e: ErrorObject): boolean =>
    [...anchors.keys()].some((a) => a !== e && e.schemaPath.startsWith(`${a.schemaPath}/`));
  const lines: string[] = [];
  for (const e of errors) {
    const expected = anchors.get(e);
    if (expected !== undefined) {
      const got = e.data === undefined ? '' : ` (got ${JSON.stringify(e.data)})`;
      lines.push(`${file}: ${keyPath(e)}: ${expected}${got}`);
    } else if (!covered(e)) {
      lines.push(...describeErrors([e], data, file));
    }
  }
  throw new UserError([...new Set(lines)].join('\n'));
}

/** The config loader's wording for ordinary schema errors, replayed through validateOrThrow. */
function describeErrors(errors: ErrorObject[], data: unknown, file: string): string[] {
  const replay = Object.assign(() => false, { errors }) as unknown as ValidateFunction;
  try {
    validateOrThrow(replay, data, file);
  } catch (err) {
    if (err instanceof UserError) return err.message.split('\n').filter(Boolean);
    throw err;
  }
  return [];
}

// ---------------------------------------------------------------------------------------------
// Resolution against the catalog

function resolvePolicy(raw: PolicyFile, file: string, catalog: Catalog): Policy {
  const problems: string[] = [];
  const problem = (path: string, message: string): void => {
    problems.push(`${file}: ${path}: ${message}`);
  };

  const duration = (value: Duration, path: string, min: number): number => {
    let ms: number;
    try {
      ms = parseDuration(value, `${file}: ${path}`);
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      problems.push(err.message);
      // NaN fails every later comparison, so one bad value is reported once.
      return Number.NaN;
    }
    if (ms < min) problem(path, `must be at least ${describeMs(min)} (got ${JSON.stringify(value)})`);
    return ms;
  };
  const optionalDuration = (value: Duration | null, path: string): number | null =>
    value === null ? null : duration(value, path, 1000);

  // --- approval
  const { approval } = raw;
  const expiresInMs = duration(approval.expires_in, 'approval.expires_in', 1000);
  const intervalMs = duration(approval.interval, 'approval.interval', 1000);
  if (intervalMs > expiresInMs) {
    problem(
      'approval.interval',
      `must not exceed approval.expires_in (${JSON.stringify(approval.expires_in)})`,
    );
  }
  if (approval.verification_uri !== null && !isWebUrl(approval.verification_uri)) {
    problem(
      'approval.verification_uri',
      'must be an absolute http(s) URL without a fragment (users are sent there with ?code=…)',
    );
  }
  if (approval.methods.includes('ciba') && approval.approvers.length === 0) {
    problem(
      'approval.approvers',
      'must list at least one user when approval.methods includes "ciba" (CIBA is only chosen for a login_hint naming a listed approver)',
    );
  }

  // --- lifetimes
  const { lifetimes } = raw;
  const sessionTtlMs = optionalDuration(lifetimes.session_ttl, 'lifetimes.session_ttl');
  const maxLifetimeMs = optionalDuration(lifetimes.max_lifetime, 'lifetimes.max_lifetime');
  const absoluteLifetimeMs = optionalDuration(lifetimes.absolute_lifetime, 'lifetimes.absolute_lifetime');
  const maxJwtLifetimeMs = duration(lifetimes.max_jwt_lifetime, 'lifetimes.max_jwt_lifetime', 1000);
  const clockSkewMs = duration(lifetimes.clock_skew, 'lifetimes.clock_skew', 0);
  if (clockSkewMs > MAX_CLOCK_SKEW_MS) {
    problem(
      'lifetimes.clock_skew',
      `must be at most 30s: servers tolerate no more than 30 seconds of clock skew (§8.2) (got ${JSON.stringify(lifetimes.clock_skew)})`,
    );
  }
  const pendingCleanupMs = duration(lifetimes.pending_cleanup, 'lifetimes.pending_cleanup', 1000);
  if (pendingCleanupMs < expiresInMs) {
    problem(
      'lifetimes.pending_cleanup',
      `must be at least approval.expires_in (${JSON.stringify(approval.expires_in)}): pending agents would be deleted while their approval is still open`,
    );
  }

  // --- capability classes
  const list = (items: readonly CapabilityListItem[], path: string): Set<string> =>
    resolveCapabilityList(items, path, catalog, problem);
  const caps = raw.capabilities;
  const listedDefaults = list(caps.defaults, 'capabilities.defaults');
  const highRisk = list(caps.high_risk, 'capabilities.high_risk');
  const blocked = list(caps.blocked, 'capabilities.blocked');
  const neverByDefault = (names: Set<string>): Set<string> =>
    new Set([...names].filter((n) => !highRisk.has(n) && !blocked.has(n)));
  const defaults = neverByDefault(listedDefaults);
  const publicNames = new Set([...list(caps.public, 'capabilities.public')].filter((n) => !blocked.has(n)));

  const constraints = new Map<string, Constraints>();
  for (const [name, value] of Object.entries(caps.constraints)) {
    const path = `capabilities.constraints.${name}`;
    const capability = catalog.get(name);
    if (!capability) {
      problem(
        path,
        `${JSON.stringify(name)} is not a capability name (constraints take exact names, not globs)`,
      );
      continue;
    }
    const parsed = parseConstraints(value, inputFields(capability));
    if (!parsed.ok) {
      problem(path, parsed.problem.message);
      continue;
    }
    if (Object.keys(parsed.constraints).length > 0) constraints.set(name, Object.freeze(parsed.constraints));
  }

  const autonomousGrants = neverByDefault(list(raw.autonomous.grants, 'autonomous.grants'));

  // --- hosts
  const seenKeys = new Map<string, number>();
  const hosts: PreRegisteredHost[] = [];
  raw.hosts.forEach((h, i) => {
    const path = `hosts[${i}]`;
    const defaultCapabilities = neverByDefault(list(h.default_capabilities, `${path}.default_capabilities`));
    const jwk = parsePublicJwk(h.public_key);
    if (!jwk.ok) {
      problem(`${path}.public_key`, jwk.message);
      return;
    }
    const first = seenKeys.get(jwk.jwk.x);
    if (first !== undefined) {
      problem(
        `${path}.public_key`,
        `is the same key as hosts[${first}].public_key: each host needs its own key`,
      );
      return;
    }
    seenKeys.set(jwk.jwk.x, i);
    const publicJwk: PreRegisteredHost['publicJwk'] = Object.freeze({
      kty: 'OKP',
      crv: 'Ed25519',
      x: jwk.jwk.x,
    });
    hosts.push(
      Object.freeze({
        ...(h.name !== undefined ? { name: h.name } : {}),
        publicJwk,
        ...(h.user_id !== undefined ? { userId: h.user_id } : {}),
        defaultCapabilities: Object.freeze([...defaultCapabilities]),
      }),
    );
  });

  // --- rate limits
  const rl = raw.rate_limits;
  const rate = (value: string | null, path: string): RateLimitSpec | null =>
    value === null ? null : parseRateLimit(value, `${file}: ${path}`, problems);
  const perAgent = rate(rl.per_agent, 'rate_limits.per_agent');
  const perHost = rate(rl.per_host, 'rate_limits.per_host');
  const perUser = rate(rl.per_user, 'rate_limits.per_user');
  const perIp = rate(rl.per_ip, 'rate_limits.per_ip');
  const unknownHostRegistration = rate(rl.unknown_host_registration, 'rate_limits.unknown_host_registration');
  const perCapability = new Map<string, RateLimitSpec>();
  for (const [name, value] of Object.entries(rl.per_capability)) {
    const path = `rate_limits.per_capability.${name}`;
    if (!catalog.get(name)) {
      problem(
        path,
        `${JSON.stringify(name)} is not a capability name (per_capability takes exact names, not globs)`,
      );
      continue;
    }
    const spec = rate(value, path);
    if (spec) perCapability.set(name, spec);
  }
  const rateLimits = Object.freeze({
    perAgent,
    perHost,
    perUser,
    perIp,
    unknownHostRegistration,
    perCapability,
  });

  // --- bounds
  if (raw.replay.max_entries_per_identity > raw.replay.max_entries) {
    problem(
      'replay.max_entries_per_identity',
      `must not exceed replay.max_entries (${raw.replay.max_entries})`,
    );
  }

  if (problems.length > 0) throw new UserError([...new Set(problems)].join('\n'));

  return Object.freeze({
    modes: Object.freeze([...raw.modes]),
    approval: Object.freeze({
      methods: Object.freeze([...approval.methods]),
      expiresInMs,
      intervalMs,
      approvers: Object.freeze([...approval.approvers]),
      verificationUri: approval.verification_uri,
    }),
    lifetimes: Object.freeze({
      sessionTtlMs,
      maxLifetimeMs,
      absoluteLifetimeMs,
      maxJwtLifetimeSec: maxJwtLifetimeMs / 1000,
      clockSkewSec: clockSkewMs / 1000,
      pendingCleanupMs,
    }),
    defaults,
    highRisk,
    blocked,
    public: publicNames,
    constraints,
    autonomousGrants,
    hosts: Object.freeze(hosts),
    rateLimits,
    capabilityRequests: Object.freeze({
      maxEntries: raw.capability_requests.max_entries,
      maxConstraintBytes: raw.capability_requests.max_constraint_bytes,
      maxConstraintDepth: raw.capability_requests.max_constraint_depth,
    }),
    pendingHosts: Object.freeze({
      maxHosts: raw.pending_hosts.max_hosts,
      maxAgents: raw.pending_hosts.max_agents,
      maxOpenApprovals: raw.pending_hosts.max_open_approvals,
    }),
    replay: Object.freeze({
      maxEntries: raw.replay.max_entries,
      maxEntriesPerIdentity: raw.replay.max_entries_per_identity,
    }),
    audit: Object.freeze({ logArguments: raw.audit.log_arguments }),
  });
}

/**
 * The names a capability list stands for, in catalog (name) order. Every entry must match at
 * least one capability: a typo would otherwise silently grant, block or expose nothing.
 */
function resolveCapabilityList(
  items: readonly CapabilityListItem[],
  path: string,
  catalog: Catalog,
  problem: (path: string, message: string) => void,
): Set<string> {
  const matched = new Set<string>();
  items.forEach((item, i) => {
    const where = `${path}[${i}]`;
    let hits: Capability[];
    if (typeof item === 'string') {
      if (!/[*?]/.test(item)) {
        const capability = catalog.get(item);
        if (!capability) {
          problem(where, `${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
          return;
        }
        hits = [capability];
      } else {
        const re = globToRegExp(item, false);
        hits = catalog.capabilities.filter((c) => re.test(c.name));
        if (hits.length === 0)
          problem(where, `glob ${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
      }
    } else {
      hits = catalog.capabilities.filter((c) =>
        matchesSelector(item, {
          method: c.operation.method,
          path: c.operation.path,
          tags: c.operation.tags,
          ...(c.operation.operationId !== undefined ? { operationId: c.operation.operationId } : {}),
        }),
      );
      if (hits.length === 0) {
        problem(where, `selector ${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
      }
    }
    for (const c of hits) matched.add(c.name);
  });
  return new Set(catalog.capabilities.map((c) => c.name).filter((n) => matched.has(n)));
}

function seeCatalog(catalog: Catalog): string {
  const names = catalog.capabilities.map((c) => c.name);
  if (names.length === 0) return '(the catalog is empty)';
  if (names.length <= 10) return `(capabilities: ${names.join(', ')})`;
  return '(list them with `agent-auth-proxy capabilities`)';
}

/** A capability's top-level input field names: the keys constraints may use (§2.13). */
function inputFields(capability: Capability): ReadonlySet<string> {
  const properties = capability.input?.properties;
  return new Set(
    typeof properties === 'object' && properties !== null && !Array.isArray(properties)
      ? Object.keys(properties)
      : [],
  );
}

/** `"60/1m"` → 60 per 60000 ms. The schema already checked the shape. */
function parseRateLimit(value: string, where: string, problems: string[]): RateLimitSpec | null {
  const match = /^(\d+)\/(.+)$/.exec(value);
  const count = Number(match?.[1]);
  const window = match?.[2];
  if (window === undefined || !Number.isSafeInteger(count) || count < 1) {
    problems.push(
      `${where}: must be a rate limit "COUNT/DURATION" with COUNT >= 1, e.g. "60/1m" (got ${JSON.stringify(value)})`,
    );
    return null;
  }
  let windowMs: number;
  try {
    windowMs = parseDuration(window, where);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    problems.push(err.message);
    return null;
  }
  if (windowMs < 1000) {
    problems.push(`${where}: the window must be at least 1s (got ${JSON.stringify(value)})`);
    return null;
  }
  return Object.freeze({ count, windowMs });
}

function describeMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

function isWebUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'https:' || url.protocol === 'http:') && !text.includes('#');
  } catch {
    return false;
  }
}
