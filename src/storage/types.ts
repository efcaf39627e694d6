/**
 * The storage contract the protocol logic depends on: records (§3 data model) and the two views
 * of a store, a reader and a transactional writer. Every call is asynchronous, because one
 * implementation (PostgreSQL, for several replicas, issue 13) talks to a database over the network;
 * the SQLite store answers from the same thread and resolves at once.
 *
 * Times are milliseconds since the epoch; the HTTP layer renders them as ISO 8601.
 */

/** Public key in JWK form, as stored (Ed25519 only, §4.1). */
export interface StoredJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
}

export type HostStatus = 'active' | 'pending' | 'revoked' | 'rejected';

/** §3.1 */
export interface HostRecord {
  readonly id: string;
  /** RFC 7638 thumbprint of the current key: the `iss` of its JWTs (§4.2). */
  readonly thumbprint: string;
  readonly publicJwk: StoredJwk;
  readonly name: string | null;
  readonly userId: string | null;
  readonly defaultCapabilities: readonly string[];
  readonly status: HostStatus;
  /** Created by the operator (policy or admin API) rather than by a registration (§2.8). */
  readonly preRegistered: boolean;
  /**
   * Admitted by policy rather than by a person: an autonomous agent's unknown host under
   * `autonomous.bootstrap: policy` (§2.2.2). Until linked it stays within the pending-host bounds.
   */
  readonly admittedByPolicy: boolean;
  /**
   * Where a dynamic registration came from (RFC 8628 §5.4: the device page shows it): the client
   * IP and user agent of the request that first stored the host. Absent for pre-registered hosts
   * and rows stored before migration 11.
   */
  readonly registeredIp?: string | null;
  readonly registeredUserAgent?: string | null;
  /**
   * §4.2: a JWKS-based host is identified by this URL (stable across rotations); `thumbprint` and
   * `publicJwk` then hold its current signing key, updated on rotation (§8.7). Null for inline keys.
   */
  readonly jwksUrl?: string | null;
  readonly activatedAt: number | null;
  readonly lastUsedAt: number | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/**
 * A host key rotated away (§5.9: "the old key stops working immediately"). Kept so that nothing
 * makes it a host's key again: neither a policy `hosts` entry that still names it, nor the admin
 * API, nor another rotation (protocol/hosts.ts).
 */
export interface RetiredHostKey {
  /** RFC 7638 thumbprint of the old key. */
  readonly thumbprint: string;
  /** The host that rotated away from it (which may since have been deleted). */
  readonly hostId: string;
  readonly retiredAt: number;
}

export type AgentMode = 'delegated' | 'autonomous';
export type AgentStatus = 'pending' | 'active' | 'expired' | 'revoked' | 'rejected' | 'claimed';

/** §3.2 */
export interface AgentRecord {
  readonly id: string;
  readonly hostId: string;
  readonly userId: string | null;
  readonly name: string;
  readonly publicJwk: StoredJwk;
  /** Thumbprint of `publicJwk`: with `hostId`, the registration's idempotency key (§5.3). */
  readonly keyThumbprint: string;
  /**
   * A JWKS-based agent (§4.2 `agent_jwks_url`): its keys come from this URL by the JWT's `kid`,
   * `jwksKid` (the registration's `agent_kid`) when the JWT names none. `publicJwk` is the key
   * registered. Null for inline keys.
   */
  readonly jwksUrl?: string | null;
  readonly jwksKid?: string | null;
  readonly mode: AgentMode;
  readonly status: AgentStatus;
  readonly lastUsedAt: number | null;
  readonly activatedAt: number | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/**
 * §3.3. `revoked` is internal: grants removed by reactivation, unlinking or claiming keep their
 * row for audit but are no longer part of the agent's grant set.
 */
export type GrantStatus = 'active' | 'pending' | 'denied' | 'revoked';

export interface GrantRecord {
  readonly id: string;
  readonly agentId: string;
  readonly capability: string;
  readonly status: GrantStatus;
  /** Effective constraints (§2.13): what execution enforces once active. */
  readonly constraints: Readonly<Record<string, unknown>> | null;
  /**
   * What the agent proposed, before the policy's constraints were folded in (§2.13); null when it
   * proposed none. Kept apart from what was approved and what is in effect (issue 16).
   */
  readonly proposedConstraints?: Readonly<Record<string, unknown>> | null;
  /**
   * What the approver approved: the constraints shown to them, narrowed by them (§2.13); null for
   * grants no person decided (policy grants) and rows stored before migration 11.
   */
  readonly approvedConstraints?: Readonly<Record<string, unknown>> | null;
  readonly grantedBy: string | null;
  readonly deniedBy: string | null;
  readonly reason: string | null;
  readonly expiresAt: number | null;
  /** The approval request that will decide a pending grant. */
  readonly approvalId: string | null;
  /**
   * §2.12: the capability's version (capability-version.ts) when the grant was approved; null
   * for grants never active and rows stored before migration 13 (adopted at start-up, drift.ts).
   * A pending grant with a version was suspended by drift: it waits for re-approval.
   */
  readonly capabilityVersion?: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** How often a grant was used to call the upstream, and when last (flushed in batches). */
export interface GrantUse {
  readonly uses: number;
  readonly lastUsedAt: number | null;
}

export type ApprovalKind = 'registration' | 'capability_request' | 'reactivation';
export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired';

export interface RequestedCapability {
  readonly name: string;
  /** The effective constraints the approver is asked to accept (agent proposal ∩ policy). */
  readonly constraints?: Readonly<Record<string, unknown>>;
  /** The agent's own proposal, before policy (§2.13); absent when it proposed none. */
  readonly proposed?: Readonly<Record<string, unknown>>;
}

/** A pending question to a human (§7): who asks, for what, until when, and the RFC 8628 code. */
export interface ApprovalRecord {
  readonly id: string;
  readonly kind: ApprovalKind;
  readonly agentId: string;
  readonly hostId: string;
  readonly userCode: string;
  readonly method: 'device_authorization' | 'ciba';
  readonly loginHint: string | null;
  readonly bindingMessage: string | null;
  readonly reason: string | null;
  readonly capabilities: readonly RequestedCapability[];
  readonly status: ApprovalStatus;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly decidedAt: number | null;
  readonly decidedBy: string | null;
}

/** §11: one row per protocol event and per execution. */
export interface ActivityRecord {
  readonly id?: number;
  readonly at: number;
  readonly type: string;
  readonly agentId: string | null;
  readonly hostId: string | null;
  readonly userId: string | null;
  readonly capability: string | null;
  readonly outcome: string;
  readonly detail: Readonly<Record<string, unknown>> | null;
  readonly jti: string | null;
  readonly latencyMs: number | null;
  readonly upstreamStatus: number | null;
}

/** An accepted async execution: the proxy's status URL id → the upstream's status URL (§5.11). */
export interface AsyncJobRecord {
  readonly id: string;
  readonly agentId: string;
  readonly capability: string;
  readonly upstreamUrl: string;
  /** The GET capability `upstreamUrl` is a call of; null for a job stored before it was recorded. */
  readonly statusCapability: string | null;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** Where a per-call approval stands (issue 16 §1); `executing` is taken once, before the call. */
export type PerCallStatus = 'pending' | 'executing' | 'completed' | 'failed';

/**
 * One execution of a `capabilities.per_call` capability waiting for, or past, its approval
 * (§5.11 async): the exact arguments shown to the approver, then the outcome for the agent.
 */
export interface PerCallRecord {
  readonly id: string;
  readonly agentId: string;
  readonly hostId: string;
  /** The addressee: the agent's user; null for an autonomous agent (policy `approval.approvers`). */
  readonly userId: string | null;
  readonly capability: string;
  /** The agent's arguments, as sent (validated, within the grant's constraints). */
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly status: PerCallStatus;
  /** `completed`: the upstream's data. */
  readonly result: unknown;
  /** `failed`: the §5.13 error object. */
  readonly error: Readonly<Record<string, unknown>> | null;
  readonly createdAt: number;
  /** The approval's deadline. */
  readonly expiresAt: number;
  readonly decidedAt: number | null;
  readonly decidedBy: string | null;
  /** When the row is deleted even if the agent never fetched the outcome. */
  readonly keepUntil: number;
}

/** The operator's list of per-call approvals: newest first, keyset paginated. */
export interface PerCallQuery {
  readonly status?: PerCallStatus;
  readonly before?: { readonly createdAt: number; readonly id: string };
  readonly limit: number;
}

/**
 * A JWT id accepted for `identity` (e.g. `agent:agt_…`), to be refused again until `expiresAt`
 * (replay-journal.ts keeps them across restarts).
 */
export interface SeenJti {
  readonly identity: string;
  readonly jti: string;
  readonly expiresAt: number;
}

/** How an approver proved who they are (issue 11; recorded for §8.11 fresh authentication). */
export type AuthMethod = 'password' | 'password+totp' | 'trusted_header' | 'oidc' | 'passkey';

/** What one pass of the pending cleanup did. */
export interface StalePendingSwept {
  readonly agents: number;
  readonly hosts: number;
  /** Pending hosts rejected, their agents all rejected. */
  readonly rejected: number;
}

/** A signed-in approver's session; the cookie carries the id, the store only its hash. */
export interface SessionRecord {
  readonly idHash: string;
  readonly userId: string;
  readonly authMethod: AuthMethod;
  readonly authenticatedAt: number;
  /**
   * For OIDC sign-ins, the ID token's `acr` and `amr` (OpenID Connect Core §2), so each decision's
   * record can say how strongly the approver authenticated (issue 16). Null otherwise.
   */
  readonly acr?: string | null;
  readonly amr?: readonly string[] | null;
  /**
   * For password sign-ins, the digest of the account's credentials then (config/sign-in.ts
   * credentialTag): changed credentials end the session. Null otherwise, and for sessions
   * started before version 21 (SQLite) / 8 (PostgreSQL) of the schema.
   */
  readonly credentialTag?: string | null;
  /** Sent back with every form of this session (synchronizer token). */
  readonly csrfToken: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/**
 * A passkey (WebAuthn credential, issue 11) an approver enrolled at `{issuer}/account`: what the
 * server needs to verify its assertions (§8.11 proof of presence) and to show it to its owner.
 */
export interface PasskeyRecord {
  /** The credential id, base64url (WebAuthn `rawId`). */
  readonly id: string;
  readonly userId: string;
  /** The WebAuthn user handle: random per user, never the user id itself (base64url). */
  readonly userHandle: string;
  /** The COSE-encoded public key. */
  readonly publicKey: Uint8Array;
  /** The authenticator's signature counter at the last accepted use (0: it keeps none). */
  readonly counter: number;
  /** Transport hints the browser reported at enrolment (`internal`, `usb`, `hybrid`…). */
  readonly transports: readonly string[];
  /** The name its owner gave it (shown on the account page). */
  readonly name: string;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
}

/**
 * An OpenID Connect sign-in started and not yet finished (issue 11; in the store since issue 13,
 * so that the callback may reach another replica). Only hashes of what is merely compared: the
 * `state` (the key) and the starting browser's cookie; the nonce and PKCE verifier are needed
 * again as they are, for ten minutes at most.
 */
export interface OidcPendingRecord {
  /** SHA-256 of the `state` parameter, base64url. */
  readonly stateHash: string;
  readonly nonce: string;
  readonly verifier: string;
  readonly returnTo: string;
  readonly fresh: boolean;
  /** SHA-256 of the browser cookie of the browser that started it, base64url. */
  readonly browserHash: string;
  readonly expiresAt: number;
}

/** A WebAuthn challenge issued and not yet answered (issue 11, §8.11; in the store since issue 13). */
export interface ChallengeRecord {
  /** SHA-256 of the challenge, base64url: the challenge itself is only compared. */
  readonly challengeHash: string;
  /** Whose open challenges it counts against (a session's id hash, or `ip:` + address). */
  readonly owner: string;
  /** What it was issued for (purpose, binding…), as JSON. */
  readonly data: string;
  readonly expiresAt: number;
}

/**
 * The bounds of open challenges: per owner (a new one evicts the oldest), and in all (refused).
 * `total` counts the challenges of owners of the same kind only (the owner's text up to its first
 * `:`, `ip:` or `session:`), so that strangers' sign-in ceremonies cannot use up the room of
 * signed-in people's approvals.
 */
export interface ChallengeLimits {
  readonly perOwner: number;
  readonly total: number;
}

/** The kind of owner `total` counts within: `ip:…` → `ip:`. */
export function ownerKind(owner: string): string {
  return owner.slice(0, owner.indexOf(':') + 1);
}

export interface ActivityQuery {
  readonly agentId?: string;
  readonly hostId?: string;
  readonly capability?: string;
  readonly since?: number;
  readonly until?: number;
  /** Rows with an id below this (keyset pagination, newest first). */
  readonly beforeId?: number;
  readonly limit: number;
}

/**
 * Pending approvals open at `now` addressed to `userId`: CIBA requests whose login_hint is the
 * user, and device-authorization requests the user opened. Newest first (created_at, then id,
 * descending), at most `limit`, starting below the `before` position (keyset pagination).
 */
export interface InboxQuery {
  readonly userId: string;
  readonly now: number;
  readonly before?: { readonly createdAt: number; readonly id: string };
  readonly limit: number;
}

/**
 * A page of an operator listing (hosts, agents, approvals): oldest first by (createdAt, id),
 * starting after `after` (keyset pagination, so each page is one range of an index), at most
 * `limit` rows. Without `limit` every matching row is returned: only for sets bounded by an owner
 * (an agent's approvals, a host's agents, a user's hosts); a listing of all rows, or of all rows
 * of a status, must give a `limit` (a store rejects the call otherwise).
 */
export interface ListingPage {
  readonly after?: { readonly createdAt: number; readonly id: string };
  readonly limit?: number;
}

export type Patch<T> = Partial<Omit<T, 'id' | 'createdAt'>>;

export interface StoreReader {
  host(id: string): Promise<HostRecord | undefined>;
  hostByThumbprint(thumbprint: string): Promise<HostRecord | undefined>;
  /** The JWKS-based host registered with this URL (§4.2, §4.5.1 step 4). */
  hostByJwksUrl(url: string): Promise<HostRecord | undefined>;
  hosts(filter?: { status?: HostStatus; userId?: string } & ListingPage): Promise<HostRecord[]>;
  /** The record of a host key rotated away with this thumbprint (§5.9), if any. */
  retiredHostKey(thumbprint: string): Promise<RetiredHostKey | undefined>;
  /**
   * What the policy granted without asking when drift last committed (protocol/drift.ts), as the
   * JSON drift wrote; undefined before the first.
   */
  appliedPolicyGrants(): Promise<string | undefined>;
  agent(id: string): Promise<AgentRecord | undefined>;
  agentByKey(hostId: string, keyThumbprint: string): Promise<AgentRecord | undefined>;
  agents(
    filter?: { hostId?: string; status?: AgentStatus; userId?: string } & ListingPage,
  ): Promise<AgentRecord[]>;
  /** Every grant row of an agent, `revoked` ones included, in creation order. */
  grants(agentId: string): Promise<GrantRecord[]>;
  /** Active grants of a capability not at `version` (drift, §2.12); NULL versions included. */
  grantsOffVersion(capability: string, version: string): Promise<GrantRecord[]>;
  /**
   * Of `capabilities`, those with at least one active grant: drift (§2.12) hashes only those, so
   * a start-up over a large catalog does not hash capabilities nobody holds. One statement.
   */
  grantedCapabilities(capabilities: readonly string[]): Promise<Set<string>>;
  approval(id: string): Promise<ApprovalRecord | undefined>;
  approvalByUserCode(userCode: string): Promise<ApprovalRecord | undefined>;
  approvals(filter?: { status?: ApprovalStatus; agentId?: string } & ListingPage): Promise<ApprovalRecord[]>;
  /** At most `limit` pending approvals whose deadline is at or before `now`, earliest first. */
  overdueApprovals(now: number, limit: number): Promise<ApprovalRecord[]>;
  /** How many hosts have this status (the pending-host bound, §2.11). */
  countHosts(status: HostStatus): Promise<number>;
  /** Active, unlinked hosts that policy admitted (nobody approved them): within the same bound. */
  countPolicyAdmittedHosts(): Promise<number>;
  /**
   * Requests of a host's agents waiting for a person, not yet expired at `now`: pending approvals
   * and pending per-call approvals together (the pending-host bound, `max_open_approvals`).
   */
  countOpenApprovals(hostId: string, now: number): Promise<number>;
  /** All pending approvals not yet expired at `now` (the approvals_pending gauge). */
  countPendingApprovals(now: number): Promise<number>;
  activity(query: ActivityQuery): Promise<ActivityRecord[]>;
  asyncJob(id: string): Promise<AsyncJobRecord | undefined>;
  /**
   * A user's agents: linked to the user, or under a host linked to the user; newest first, a page
   * at a time (the account page, issue 11).
   */
  agentsOfUser(
    userId: string,
    page: { readonly limit: number; readonly offset: number },
  ): Promise<AgentRecord[]>;
  countAgentsOfUser(userId: string): Promise<number>;
  perCall(id: string): Promise<PerCallRecord | undefined>;
  /**
   * Open (pending, not past `now`) per-call approvals addressed to `userId`, or with `userId`
   * null to the policy's approvers; newest first, at most `limit`.
   */
  perCallsAddressedTo(userId: string | null, now: number, limit: number): Promise<PerCallRecord[]>;
  /** The operator's list: see PerCallQuery. */
  perCalls(query: PerCallQuery): Promise<PerCallRecord[]>;
  /** How many of an agent's per-call approvals are pending and not past `now`. */
  countOpenPerCalls(agentId: string, now: number): Promise<number>;
  /** At most `limit` of an agent's pending per-call rows, past their deadline or not. */
  pendingPerCallsOf(agentId: string, limit: number): Promise<PerCallRecord[]>;
  /** At most `limit` pending per-call rows whose deadline is at or before `now`. */
  overduePerCalls(now: number, limit: number): Promise<PerCallRecord[]>;
  /**
   * At most `limit` per-call rows still `executing` that were claimed (`decided_at`) at or before
   * `claimedBefore`, oldest first: calls whose outcome was never stored.
   */
  abandonedPerCalls(claimedBefore: number, limit: number): Promise<PerCallRecord[]>;
  passkey(id: string): Promise<PasskeyRecord | undefined>;
  /** A user's passkeys, oldest first (at most MAX_PASSKEYS_PER_USER, protocol/passkeys.ts). */
  passkeys(userId: string): Promise<PasskeyRecord[]>;
  /** Whether `userId` holds an enrolment code whose hash is `codeHash`, unexpired at `now`. */
  hasEnrolmentCode(userId: string, codeHash: string, now: number): Promise<boolean>;
}

/** Everything a transaction may change; all calls inside one `write` commit or roll back together. */
export interface StoreWriter extends StoreReader {
  insertHost(host: HostRecord): Promise<void>;
  updateHost(id: string, patch: Patch<HostRecord>): Promise<void>;
  deleteHost(id: string): Promise<void>;
  /** Records a key a host rotated away from; a later retirement of the same key replaces it. */
  retireHostKey(key: RetiredHostKey): Promise<void>;
  /** Replaces what appliedPolicyGrants reads. */
  putAppliedPolicyGrants(json: string): Promise<void>;
  insertAgent(agent: AgentRecord): Promise<void>;
  updateAgent(id: string, patch: Patch<AgentRecord>): Promise<void>;
  /** Deletes the agent with its grants and approvals (pending cleanup, §10.9). */
  deleteAgent(id: string): Promise<void>;
  /** Inserts, or replaces the agent's row for the same capability (one current grant each). */
  putGrant(grant: GrantRecord): Promise<void>;
  /**
   * Inserts a grant of an agent that has none for this capability (one just registered). Unlike
   * putGrant it reads nothing: on PostgreSQL the replacing DELETE's lookup of a key not there yet
   * is a read that conflicts with every other registration writing to the same index page.
   */
  insertGrant(grant: GrantRecord): Promise<void>;
  updateGrant(id: string, patch: Patch<GrantRecord>): Promise<void>;
  insertApproval(approval: ApprovalRecord): Promise<void>;
  updateApproval(id: string, patch: Patch<ApprovalRecord>): Promise<void>;
  /** Deletes an approval row (grants pointing at it keep their row, without the link). */
  deleteApproval(id: string): Promise<void>;
  appendActivity(record: ActivityRecord): Promise<void>;
  /** Deletes at most `limit` of an agent's activity rows, oldest first (§9.2); returns how many. */
  deleteAgentActivity(agentId: string, limit: number): Promise<number>;
  insertPerCall(record: PerCallRecord): Promise<void>;
  /**
   * Moves a per-call row on only if its status is still `from`; returns whether it did (a
   * compare-and-set: of two concurrent decisions only one moves it).
   */
  updatePerCall(id: string, from: PerCallStatus, patch: Patch<PerCallRecord>): Promise<boolean>;
  deletePerCall(id: string): Promise<void>;
  /**
   * Passkeys change in a transaction, so that the per-user cap counted in it holds and the
   * activity record that says so commits with the change.
   */
  insertPasskey(passkey: PasskeyRecord): Promise<void>;
  /** Deletes the passkey only if it is `userId`'s; returns whether one was deleted. */
  deletePasskey(id: string, userId: string): Promise<boolean>;
  /** Ends every session of `userId` (a lost passkey may have signed someone in); returns how many. */
  deleteSessionsOf(userId: string): Promise<number>;
  /** Stores `userId`'s first-passkey enrolment code (its hash), replacing any earlier one. */
  putEnrolmentCode(userId: string, codeHash: string, expiresAt: number): Promise<void>;
  /**
   * Uses up `userId`'s enrolment code if its hash is `codeHash` and it has not expired at `now`;
   * returns whether it did. A wrong code leaves the right one in place.
   */
  takeEnrolmentCode(userId: string, codeHash: string, now: number): Promise<boolean>;
}

export interface Store extends StoreReader {
  /**
   * Runs `fn` in one transaction: its changes are all visible afterwards, or none are. Other
   * transactions see it as if transactions ran one after another (SQLite: one writer at a time;
   * PostgreSQL: SERIALIZABLE); the store's own reads and writes outside it do not see its changes
   * before it commits. `fn` may be run again when the database reports a serialization
   * conflict, so it must do nothing outside `tx` (no I/O, no cache or counter changes): do those
   * after `write` resolves, with what `fn` returned. Inside `fn`, read and write through `tx`
   * only: a call to the store itself is outside the transaction (the SQLite store makes it wait
   * until `fn` ends, which never comes). A statement the database refuses (a constraint) fails
   * the whole transaction (PostgreSQL aborts it; SQLite would go on): `fn` lets the error
   * propagate rather than catch it and continue. A database that cannot be reached rejects with
   * StoreUnavailableError (errors.ts), and `fn` is not re-run then.
   */
  write<T>(fn: (tx: StoreWriter) => Promise<T>): Promise<T>;
  /**
   * Coalesced `last_used_at` updates (§10.2: no write per request); one statement batch. Grants
   * get their use count added and their last use raised (the account page's "uses", "last used").
   * `flushId`: the batch's id, the same when it is retried; a batch whose id was applied before
   * (its commit's answer was lost, yet it committed) is not applied again, so no use is counted
   * twice. Kept a day (PostgreSQL); SQLite ignores it, as it always knows whether it committed.
   */
  touch(
    agents: ReadonlyMap<string, number>,
    hosts: ReadonlyMap<string, number>,
    grants?: ReadonlyMap<string, GrantUse>,
    flushId?: string,
  ): Promise<void>;
  /** The stored use counters of an agent's grants, by grant id (grants never used are absent). */
  grantUses(agentId: string): Promise<Map<string, GrantUse>>;
  /** Appends execution records in one transaction (the executor batches them off the hot path). */
  appendActivities(records: readonly ActivityRecord[]): Promise<void>;
  insertAsyncJob(job: AsyncJobRecord): Promise<void>;
  /**
   * Deletes the agent's async jobs beyond its `keep` newest (by `created_at`, then id); returns
   * how many. Reads at most keep + the few inserted since, along the agent's index.
   */
  forgetOlderAsyncJobs(agentId: string, keep: number): Promise<number>;
  /** Deletes at most `limit` jobs whose `expires_at` is before `now`; returns how many. */
  deleteExpiredAsyncJobs(now: number, limit: number): Promise<number>;
  /**
   * Deletes at most `limit` activity records dated before `before`, oldest first (retention,
   * §9.2); returns how many. Bounded, so a caller can spread a large backlog over many turns.
   */
  deleteActivityBefore(before: number, limit: number): Promise<number>;
  /**
   * Deletes at most `limit` approval requests decided (approved, denied or expired) before
   * `before`, oldest decision first (retention: they keep the requester's reason and binding
   * message, and whom they were addressed to, §9.5); pending ones are never touched. Returns how many.
   */
  deleteClosedApprovalsBefore(before: number, limit: number): Promise<number>;
  insertSession(session: SessionRecord): Promise<void>;
  session(idHash: string): Promise<SessionRecord | undefined>;
  deleteSession(idHash: string): Promise<void>;
  /** Deletes at most `limit` sessions whose `expires_at` is at or before `now`; returns how many. */
  deleteExpiredSessions(now: number, limit: number): Promise<number>;
  /** Records that `userId` opened an approval request (once per user; the first time is kept). */
  markOpened(approvalId: string, userId: string, at: number): Promise<void>;
  /** The approver's inbox, newest first: see InboxQuery. */
  inbox(query: InboxQuery): Promise<ApprovalRecord[]>;
  /** Records an accepted assertion: the new signature counter and when. */
  recordPasskeyUse(id: string, counter: number, at: number): Promise<void>;
  /**
   * Stores a pending OIDC sign-in. With `max` stored that are unexpired at `now`, the one expiring
   * first (the least recent) is deleted first, in the same transaction.
   */
  insertOidcPending(pending: OidcPendingRecord, max: number, now: number): Promise<void>;
  /**
   * Takes the pending sign-in of `stateHash` if it was started by the browser of `browserHash`
   * and has not expired at `now`: deleted and returned in one statement, so of two callbacks
   * (on any replicas) at most one gets it. A callback from another browser leaves it in place.
   */
  takeOidcPending(
    stateHash: string,
    browserHash: string,
    now: number,
  ): Promise<OidcPendingRecord | undefined>;
  /**
   * Stores an issued challenge, atomically with its bounds: the owner's oldest go first so that
   * it has fewer than `limits.perOwner` open; then, with `limits.total` unexpired challenges
   * stored in all, nothing is stored and false is returned (someone else's are never evicted).
   */
  issueChallenge(challenge: ChallengeRecord, limits: ChallengeLimits, now: number): Promise<boolean>;
  /**
   * Deletes the challenge of `challengeHash` and returns it if it had not expired at `now` (single
   * use: taken on the first answer, whatever happens next; of two concurrent takes one gets it).
   */
  takeChallenge(challengeHash: string, now: number): Promise<ChallengeRecord | undefined>;
  /**
   * Records that `userId` used the TOTP code of `step` (RFC 6238 §5.2: a code is good once),
   * kept until `keepUntil` (when that step can no longer match). Returns false, recording
   * nothing, when this step or a later one was already used: of two concurrent uses of one code
   * (on any replicas) one fails on the primary key.
   */
  useTotpStep(userId: string, step: number, keepUntil: number): Promise<boolean>;
  /**
   * Deletes at most `limit` expired rows (at or before `now`) of each of the pending OIDC
   * sign-ins, WebAuthn challenges, used TOTP steps and passkey enrolment codes, each along its expiry index; returns the
   * most deleted from one of them (a full batch means more may be left).
   */
  deleteExpiredSignInState(now: number, limit: number): Promise<number>;
  /** Deletes at most `limit` per-call rows whose `keep_until` is at or before `now`; returns how many. */
  deleteStalePerCalls(now: number, limit: number): Promise<number>;
  /**
   * Deletes at most `limit` never-activated pending agents created before `before` whose
   * registration no longer waits for a person (no approval open at `now`), then at most `limit`
   * pending hosts without agents; and rejects at most `limit` pending hosts created before
   * `before` whose agents were all rejected (a person denied them: the denial stays, and the host
   * leaves the pending pool). §10.9; returns how many of each. Bounded, so a caller spreads a
   * backlog over event-loop turns.
   */
  deleteStalePending(before: number, limit: number, now: number): Promise<StalePendingSwept>;
  /**
   * Resolves once the database answers a trivial statement; rejects (StoreUnavailableError) when
   * it cannot be reached or does not answer in time. `/readyz` asks it (readiness.ts): PostgreSQL
   * on a connection of its own, so that a pool busy with requests is not taken for an outage;
   * SQLite, in the process, always answers.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}
