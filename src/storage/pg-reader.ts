/**
 * The PostgreSQL store's reads (StoreReader), over a query function: the pool's for the store,
 * a transaction's connection for its writer. Each statement is one range of an index
 * (pg-schema.ts; test/unit/storage/pg-query-plans.test.ts explains each).
 */
import { activityQuery, listing } from './pg-queries.js';
import { fromRow, type Row, type Statement } from './pg-rows.js';
import {
  ACTIVITY,
  AGENT,
  APPROVAL,
  ASYNC_JOB,
  GRANT,
  HOST,
  PASSKEY,
  PER_CALL,
  type Columns,
} from './sqlite-columns.js';
import type {
  ActivityQuery,
  ActivityRecord,
  AgentRecord,
  AgentStatus,
  ApprovalRecord,
  ApprovalStatus,
  AsyncJobRecord,
  GrantRecord,
  HostRecord,
  HostStatus,
  ListingPage,
  PasskeyRecord,
  PerCallQuery,
  PerCallRecord,
  RetiredHostKey,
  StoreReader,
} from './types.js';

export interface QueryResult {
  readonly rows: Row[];
  readonly rowCount: number | null;
  readonly command: string;
}

/**
 * Sends one statement. `name` makes it a prepared statement, parsed and planned once per
 * connection: for the few sent on every request (pg-shared.ts), where planning costs more than
 * running them.
 */
export type Query = (sql: string, params?: readonly unknown[], name?: string) => Promise<QueryResult>;

/** The rows of a user's agents: linked to the user, or under a host linked to the user. */
const OF_USER =
  // `= ANY (ARRAY(…))`: the user's hosts first (an InitPlan), so each side of the OR is an index
  // search (agents_user_listing, agents_host_listing), merged; an IN (subquery) would be a filter
  // over every agent.
  'user_id = $1 OR host_id = ANY (ARRAY(SELECT id FROM hosts WHERE user_id = $1))';

export class PgReader implements StoreReader {
  constructor(protected readonly query: Query) {}

  protected async one<T>(
    columns: Columns<T>,
    sql: string,
    params: readonly unknown[],
  ): Promise<T | undefined> {
    const { rows } = await this.query(sql, params);
    return rows[0] === undefined ? undefined : fromRow(columns, rows[0]);
  }

  protected async many<T>(columns: Columns<T>, { sql, params }: Statement): Promise<T[]> {
    const { rows } = await this.query(sql, params);
    return rows.map((r) => fromRow(columns, r));
  }

  protected async count(sql: string, params: readonly unknown[]): Promise<number> {
    const { rows } = await this.query(sql, params);
    return Number(rows[0]?.n ?? 0);
  }

  host(id: string): Promise<HostRecord | undefined> {
    return this.one(HOST, 'SELECT * FROM hosts WHERE id = $1', [id]);
  }

  hostByThumbprint(thumbprint: string): Promise<HostRecord | undefined> {
    return this.one(HOST, 'SELECT * FROM hosts WHERE thumbprint = $1', [thumbprint]);
  }

  hostByJwksUrl(url: string): Promise<HostRecord | undefined> {
    return this.one(HOST, 'SELECT * FROM hosts WHERE jwks_url = $1', [url]);
  }

  async hosts(filter: { status?: HostStatus; userId?: string } & ListingPage = {}): Promise<HostRecord[]> {
    return this.many(HOST, listing('hosts', { status: filter.status, user_id: filter.userId }, filter));
  }

  async appliedPolicyGrants(): Promise<string | undefined> {
    const { rows } = await this.query('SELECT grants FROM applied_policy_grants WHERE id = 1', []);
    const row = rows[0];
    return row === undefined ? undefined : String(row.grants);
  }

  async retiredHostKey(thumbprint: string): Promise<RetiredHostKey | undefined> {
    const { rows } = await this.query(
      'SELECT host_id, retired_at FROM retired_host_keys WHERE thumbprint = $1',
      [thumbprint],
    );
    const row = rows[0];
    return row && { thumbprint, hostId: String(row.host_id), retiredAt: Number(row.retired_at) };
  }

  agent(id: string): Promise<AgentRecord | undefined> {
    return this.one(AGENT, 'SELECT * FROM agents WHERE id = $1', [id]);
  }

  agentByKey(hostId: string, keyThumbprint: string): Promise<AgentRecord | undefined> {
    return this.one(AGENT, 'SELECT * FROM agents WHERE host_id = $1 AND key_thumbprint = $2', [
      hostId,
      keyThumbprint,
    ]);
  }

  async agents(
    filter: { hostId?: string; status?: AgentStatus; userId?: string } & ListingPage = {},
  ): Promise<AgentRecord[]> {
    const by = { host_id: filter.hostId, status: filter.status, user_id: filter.userId };
    return this.many(AGENT, listing('agents', by, filter));
  }

  grants(agentId: string): Promise<GrantRecord[]> {
    return this.many(GRANT, {
      sql: 'SELECT * FROM grants WHERE agent_id = $1 ORDER BY created_at, seq',
      params: [agentId],
    });
  }

  grantsOffVersion(capability: string, version: string): Promise<GrantRecord[]> {
    return this.many(GRANT, {
      sql: `SELECT * FROM grants WHERE capability = $1 AND status = 'active'
        AND (capability_version IS NULL OR capability_version <> $2)`,
      params: [capability, version],
    });
  }

  async grantedCapabilities(capabilities: readonly string[]): Promise<Set<string>> {
    const { rows } = await this.query(
      `SELECT DISTINCT capability FROM grants WHERE status = 'active' AND capability = ANY($1::text[])`,
      [capabilities],
    );
    return new Set(rows.map((r) => String(r.capability)));
  }

  approval(id: string): Promise<ApprovalRecord | undefined> {
    return this.one(APPROVAL, 'SELECT * FROM approvals WHERE id = $1', [id]);
  }

  approvalByUserCode(userCode: string): Promise<ApprovalRecord | undefined> {
    return this.one(APPROVAL, 'SELECT * FROM approvals WHERE user_code = $1', [userCode]);
  }

  async approvals(
    filter: { status?: ApprovalStatus; agentId?: string } & ListingPage = {},
  ): Promise<ApprovalRecord[]> {
    return this.many(
      APPROVAL,
      listing('approvals', { status: filter.status, agent_id: filter.agentId }, filter),
    );
  }

  overdueApprovals(now: number, limit: number): Promise<ApprovalRecord[]> {
    return this.many(APPROVAL, {
      sql: "SELECT * FROM approvals WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT $2",
      params: [now, limit],
    });
  }

  countHosts(status: HostStatus): Promise<number> {
    return this.count('SELECT count(*) AS n FROM hosts WHERE status = $1', [status]);
  }

  countPolicyAdmittedHosts(): Promise<number> {
    return this.count(
      "SELECT count(*) AS n FROM hosts WHERE admitted_by_policy AND status = 'active' AND user_id IS NULL",
      [],
    );
  }

  countOpenApprovals(hostId: string, now: number): Promise<number> {
    return this.count(
      `SELECT (SELECT count(*) FROM approvals WHERE host_id = $1 AND status = 'pending' AND expires_at > $2)
        + (SELECT count(*) FROM agents a JOIN per_call_approvals p ON p.agent_id = a.id
            WHERE a.host_id = $1 AND p.status = 'pending' AND p.expires_at > $2) AS n`,
      [hostId, now],
    );
  }

  countPendingApprovals(now: number): Promise<number> {
    return this.count("SELECT count(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > $1", [
      now,
    ]);
  }

  async activity(query: ActivityQuery): Promise<ActivityRecord[]> {
    return this.many(ACTIVITY, activityQuery(query));
  }

  asyncJob(id: string): Promise<AsyncJobRecord | undefined> {
    return this.one(ASYNC_JOB, 'SELECT * FROM async_jobs WHERE id = $1', [id]);
  }

  agentsOfUser(
    userId: string,
    page: { readonly limit: number; readonly offset: number },
  ): Promise<AgentRecord[]> {
    return this.many(AGENT, {
      sql: `SELECT * FROM agents WHERE ${OF_USER} ORDER BY created_at DESC, seq DESC LIMIT $2 OFFSET $3`,
      params: [userId, page.limit, page.offset],
    });
  }

  countAgentsOfUser(userId: string): Promise<number> {
    return this.count(`SELECT count(*) AS n FROM agents WHERE ${OF_USER}`, [userId]);
  }

  perCall(id: string): Promise<PerCallRecord | undefined> {
    return this.one(PER_CALL, 'SELECT * FROM per_call_approvals WHERE id = $1', [id]);
  }

  perCallsAddressedTo(userId: string | null, now: number, limit: number): Promise<PerCallRecord[]> {
    // Two statements, each one range of per_call_addressee (user_id, status, created_at, id).
    const open = "status = 'pending' AND expires_at > $1 ORDER BY created_at DESC, id DESC LIMIT $2";
    return userId === null
      ? this.many(PER_CALL, {
          sql: `SELECT * FROM per_call_approvals WHERE user_id IS NULL AND ${open}`,
          params: [now, limit],
        })
      : this.many(PER_CALL, {
          sql: `SELECT * FROM per_call_approvals WHERE user_id = $3 AND ${open}`,
          params: [now, limit, userId],
        });
  }

  async perCalls(query: PerCallQuery): Promise<PerCallRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [query.limit];
    if (query.status !== undefined) {
      params.push(query.status);
      where.push(`status = $${params.length}`);
    }
    if (query.before) {
      params.push(query.before.createdAt, query.before.id);
      where.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`);
    }
    const filter = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    return this.many(PER_CALL, {
      sql: `SELECT * FROM per_call_approvals${filter} ORDER BY created_at DESC, id DESC LIMIT $1`,
      params,
    });
  }

  countOpenPerCalls(agentId: string, now: number): Promise<number> {
    return this.count(
      "SELECT count(*) AS n FROM per_call_approvals WHERE agent_id = $1 AND status = 'pending' AND expires_at > $2",
      [agentId, now],
    );
  }

  pendingPerCallsOf(agentId: string, limit: number): Promise<PerCallRecord[]> {
    return this.many(PER_CALL, {
      sql: `SELECT * FROM per_call_approvals WHERE agent_id = $1 AND status = 'pending'
        ORDER BY expires_at LIMIT $2`,
      params: [agentId, limit],
    });
  }

  overduePerCalls(now: number, limit: number): Promise<PerCallRecord[]> {
    return this.many(PER_CALL, {
      sql: `SELECT * FROM per_call_approvals WHERE status = 'pending' AND expires_at <= $1
        ORDER BY expires_at LIMIT $2`,
      params: [now, limit],
    });
  }

  // As SQLite's (sqlite-store.ts): the range of executing rows in the status index.
  abandonedPerCalls(claimedBefore: number, limit: number): Promise<PerCallRecord[]> {
    return this.many(PER_CALL, {
      sql: `SELECT * FROM per_call_approvals WHERE status = 'executing' AND created_at <= $1
        AND coalesce(decided_at, created_at) <= $1 ORDER BY created_at, id LIMIT $2`,
      params: [claimedBefore, limit],
    });
  }

  passkey(id: string): Promise<PasskeyRecord | undefined> {
    return this.one(PASSKEY, 'SELECT * FROM passkeys WHERE id = $1', [id]);
  }

  passkeys(userId: string): Promise<PasskeyRecord[]> {
    return this.many(PASSKEY, {
      sql: 'SELECT * FROM passkeys WHERE user_id = $1 ORDER BY created_at, id',
      params: [userId],
    });
  }

  async hasEnrolmentCode(userId: string, codeHash: string, now: number): Promise<boolean> {
    const { rows } = await this.query(
      'SELECT 1 FROM passkey_enrolment_codes WHERE user_id = $1 AND code_hash = $2 AND expires_at > $3',
      [userId, codeHash, now],
    );
    return rows.length > 0;
  }
}
