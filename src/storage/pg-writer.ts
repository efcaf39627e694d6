/**
 * The PostgreSQL store's writer (StoreWriter): reads and writes on the one connection of a
 * `write` transaction (pg-store.ts), so they all commit or roll back together. It notes what it
 * changed that other replicas hold in memory (`changes`, pg-notify.ts): the store tells them once
 * the transaction commits.
 */
import { ChangeSet } from './pg-notify.js';
import { PgReader } from './pg-reader.js';
import { insertOf, updateOf, type Statement } from './pg-rows.js';
import { ACTIVITY, AGENT, APPROVAL, GRANT, HOST, PASSKEY, PER_CALL } from './sqlite-columns.js';
import type {
  ActivityRecord,
  AgentRecord,
  ApprovalRecord,
  GrantRecord,
  HostRecord,
  PasskeyRecord,
  Patch,
  PerCallRecord,
  PerCallStatus,
  RetiredHostKey,
  StoreWriter,
} from './types.js';

export class PgWriter extends PgReader implements StoreWriter {
  /** Hosts, agents and grants (the hot caches), approvals (notification streams) this attempt changed. */
  readonly changes = new ChangeSet();

  private async run(statement: Statement | undefined): Promise<number> {
    if (!statement) return 0;
    return (await this.query(statement.sql, statement.params)).rowCount ?? 0;
  }

  async insertHost(host: HostRecord): Promise<void> {
    this.changes.cache = true;
    await this.run(insertOf('hosts', HOST, host));
  }

  async updateHost(id: string, patch: Patch<HostRecord>): Promise<void> {
    this.changes.cache = true;
    await this.run(updateOf('hosts', HOST, patch, [['id', id]]));
  }

  async deleteHost(id: string): Promise<void> {
    this.changes.cache = true;
    await this.run({ sql: 'DELETE FROM hosts WHERE id = $1', params: [id] });
  }

  // Nothing for other replicas to drop: each replica's drift reads it in its own transaction.
  async putAppliedPolicyGrants(json: string): Promise<void> {
    await this.run({
      sql: `INSERT INTO applied_policy_grants (id, grants) VALUES (1, $1)
        ON CONFLICT (id) DO UPDATE SET grants = excluded.grants`,
      params: [json],
    });
  }

  // Nothing for other replicas to drop: no cache holds retired keys.
  async retireHostKey(key: RetiredHostKey): Promise<void> {
    await this.run({
      sql: `INSERT INTO retired_host_keys (thumbprint, host_id, retired_at) VALUES ($1, $2, $3)
        ON CONFLICT (thumbprint) DO UPDATE SET host_id = excluded.host_id, retired_at = excluded.retired_at`,
      params: [key.thumbprint, key.hostId, key.retiredAt],
    });
  }

  async insertAgent(agent: AgentRecord): Promise<void> {
    this.changes.cache = true;
    await this.run(insertOf('agents', AGENT, agent));
  }

  async updateAgent(id: string, patch: Patch<AgentRecord>): Promise<void> {
    this.changes.cache = true;
    await this.run(updateOf('agents', AGENT, patch, [['id', id]]));
  }

  async deleteAgent(id: string): Promise<void> {
    this.changes.cache = true;
    // Grants, approvals (and their openers), async jobs and per-call rows follow by cascade.
    await this.run({ sql: 'DELETE FROM agents WHERE id = $1', params: [id] });
  }

  async putGrant(grant: GrantRecord): Promise<void> {
    this.changes.cache = true;
    // One current grant per (agent, capability): a new request replaces a denied/revoked row.
    await this.run({
      sql: 'DELETE FROM grants WHERE agent_id = $1 AND capability = $2',
      params: [grant.agentId, grant.capability],
    });
    await this.run(insertOf('grants', GRANT, grant));
  }

  async insertGrant(grant: GrantRecord): Promise<void> {
    this.changes.cache = true;
    await this.run(insertOf('grants', GRANT, grant));
  }

  async updateGrant(id: string, patch: Patch<GrantRecord>): Promise<void> {
    this.changes.cache = true;
    await this.run(updateOf('grants', GRANT, patch, [['id', id]]));
  }

  async insertApproval(approval: ApprovalRecord): Promise<void> {
    await this.run(insertOf('approvals', APPROVAL, approval));
  }

  async updateApproval(id: string, patch: Patch<ApprovalRecord>): Promise<void> {
    this.changes.approvals.add(id);
    await this.run(updateOf('approvals', APPROVAL, patch, [['id', id]]));
  }

  async deleteApproval(id: string): Promise<void> {
    this.changes.approvals.add(id);
    await this.run({ sql: 'DELETE FROM approvals WHERE id = $1', params: [id] });
  }

  async appendActivity(record: ActivityRecord): Promise<void> {
    // The id is the table's identity, whatever the record says.
    await this.run(insertOf('activity', ACTIVITY, { ...record, id: 0 }, ['id']));
  }

  deleteAgentActivity(agentId: string, limit: number): Promise<number> {
    return this.run({
      sql: 'DELETE FROM activity WHERE id = ANY (ARRAY(SELECT id FROM activity WHERE agent_id = $1 ORDER BY id LIMIT $2))',
      params: [agentId, limit],
    });
  }

  async insertPerCall(record: PerCallRecord): Promise<void> {
    await this.run(insertOf('per_call_approvals', PER_CALL, record));
  }

  async updatePerCall(id: string, from: PerCallStatus, patch: Patch<PerCallRecord>): Promise<boolean> {
    const statement = updateOf('per_call_approvals', PER_CALL, patch, [
      ['id', id],
      ['status', from],
    ]);
    return (await this.run(statement)) > 0;
  }

  async deletePerCall(id: string): Promise<void> {
    await this.run({ sql: 'DELETE FROM per_call_approvals WHERE id = $1', params: [id] });
  }

  async insertPasskey(passkey: PasskeyRecord): Promise<void> {
    await this.run(insertOf('passkeys', PASSKEY, passkey));
  }

  async deletePasskey(id: string, userId: string): Promise<boolean> {
    return (
      (await this.run({ sql: 'DELETE FROM passkeys WHERE id = $1 AND user_id = $2', params: [id, userId] })) >
      0
    );
  }

  deleteSessionsOf(userId: string): Promise<number> {
    return this.run({ sql: 'DELETE FROM sessions WHERE user_id = $1', params: [userId] });
  }

  async putEnrolmentCode(userId: string, codeHash: string, expiresAt: number): Promise<void> {
    await this.run({
      sql: `INSERT INTO passkey_enrolment_codes (user_id, code_hash, expires_at) VALUES ($1, $2, $3)
        ON CONFLICT (user_id) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at`,
      params: [userId, codeHash, expiresAt],
    });
  }

  async takeEnrolmentCode(userId: string, codeHash: string, now: number): Promise<boolean> {
    const taken = await this.run({
      sql: 'DELETE FROM passkey_enrolment_codes WHERE user_id = $1 AND code_hash = $2 AND expires_at > $3',
      params: [userId, codeHash, now],
    });
    return taken > 0;
  }
}
