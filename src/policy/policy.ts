/**
 * The operator's policy (`--policy FILE`): parsed from YAML, validated against POLICY_SCHEMA
 * (defaults filled in; src/policy/file.ts), then resolved against the capability catalog into
 * the model the protocol layer reads (src/protocol/resolved-policy.ts). Each section has its
 * resolver: approval and lifetimes (approval.ts), capability classes and constraints
 * (capability-lists.ts), pre-registered hosts (hosts.ts), rate limits (rate-limits.ts). Every
 * problem is reported at once, as one UserError whose lines name the file, the key path and what
 * was expected.
 *
 * Precedence, applied here so that consumers never have to: `blocked` and `high_risk` win over
 * every "granted without asking" list. A capability that is high-risk or blocked is removed from
 * `defaults`, `autonomous.grants` and each host's `default_capabilities`; a blocked one is also
 * removed from `public`.
 */
import type { Catalog } from '../openapi/catalog.js';
import type { Capability } from '../openapi/types.js';
import { resolveApproval, resolveLifetimes } from './approval.js';
import { resolveCapabilityClasses } from './capability-lists.js';
import { defaultPolicyFile, parsePolicyFile, readPolicyText } from './file.js';
import { resolveHosts } from './hosts.js';
import { Problems } from './problems.js';
import { resolveBounds } from './bounds.js';
import { resolveRateLimits, withHighRiskLimits } from './rate-limits.js';
import type { Policy } from '../protocol/resolved-policy.js';
import type { PolicyFile } from './types.js';

export type {
  AgentModeName,
  ApprovalMethodName,
  CapabilityRateLimits,
  InFlightLimits,
  Policy,
  PreRegisteredHost,
  RateLimitSpec,
} from '../protocol/resolved-policy.js';
export { MAX_CLOCK_SKEW_MS } from './approval.js';

export function loadPolicyFile(file: string, catalog: Catalog): Policy {
  return parsePolicy(readPolicyText(file), file, catalog);
}

/** Parses + validates YAML text (file is for messages) and resolves it against the catalog. */
export function parsePolicy(text: string, file: string, catalog: Catalog): Policy {
  return resolvePolicy(parsePolicyFile(text, file), file, catalog);
}

/**
 * The policy used when no --policy is given: delegated mode; GET and HEAD operations are granted
 * by default, every other method is high-risk; nothing blocked; every capability public — any
 * self-signed host key may list them anyway (§5.2 host mode precedes registration), so hiding
 * them from anonymous callers would protect nothing; lifetimes, approval and rate limits as the
 * schema's defaults.
 */
export function defaultPolicy(catalog: Catalog): Policy {
  const base = resolvePolicy(defaultPolicyFile(), '(default policy)', catalog);
  const safe = (c: Capability): boolean => c.operation.method === 'get' || c.operation.method === 'head';
  const highRisk = new Set(catalog.capabilities.filter((c) => !safe(c)).map((c) => c.name));
  return Object.freeze({
    ...base,
    defaults: new Set(catalog.capabilities.filter(safe).map((c) => c.name)),
    highRisk,
    public: new Set(catalog.capabilities.map((c) => c.name)),
    rateLimits: withHighRiskLimits(base.rateLimits, highRisk, defaultPolicyFile().rate_limits),
  });
}

function resolvePolicy(raw: PolicyFile, file: string, catalog: Catalog): Policy {
  const problems = new Problems(file);
  const approval = resolveApproval(raw.approval, problems);
  const lifetimes = resolveLifetimes(raw, approval, problems);
  const classes = resolveCapabilityClasses(raw, catalog, problems);
  const hosts = resolveHosts(raw.hosts, classes.grantable, problems);
  const rateLimits = withHighRiskLimits(
    resolveRateLimits(raw.rate_limits, catalog, problems),
    classes.highRisk,
    raw.rate_limits,
  );
  const bounds = resolveBounds(raw, problems);
  problems.throwIfAny();
  return Object.freeze({
    modes: Object.freeze([...raw.modes]),
    approval,
    lifetimes,
    defaults: classes.defaults,
    highRisk: classes.highRisk,
    blocked: classes.blocked,
    perCall: classes.perCall,
    dpop: classes.dpop,
    public: classes.public,
    constraints: classes.constraints,
    autonomousGrants: classes.autonomousGrants,
    autonomousBootstrap: raw.autonomous.bootstrap,
    hosts,
    rateLimits,
    ...bounds,
    audit: Object.freeze({ logArguments: raw.audit.log_arguments }),
  });
}
