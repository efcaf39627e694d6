/**
 * How the SQLite store maps records to rows: each field's column, and whether it is stored as JSON
 * or a 0/1 (split from sqlite-store.ts, which keeps the statements).
 */
import type {
  ActivityRecord,
  AgentRecord,
  ApprovalRecord,
  AsyncJobRecord,
  GrantRecord,
  HostRecord,
  PasskeyRecord,
  Patch,
  PerCallRecord,
  SessionRecord,
} from './types.js';

export type Row = Record<string, unknown>;

/** How one record field maps to a column: its name and whether it is stored as JSON or a 0/1. */
export interface Column {
  readonly column: string;
  readonly kind?: 'json' | 'bool';
}
export type Columns<T> = { readonly [K in keyof T]-?: Column };

export const HOST: Columns<HostRecord> = {
  id: { column: 'id' },
  thumbprint: { column: 'thumbprint' },
  publicJwk: { column: 'public_jwk', kind: 'json' },
  name: { column: 'name' },
  userId: { column: 'user_id' },
  defaultCapabilities: { column: 'default_capabilities', kind: 'json' },
  status: { column: 'status' },
  preRegistered: { column: 'pre_registered', kind: 'bool' },
  admittedByPolicy: { column: 'admitted_by_policy', kind: 'bool' },
  registeredIp: { column: 'registered_ip' },
  registeredUserAgent: { column: 'registered_user_agent' },
  jwksUrl: { column: 'jwks_url' },
  activatedAt: { column: 'activated_at' },
  lastUsedAt: { column: 'last_used_at' },
  createdAt: { column: 'created_at' },
  updatedAt: { column: 'updated_at' },
};

export const AGENT: Columns<AgentRecord> = {
  id: { column: 'id' },
  hostId: { column: 'host_id' },
  userId: { column: 'user_id' },
  name: { column: 'name' },
  publicJwk: { column: 'public_jwk', kind: 'json' },
  keyThumbprint: { column: 'key_thumbprint' },
  jwksUrl: { column: 'jwks_url' },
  jwksKid: { column: 'jwks_kid' },
  mode: { column: 'mode' },
  status: { column: 'status' },
  lastUsedAt: { column: 'last_used_at' },
  activatedAt: { column: 'activated_at' },
  createdAt: { column: 'created_at' },
  updatedAt: { column: 'updated_at' },
};

export const GRANT: Columns<GrantRecord> = {
  id: { column: 'id' },
  agentId: { column: 'agent_id' },
  capability: { column: 'capability' },
  status: { column: 'status' },
  constraints: { column: 'constraints', kind: 'json' },
  proposedConstraints: { column: 'proposed_constraints', kind: 'json' },
  approvedConstraints: { column: 'approved_constraints', kind: 'json' },
  grantedBy: { column: 'granted_by' },
  deniedBy: { column: 'denied_by' },
  reason: { column: 'reason' },
  expiresAt: { column: 'expires_at' },
  approvalId: { column: 'approval_id' },
  capabilityVersion: { column: 'capability_version' },
  createdAt: { column: 'created_at' },
  updatedAt: { column: 'updated_at' },
};

export const APPROVAL: Columns<ApprovalRecord> = {
  id: { column: 'id' },
  kind: { column: 'kind' },
  agentId: { column: 'agent_id' },
  hostId: { column: 'host_id' },
  userCode: { column: 'user_code' },
  method: { column: 'method' },
  loginHint: { column: 'login_hint' },
  bindingMessage: { column: 'binding_message' },
  reason: { column: 'reason' },
  capabilities: { column: 'capabilities', kind: 'json' },
  status: { column: 'status' },
  createdAt: { column: 'created_at' },
  expiresAt: { column: 'expires_at' },
  decidedAt: { column: 'decided_at' },
  decidedBy: { column: 'decided_by' },
};

export const ACTIVITY: Columns<Required<ActivityRecord>> = {
  id: { column: 'id' },
  at: { column: 'at' },
  type: { column: 'type' },
  agentId: { column: 'agent_id' },
  hostId: { column: 'host_id' },
  userId: { column: 'user_id' },
  capability: { column: 'capability' },
  outcome: { column: 'outcome' },
  detail: { column: 'detail', kind: 'json' },
  jti: { column: 'jti' },
  latencyMs: { column: 'latency_ms' },
  upstreamStatus: { column: 'upstream_status' },
};

export const ASYNC_JOB: Columns<AsyncJobRecord> = {
  id: { column: 'id' },
  agentId: { column: 'agent_id' },
  capability: { column: 'capability' },
  upstreamUrl: { column: 'upstream_url' },
  statusCapability: { column: 'status_capability' },
  createdAt: { column: 'created_at' },
  expiresAt: { column: 'expires_at' },
};

export const SESSION: Columns<SessionRecord> = {
  idHash: { column: 'id_hash' },
  userId: { column: 'user_id' },
  authMethod: { column: 'auth_method' },
  authenticatedAt: { column: 'authenticated_at' },
  acr: { column: 'acr' },
  amr: { column: 'amr', kind: 'json' },
  credentialTag: { column: 'credential_tag' },
  csrfToken: { column: 'csrf_token' },
  createdAt: { column: 'created_at' },
  expiresAt: { column: 'expires_at' },
};

export const PASSKEY: Columns<PasskeyRecord> = {
  id: { column: 'id' },
  userId: { column: 'user_id' },
  userHandle: { column: 'user_handle' },
  publicKey: { column: 'public_key' },
  counter: { column: 'counter' },
  transports: { column: 'transports', kind: 'json' },
  name: { column: 'name' },
  createdAt: { column: 'created_at' },
  lastUsedAt: { column: 'last_used_at' },
};

export const PER_CALL: Columns<PerCallRecord> = {
  id: { column: 'id' },
  agentId: { column: 'agent_id' },
  hostId: { column: 'host_id' },
  userId: { column: 'user_id' },
  capability: { column: 'capability' },
  arguments: { column: 'arguments', kind: 'json' },
  status: { column: 'status' },
  result: { column: 'result', kind: 'json' },
  error: { column: 'error', kind: 'json' },
  createdAt: { column: 'created_at' },
  expiresAt: { column: 'expires_at' },
  decidedAt: { column: 'decided_at' },
  decidedBy: { column: 'decided_by' },
  keepUntil: { column: 'keep_until' },
};

/** better-sqlite3 returns BLOBs as Buffers; WebAuthn verification wants a plain Uint8Array. */
export function passkeyFromRow(p: PasskeyRecord | undefined): PasskeyRecord | undefined {
  return p && { ...p, publicKey: new Uint8Array(p.publicKey) };
}

export function toColumnValue(value: unknown, kind: Column['kind']): unknown {
  if (value === undefined || value === null) return null;
  if (kind === 'json') return JSON.stringify(value);
  if (kind === 'bool') return value ? 1 : 0;
  return value;
}

export function fromRow<T>(columns: Columns<T>, row: Row | undefined): T | undefined {
  if (!row) return undefined;
  const out: Record<string, unknown> = {};
  for (const [field, { column, kind }] of Object.entries<Column>(columns)) {
    const raw = row[column];
    out[field] =
      raw === null || raw === undefined
        ? null
        : kind === 'json'
          ? JSON.parse(raw as string)
          : kind === 'bool'
            ? raw === 1
            : raw;
  }
  return out as T;
}

/** `INSERT INTO table (…) VALUES (@…)` for the named parameters `names` (one statement per shape). */
export function insertSql(table: string, names: readonly string[]): string {
  return `INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map((n) => `@${n}`).join(', ')})`;
}

/** Named parameters for every column of a record. */
export function params<T>(columns: Columns<T>, record: T): Row {
  const out: Row = {};
  for (const [field, { column, kind }] of Object.entries<Column>(columns)) {
    out[column] = toColumnValue((record as Record<string, unknown>)[field], kind);
  }
  return out;
}

/**
 * The `SET` list of an UPDATE of `patch`'s defined fields (`@column` parameters, with their
 * values); undefined when it sets nothing. An unknown field is a bug, and throws.
 */
export function setClause<T>(
  table: string,
  columns: Columns<T>,
  patch: Patch<T>,
): { sql: string; values: Row } | undefined {
  const sets: string[] = [];
  const values: Row = {};
  for (const [field, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    const col = (columns as Record<string, Column | undefined>)[field];
    if (!col) throw new Error(`unknown field ${table}.${field}`);
    sets.push(`${col.column} = @${col.column}`);
    values[col.column] = toColumnValue(value, col.kind);
  }
  return sets.length === 0 ? undefined : { sql: sets.join(', '), values };
}
