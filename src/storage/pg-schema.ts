/**
 * The PostgreSQL schema (issue 13), as versioned migrations recorded in `schema_migrations`.
 * Migration 1 is the final shape of SQLite's migrations 1–15 (migrations.ts) at once, since no
 * PostgreSQL database predates it; later changes append a migration here, as they do there.
 *
 * Choices, and why:
 * - Times are `bigint` milliseconds, as in SQLite; the pool parses int8 to a JS number (all values
 *   are below 2^53).
 * - JSON is `json`, not `jsonb`: no statement looks inside it, and `json` keeps the text as given:
 *   key order (an upstream's result reaches the agent as the upstream wrote it; arguments show in
 *   the agent's order) and `\u0000` escapes, which jsonb refuses (a failed write for a result
 *   that merely contains one). It has no equality operator, so no statement may UNION or DISTINCT
 *   over whole rows.
 * - Every identifier and key is `text COLLATE "C"`: bytewise order, as SQLite's, so keyset pages
 *   (… , id) and tie-breaks agree with it whatever the database's default collation.
 * - `seq` (agents, grants): the insertion order SQLite's rowid gives, for listings that break
 *   ties of `created_at` by it (an agent's grants, a user's agents).
 * - The same indexes as SQLite's migration 15: every listing a range of (filter…, created_at,
 *   id), every foreign key a cascade follows indexed (test/unit/storage/pg-query-plans.test.ts).
 */
import type { ClientBase } from 'pg';
import { UserError } from '../errors.js';

const ID = 'text COLLATE "C"';

export const PG_MIGRATIONS: readonly string[] = [
  // 1: the §3 data model, approvals, activity, async jobs, sessions, the inbox's openers,
  // passkeys and per-call approvals: SQLite's migrations 1–15.
  `
  CREATE TABLE hosts (
    id ${ID} PRIMARY KEY,
    thumbprint ${ID} NOT NULL UNIQUE,
    public_jwk json NOT NULL,
    name text,
    user_id ${ID},
    default_capabilities json NOT NULL DEFAULT '[]',
    status text NOT NULL CHECK (status IN ('active', 'pending', 'revoked', 'rejected')),
    pre_registered boolean NOT NULL DEFAULT false,
    admitted_by_policy boolean NOT NULL DEFAULT false,
    registered_ip text,
    registered_user_agent text,
    jwks_url ${ID},
    activated_at bigint,
    last_used_at bigint,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
  );
  CREATE UNIQUE INDEX hosts_jwks_url ON hosts (jwks_url) WHERE jwks_url IS NOT NULL;
  CREATE INDEX hosts_admitted_by_policy ON hosts (admitted_by_policy, status);
  CREATE INDEX hosts_listing ON hosts (created_at, id);
  CREATE INDEX hosts_status_listing ON hosts (status, created_at, id);
  CREATE INDEX hosts_user_listing ON hosts (user_id, created_at, id);

  CREATE TABLE agents (
    id ${ID} PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    host_id ${ID} NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    user_id ${ID},
    name text NOT NULL,
    public_jwk json NOT NULL,
    key_thumbprint ${ID} NOT NULL,
    jwks_url text,
    jwks_kid text,
    mode text NOT NULL CHECK (mode IN ('delegated', 'autonomous')),
    status text NOT NULL
      CHECK (status IN ('pending', 'active', 'expired', 'revoked', 'rejected', 'claimed')),
    last_used_at bigint,
    activated_at bigint,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    UNIQUE (host_id, key_thumbprint)
  );
  CREATE INDEX agents_listing ON agents (created_at, id);
  CREATE INDEX agents_status_listing ON agents (status, created_at, id);
  CREATE INDEX agents_host_listing ON agents (host_id, created_at, id);
  CREATE INDEX agents_user_listing ON agents (user_id, created_at, id);

  CREATE TABLE approvals (
    id ${ID} PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('registration', 'capability_request', 'reactivation')),
    agent_id ${ID} NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    host_id ${ID} NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    user_code ${ID} NOT NULL UNIQUE,
    method text NOT NULL,
    login_hint ${ID},
    binding_message text,
    reason text,
    capabilities json NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    decided_at bigint,
    decided_by text
  );
  CREATE INDEX approvals_host ON approvals (host_id, status);
  CREATE INDEX approvals_login_hint ON approvals (login_hint, status, created_at);
  CREATE INDEX approvals_listing ON approvals (created_at, id);
  CREATE INDEX approvals_status_listing ON approvals (status, created_at, id);
  CREATE INDEX approvals_agent_listing ON approvals (agent_id, created_at, id);
  CREATE INDEX approvals_deadline ON approvals (status, expires_at);

  CREATE TABLE grants (
    id ${ID} PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    agent_id ${ID} NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    capability ${ID} NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'pending', 'denied', 'revoked')),
    constraints json,
    proposed_constraints json,
    approved_constraints json,
    granted_by text,
    denied_by text,
    reason text,
    expires_at bigint,
    approval_id ${ID} REFERENCES approvals (id) ON DELETE SET NULL,
    capability_version ${ID},
    uses bigint NOT NULL DEFAULT 0 CHECK (uses >= 0),
    last_used_at bigint,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    UNIQUE (agent_id, capability)
  );
  CREATE INDEX grants_agent_listing ON grants (agent_id, created_at, seq);
  CREATE INDEX grants_approval ON grants (approval_id);
  CREATE INDEX grants_version ON grants (capability, status, capability_version);

  CREATE TABLE activity (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at bigint NOT NULL,
    type text NOT NULL,
    agent_id ${ID},
    host_id ${ID},
    user_id ${ID},
    capability ${ID},
    outcome text NOT NULL,
    detail json,
    jti text,
    latency_ms double precision,
    upstream_status integer
  );
  CREATE INDEX activity_agent ON activity (agent_id, id);
  CREATE INDEX activity_host ON activity (host_id, id);
  CREATE INDEX activity_capability ON activity (capability, id);
  CREATE INDEX activity_at ON activity (at, id);

  CREATE TABLE async_jobs (
    id ${ID} PRIMARY KEY,
    agent_id ${ID} NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    capability text NOT NULL,
    upstream_url text NOT NULL,
    status_capability text,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX async_jobs_expiry ON async_jobs (expires_at);
  CREATE INDEX async_jobs_agent ON async_jobs (agent_id);

  CREATE TABLE sessions (
    id_hash ${ID} PRIMARY KEY,
    user_id ${ID} NOT NULL,
    auth_method text NOT NULL
      CHECK (auth_method IN ('password', 'password+totp', 'trusted_header', 'oidc', 'passkey')),
    authenticated_at bigint NOT NULL,
    acr text,
    amr json,
    csrf_token text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX sessions_expiry ON sessions (expires_at);

  CREATE TABLE approval_openers (
    approval_id ${ID} NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    user_id ${ID} NOT NULL,
    opened_at bigint NOT NULL,
    PRIMARY KEY (user_id, approval_id)
  );
  CREATE INDEX approval_openers_approval ON approval_openers (approval_id);

  CREATE TABLE passkeys (
    id ${ID} PRIMARY KEY,
    user_id ${ID} NOT NULL,
    user_handle text NOT NULL,
    public_key bytea NOT NULL,
    counter bigint NOT NULL CHECK (counter >= 0),
    transports json NOT NULL DEFAULT '[]',
    name text NOT NULL,
    created_at bigint NOT NULL,
    last_used_at bigint
  );
  CREATE INDEX passkeys_user_listing ON passkeys (user_id, created_at, id);

  CREATE TABLE per_call_approvals (
    id ${ID} PRIMARY KEY,
    agent_id ${ID} NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    host_id ${ID} NOT NULL,
    user_id ${ID},
    capability text NOT NULL,
    arguments json NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'executing', 'completed', 'failed')),
    result json,
    error json,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    decided_at bigint,
    decided_by text,
    keep_until bigint NOT NULL
  );
  CREATE INDEX per_call_agent ON per_call_approvals (agent_id, status, expires_at);
  CREATE INDEX per_call_addressee ON per_call_approvals (user_id, status, created_at, id);
  CREATE INDEX per_call_listing ON per_call_approvals (created_at, id);
  CREATE INDEX per_call_status ON per_call_approvals (status, created_at, id);
  CREATE INDEX per_call_deadline ON per_call_approvals (status, expires_at);
  CREATE INDEX per_call_keep ON per_call_approvals (keep_until);
  `,
  // 2: what replicas share beyond the §3 data model (issue 13). seen_jtis: every accepted JWT id
  // per identity until its effective window ends (§4.6, §8.2), refused again by every replica and
  // after a restart; swept by expiry. rate_buckets: the §8.13 token buckets (util/rate-limit.ts's
  // arithmetic, in SQL: pg-shared.ts). UNLOGGED: no WAL per request; a crash of the database
  // empties it, which grants every client a fresh burst, nothing worse. `admitted` is the last
  // take's answer (its RETURNING reads it). A bucket full again (`full_at` passed) is the same as
  // none: swept.
  `
  CREATE TABLE seen_jtis (
    identity ${ID} NOT NULL,
    jti ${ID} NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (identity, jti)
  );
  CREATE INDEX seen_jtis_expiry ON seen_jtis (expires_at);

  CREATE UNLOGGED TABLE rate_buckets (
    key ${ID} PRIMARY KEY,
    credit bigint NOT NULL,
    at bigint NOT NULL,
    window_ms bigint NOT NULL,
    admitted boolean NOT NULL,
    full_at bigint NOT NULL
  );
  CREATE INDEX rate_buckets_full ON rate_buckets (full_at);
  `,
  // 3: what the approval pages kept per process (issue 13), so that a sign-in begun on one replica
  // finishes on another: pending OIDC sign-ins by the hash of their state, WebAuthn challenges by
  // the hash of the challenge (id: issue order, for an owner's oldest), the TOTP steps used (a
  // second use fails on the primary key). Each is swept along its expiry index.
  `
  CREATE TABLE oidc_pending (
    state_hash ${ID} PRIMARY KEY,
    nonce text NOT NULL,
    verifier text NOT NULL,
    return_to text NOT NULL,
    fresh boolean NOT NULL,
    browser_hash ${ID} NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX oidc_pending_expiry ON oidc_pending (expires_at);
  CREATE TABLE webauthn_challenges (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    challenge_hash ${ID} NOT NULL UNIQUE,
    owner ${ID} NOT NULL,
    data text NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX webauthn_challenges_owner ON webauthn_challenges (owner, id);
  CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);
  CREATE TABLE totp_steps (
    user_id ${ID} NOT NULL,
    step bigint NOT NULL,
    keep_until bigint NOT NULL,
    PRIMARY KEY (user_id, step)
  );
  CREATE INDEX totp_steps_expiry ON totp_steps (keep_until);
  `,
  // 4: an operator removing a lost passkey ends that user's sessions (admin passkeys remove).
  `
  CREATE INDEX sessions_user ON sessions (user_id);
  `,
  // 5: the one-time code an operator gives a person for their first passkey
  // (sign_in.first_passkey: operator_code): one per user, only its SHA-256, used once.
  `
  CREATE TABLE passkey_enrolment_codes (
    user_id ${ID} PRIMARY KEY,
    code_hash ${ID} NOT NULL,
    expires_at bigint NOT NULL
  );
  `,
  // 6: the maintenance sweep deletes enrolment codes past their expiry, oldest first.
  `
  CREATE INDEX passkey_enrolment_codes_expiry ON passkey_enrolment_codes (expires_at);
  `,
  // 7: retention (§9.2, §9.5) deletes closed approval requests, oldest decision first (SQLite's 20).
  `
  CREATE INDEX approvals_decided ON approvals (decided_at);
  `,
  // 8: a password session keeps a digest of the credentials it was started with (SQLite's 21).
  `
  ALTER TABLE sessions ADD COLUMN credential_tag text;
  `,
  // 9: the usage flushes applied (usage.ts), so that one retried after its commit's answer was
  // lost is not added twice; kept a day (pg-store.ts touch). SQLite needs none: its commit's
  // outcome is always known to the process.
  `
  CREATE TABLE applied_usage_flushes (
    id text PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX applied_usage_flushes_at ON applied_usage_flushes (at);
  `,
  // 10: host keys rotated away (§5.9; SQLite's 22). No foreign key: the pending cleanup may delete
  // the host (§10.9), and its old key must stay retired.
  `
  CREATE TABLE retired_host_keys (
    thumbprint ${ID} PRIMARY KEY,
    host_id ${ID} NOT NULL,
    retired_at bigint NOT NULL
  );
  `,
  // 11: what the policy granted without asking when drift last committed (SQLite's 23). One row.
  `
  CREATE TABLE applied_policy_grants (
    id smallint PRIMARY KEY CHECK (id = 1),
    grants text NOT NULL
  );
  `,
  // 12: an agent's async jobs in creation order (SQLite's 24).
  `
  DROP INDEX async_jobs_agent;
  CREATE INDEX async_jobs_agent ON async_jobs (agent_id, created_at, id);
  `,
];

/** Any fixed number: the key of the advisory lock replicas take to migrate one at a time. */
const MIGRATION_LOCK = 0x6161_7000_0013;

/**
 * Applies the migrations this database lacks, in one transaction under a transaction-level
 * advisory lock: replicas starting at once migrate one after another (the later ones find nothing
 * to do), and a replica that dies midway leaves the schema as it was (the lock goes with it).
 * Refuses a database migrated by a newer proxy.
 */
export async function migratePg(
  client: ClientBase,
  migrations: readonly string[] = PG_MIGRATIONS,
): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)',
    );
    const { rows } = await client.query<{ version: number | null }>(
      'SELECT max(version) AS version FROM schema_migrations',
    );
    const current = rows[0]?.version ?? 0;
    if (current > migrations.length) {
      throw new UserError(
        `database schema version ${current} is newer than this proxy supports (${migrations.length}); upgrade the proxy`,
      );
    }
    for (let version = current; version < migrations.length; version++) {
      await client.query(migrations[version] as string);
      await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', [
        version + 1,
        Date.now(),
      ]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
