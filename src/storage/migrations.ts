/**
 * Versioned schema migrations, applied in order at start-up inside one transaction each and
 * recorded in `PRAGMA user_version`. Never edit a released migration: append a new one.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: the §3 data model, approvals and the activity log.
  `
  CREATE TABLE hosts (
    id TEXT PRIMARY KEY,
    thumbprint TEXT NOT NULL UNIQUE,
    public_jwk TEXT NOT NULL,
    name TEXT,
    user_id TEXT,
    default_capabilities TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL CHECK (status IN ('active', 'pending', 'revoked', 'rejected')),
    pre_registered INTEGER NOT NULL DEFAULT 0,
    activated_at INTEGER,
    last_used_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX hosts_user ON hosts (user_id);

  CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    host_id TEXT NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    user_id TEXT,
    name TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    key_thumbprint TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('delegated', 'autonomous')),
    status TEXT NOT NULL
      CHECK (status IN ('pending', 'active', 'expired', 'revoked', 'rejected', 'claimed')),
    last_used_at INTEGER,
    activated_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (host_id, key_thumbprint)
  ) STRICT;
  CREATE INDEX agents_status ON agents (status, created_at);
  CREATE INDEX agents_user ON agents (user_id);

  CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('registration', 'capability_request', 'reactivation')),
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    host_id TEXT NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    user_code TEXT NOT NULL UNIQUE,
    method TEXT NOT NULL,
    login_hint TEXT,
    binding_message TEXT,
    reason TEXT,
    capabilities TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_at INTEGER,
    decided_by TEXT
  ) STRICT;
  CREATE INDEX approvals_status ON approvals (status, created_at);
  CREATE INDEX approvals_agent ON approvals (agent_id);

  CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    capability TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'pending', 'denied', 'revoked')),
    constraints TEXT,
    granted_by TEXT,
    denied_by TEXT,
    reason TEXT,
    expires_at INTEGER,
    approval_id TEXT REFERENCES approvals (id) ON DELETE SET NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (agent_id, capability)
  ) STRICT;

  CREATE TABLE activity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    type TEXT NOT NULL,
    agent_id TEXT,
    host_id TEXT,
    user_id TEXT,
    capability TEXT,
    outcome TEXT NOT NULL,
    detail TEXT,
    jti TEXT,
    latency_ms REAL,
    upstream_status INTEGER
  ) STRICT;
  CREATE INDEX activity_agent ON activity (agent_id, id);
  CREATE INDEX activity_host ON activity (host_id, id);
  CREATE INDEX activity_capability ON activity (capability, id);
  CREATE INDEX activity_at ON activity (at);
  `,
  // 2: async executions (§2.15): the upstream status URL behind each proxy status_url.
  `
  CREATE TABLE async_jobs (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    capability TEXT NOT NULL,
    upstream_url TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX async_jobs_expiry ON async_jobs (expires_at);
  `,
  // 3: the GET capability an async job's upstream status URL is a call of (issue 10, class 4):
  // polling needs a grant for it. Jobs stored before have none and are not followed.
  `
  ALTER TABLE async_jobs ADD COLUMN status_capability TEXT;
  `,
  // 4: bounds on what hosts nobody approved can store (policy pending_hosts), counted per
  // registration.
  `
  CREATE INDEX hosts_status ON hosts (status);
  CREATE INDEX approvals_host ON approvals (host_id, status);
  `,
  // 5: approvers' sign-in sessions (issue 11). The id is stored only as its SHA-256, so a copy of
  // the database opens no session; how and when the person authenticated is kept for §8.11.
  `
  CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    auth_method TEXT NOT NULL CHECK (auth_method IN ('password', 'password+totp', 'trusted_header')),
    authenticated_at INTEGER NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX sessions_expiry ON sessions (expires_at);
  `,
  // 6: hosts admitted by policy (autonomous.bootstrap: policy, §2.2.2) rather than by a person:
  // they stay within the pending-host bounds until linked (issue 11).
  `
  ALTER TABLE hosts ADD COLUMN admitted_by_policy INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX hosts_admitted_by_policy ON hosts (admitted_by_policy, status);
  `,
  // 7: the ways a session can be authenticated grow with issue 11: 'oidc' (the organisation's
  // OpenID Connect provider) and 'passkey' (WebAuthn) join them. SQLite cannot change a CHECK
  // constraint, so the table is rebuilt with its rows.
  `
  CREATE TABLE sessions_next (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    auth_method TEXT NOT NULL
      CHECK (auth_method IN ('password', 'password+totp', 'trusted_header', 'oidc', 'passkey')),
    authenticated_at INTEGER NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO sessions_next (id_hash, user_id, auth_method, authenticated_at, csrf_token, created_at, expires_at)
    SELECT id_hash, user_id, auth_method, authenticated_at, csrf_token, created_at, expires_at FROM sessions;
  DROP TABLE sessions;
  ALTER TABLE sessions_next RENAME TO sessions;
  CREATE INDEX sessions_expiry ON sessions (expires_at);
  `,
  // 8: the approver's inbox (issue 11): who opened which device-authorization request, so a
  // signed-in user finds it again at /approvals; CIBA requests are found by their login_hint.
  `
  CREATE TABLE approval_openers (
    approval_id TEXT NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, approval_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX approval_openers_approval ON approval_openers (approval_id);
  CREATE INDEX approvals_login_hint ON approvals (login_hint, status, created_at);
  `,
  // 9: approvers' passkeys (issue 11, WebAuthn): the credential id, its COSE public key and
  // signature counter, per user ('passkey' as a session's auth method came with migration 7).
  `
  CREATE TABLE passkeys (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    user_handle TEXT NOT NULL,
    public_key BLOB NOT NULL,
    counter INTEGER NOT NULL CHECK (counter >= 0),
    transports TEXT NOT NULL DEFAULT '[]',
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER
  ) STRICT;
  CREATE INDEX passkeys_user ON passkeys (user_id, created_at);
  `,
  // 10 (issue 16 §2, §3): every approval bound to what was shown and recorded.
  // Grants keep what the agent proposed and what the approver approved apart from what is in
  // effect (constraints); sessions keep an OIDC sign-in's acr and amr for decision records; hosts
  // keep the IP and user agent they registered from (RFC 8628 §5.4, shown on the device page).
  `
  ALTER TABLE grants ADD COLUMN proposed_constraints TEXT;
  ALTER TABLE grants ADD COLUMN approved_constraints TEXT;
  ALTER TABLE sessions ADD COLUMN acr TEXT;
  ALTER TABLE sessions ADD COLUMN amr TEXT;
  ALTER TABLE hosts ADD COLUMN registered_ip TEXT;
  ALTER TABLE hosts ADD COLUMN registered_user_agent TEXT;
  `,
  // 11 (issue 16 §5): per-grant use counters
  // for the account page. Kept on the row and bumped in coalesced batches (Store.touch), so the
  // page never counts activity rows (millions) and an execution never waits for a write.
  `
  ALTER TABLE grants ADD COLUMN uses INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0);
  ALTER TABLE grants ADD COLUMN last_used_at INTEGER;
  `,
  // 12: per-call approvals (issue 16 §1, §5.11): an execution of a `capabilities.per_call`
  // capability waits here, with its exact arguments, until its addressee approves it with a
  // passkey; then its outcome waits for the agent's poll. `user_id` is the addressee (the
  // agent's user); NULL addresses `approval.approvers` (an autonomous agent). Every query has
  // its index: by id; an agent's open ones (the per-agent bound; also the FK cascade); an
  // addressee's open ones (inbox); the operator's list, newest first, with and without a status;
  // pending ones past their deadline and rows past `keep_until` (sweep).
  `
  CREATE TABLE per_call_approvals (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    host_id TEXT NOT NULL,
    user_id TEXT,
    capability TEXT NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'executing', 'completed', 'failed')),
    result TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_at INTEGER,
    decided_by TEXT,
    keep_until INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX per_call_agent ON per_call_approvals (agent_id, status, expires_at);
  CREATE INDEX per_call_addressee ON per_call_approvals (user_id, status, created_at, id);
  CREATE INDEX per_call_listing ON per_call_approvals (created_at, id);
  CREATE INDEX per_call_status ON per_call_approvals (status, created_at, id);
  CREATE INDEX per_call_deadline ON per_call_approvals (status, expires_at);
  CREATE INDEX per_call_keep ON per_call_approvals (keep_until);
  `,
  // 13 (issue 12, §2.12): each grant keeps the version (content hash) of the capability it was
  // approved at; start-up and reloads find active grants of a capability at another version
  // through grants_version, and suspend them until re-approved (protocol/drift.ts).
  `
  ALTER TABLE grants ADD COLUMN capability_version TEXT;
  CREATE INDEX grants_version ON grants (capability, status, capability_version);
  `,
  // 14 (issue 12): keys from JWKS URLs (§4.1, §4.2). A JWKS-based host is found by its URL
  // (unique: one host per URL), an agent's key by the JWT's kid or the registration's agent_kid.
  `
  ALTER TABLE hosts ADD COLUMN jwks_url TEXT;
  CREATE UNIQUE INDEX hosts_jwks_url ON hosts (jwks_url) WHERE jwks_url IS NOT NULL;
  ALTER TABLE agents ADD COLUMN jwks_url TEXT;
  ALTER TABLE agents ADD COLUMN jwks_kid TEXT;
  `,
  // 15 (issue 17, storage that scales): every statement served by an index matching its filter
  // and order (test/unit/storage/query-plans.test.ts checks each one's plan). Listings are keyset
  // ranges of (filter…, created_at, id); the indexes they supersede (same leading columns) go.
  // Foreign keys a cascade or SET NULL follows get an index, so deleting an agent or an approval
  // does not scan async_jobs or grants. Overdue pending approvals are a range of (status, expires_at).
  `
  CREATE INDEX hosts_listing ON hosts (created_at, id);
  CREATE INDEX hosts_status_listing ON hosts (status, created_at, id);
  CREATE INDEX hosts_user_listing ON hosts (user_id, created_at, id);
  DROP INDEX hosts_status;
  DROP INDEX hosts_user;
  CREATE INDEX agents_listing ON agents (created_at, id);
  CREATE INDEX agents_status_listing ON agents (status, created_at, id);
  CREATE INDEX agents_host_listing ON agents (host_id, created_at, id);
  CREATE INDEX agents_user_listing ON agents (user_id, created_at, id);
  DROP INDEX agents_status;
  DROP INDEX agents_user;
  CREATE INDEX grants_agent_listing ON grants (agent_id, created_at);
  CREATE INDEX grants_approval ON grants (approval_id);
  CREATE INDEX approvals_listing ON approvals (created_at, id);
  CREATE INDEX approvals_status_listing ON approvals (status, created_at, id);
  CREATE INDEX approvals_agent_listing ON approvals (agent_id, created_at, id);
  CREATE INDEX approvals_deadline ON approvals (status, expires_at);
  DROP INDEX approvals_status;
  DROP INDEX approvals_agent;
  CREATE INDEX async_jobs_agent ON async_jobs (agent_id);
  CREATE INDEX passkeys_user_listing ON passkeys (user_id, created_at, id);
  DROP INDEX passkeys_user;
  `,
  // 16 (issue 13): what the approval pages kept in memory, now stored, so that it survives a
  // restart and is shared by the replicas of one database: pending OIDC sign-ins (by the hash of
  // their state), WebAuthn challenges (by the hash of the challenge; id gives the issue order an
  // owner's oldest is evicted by) and the TOTP steps used (a second use fails on the primary key).
  // Each is swept along its expiry index.
  `
  CREATE TABLE oidc_pending (
    state_hash TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    return_to TEXT NOT NULL,
    fresh INTEGER NOT NULL,
    browser_hash TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX oidc_pending_expiry ON oidc_pending (expires_at);
  CREATE TABLE webauthn_challenges (
    id INTEGER PRIMARY KEY,
    challenge_hash TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    data TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX webauthn_challenges_owner ON webauthn_challenges (owner, id);
  CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);
  CREATE TABLE totp_steps (
    user_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    keep_until INTEGER NOT NULL,
    PRIMARY KEY (user_id, step)
  ) STRICT;
  CREATE INDEX totp_steps_expiry ON totp_steps (keep_until);
  `,
  // 17: an operator removing a lost passkey ends that user's sessions (admin passkeys remove).
  `
  CREATE INDEX sessions_user ON sessions (user_id);
  `,
  // 18: the one-time code an operator gives a person for their first passkey
  // (sign_in.first_passkey: operator_code): one per user, only its SHA-256, used once.
  `
  CREATE TABLE passkey_enrolment_codes (
    user_id TEXT PRIMARY KEY,
    code_hash TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT, WITHOUT ROWID;
  `,
  // 19: the maintenance sweep deletes enrolment codes past their expiry, oldest first.
  `
  CREATE INDEX passkey_enrolment_codes_expiry ON passkey_enrolment_codes (expires_at);
  `,
  // 20: retention (§9.2, §9.5) deletes closed approval requests, oldest decision first. Pending
  // ones have no decided_at, so the range never reaches them.
  `
  CREATE INDEX approvals_decided ON approvals (decided_at);
  `,
  // 21: a password session keeps a digest of the credentials it was started with, so a restart
  // with a changed password_hash or totp_secret ends it (config/sign-in.ts credentialTag).
  `
  ALTER TABLE sessions ADD COLUMN credential_tag TEXT;
  `,
  // 22: host keys rotated away (§5.9), so that a policy `hosts` entry still naming one creates no
  // new host at the next start-up. No foreign key: the pending cleanup may delete the host (§10.9),
  // and its old key must stay retired.
  `
  CREATE TABLE retired_host_keys (
    thumbprint TEXT PRIMARY KEY,
    host_id TEXT NOT NULL,
    retired_at INTEGER NOT NULL
  ) STRICT, WITHOUT ROWID;
  `,
  // 23: what the policy granted without asking when drift last committed (protocol/drift.ts), so
  // that a restart with a changed policy sends the grants it no longer gives to a person, as a
  // reload does. One row.
  `
  CREATE TABLE applied_policy_grants (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    grants TEXT NOT NULL
  ) STRICT;
  `,
  // 24: an agent's async jobs in creation order, so that forgetting those past its newest 1,000
  // (protocol/async-jobs.ts) walks the index rather than sorting them.
  `
  DROP INDEX async_jobs_agent;
  CREATE INDEX async_jobs_agent ON async_jobs (agent_id, created_at, id);
  `,
];
