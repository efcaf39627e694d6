/**
 * The operator's policy as the protocol layer reads it: resolved against the catalog (sets of
 * concrete capability names, milliseconds, count + window). The protocol owns this shape;
 * src/policy/ reads the YAML file and produces it.
 */
import type { Constraints } from './constraints.js';

export interface RateLimitSpec {
  readonly count: number;
  readonly windowMs: number;
}

/** Executions of one capability: over everyone, and per agent, host and user (null: no limit). */
export interface CapabilityRateLimits {
  readonly global: RateLimitSpec | null;
  readonly perAgent: RateLimitSpec | null;
  readonly perHost: RateLimitSpec | null;
  readonly perUser: RateLimitSpec | null;
}

/** Caps on upstream calls running at once (null: no cap). */
export interface InFlightLimits {
  readonly perAgent: number | null;
  readonly perHost: number | null;
  readonly total: number | null;
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
    /** §8.11: which approvals on the pages need a passkey assertion (src/protocol/presence.ts). */
    readonly requirePresence: 'data_changing' | 'always';
    /** The operator's own names to warn about in agent and host names (§8.10), beside the built-in brands. */
    readonly warnNames: readonly string[];
    /** How long a per-call approval waits for its approver (§5.11). */
    readonly perCallExpiresInMs: number;
    /** Largest upstream result kept for a per-call approval's status URL (UTF-8 JSON bytes). */
    readonly perCallMaxResultBytes: number;
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
  /** Policy `capabilities.per_call`: every execution waits for a person's approval of its arguments. */
  readonly perCall: ReadonlySet<string>;
  /** Policy `capabilities.dpop`: executing these needs a DPoP-bound agent JWT (§4.4). */
  readonly dpop: ReadonlySet<string>;
  readonly public: ReadonlySet<string>;
  /** Server-imposed constraints (§2.13) by capability name, validated against its input fields. */
  readonly constraints: ReadonlyMap<string, Constraints>;
  readonly autonomousGrants: ReadonlySet<string>;
  /**
   * §2.2.2 bootstrap: who admits an autonomous agent of a host nobody approved. `operator` (the
   * §8.10 safe default): it waits. `policy`: the host is admitted by policy, within pending_hosts.
   */
  readonly autonomousBootstrap: 'operator' | 'policy';
  readonly hosts: readonly PreRegisteredHost[];
  readonly rateLimits: {
    readonly perAgent: RateLimitSpec | null;
    readonly perHost: RateLimitSpec | null;
    readonly perUser: RateLimitSpec | null;
    readonly perIp: RateLimitSpec | null;
    readonly unknownHostRegistration: RateLimitSpec | null;
    /** New approval requests addressed to one user (issue 16 §3). */
    readonly approvalRequestsPerUser: RateLimitSpec | null;
    /** Failed authentications (agent, host, admin, introspection) per client IP. */
    readonly failedAuthPerIp: RateLimitSpec | null;
    /**
     * Only capabilities with at least one limit are present: those of `per_capability`, and every
     * high-risk one without an entry there, with `highRisk`'s limits.
     */
    readonly perCapability: ReadonlyMap<string, CapabilityRateLimits>;
    /** `rate_limits.high_risk` (§8.13): each high-risk capability's limits unless it has its own. */
    readonly highRisk: CapabilityRateLimits | null;
    readonly inFlight: InFlightLimits;
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
