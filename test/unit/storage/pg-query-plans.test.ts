/**
 * Storage that scales, on PostgreSQL (issues 13, 17): every statement the PostgreSQL store sends
 * is served by an index. Each public method of Store and StoreWriter is driven against a real
 * server (the SQLite plan test's drive table, query-plan-calls.ts), every statement is captured
 * with its parameters (PgStore's onQuery), then explained with sequential scans disabled: a plan
 * that still scans a table growing with use has no index to use, and fails the test. So does a
 * statement given an owner (an agent, a host, a user) that does not find its rows through that
 * owner's index. A last test checks that every foreign key a cascade follows has an index.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgReader } from '../../../src/storage/pg-reader.js';
import { PgShared } from '../../../src/storage/pg-shared.js';
import { PgStore } from '../../../src/storage/pg-store.js';
import { PgWriter } from '../../../src/storage/pg-writer.js';
import type { Store, StoreWriter } from '../../../src/storage/types.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { SHARED_CALLS, STORE_CALLS, WRITER_CALLS } from './query-plan-calls.js';
import {
  NOW,
  activity,
  agent,
  approval,
  asyncJob,
  grant,
  host,
  passkey,
  perCall,
  session,
} from './store-fixtures.js';

/** Every table grows with use. */
const GROWING = [
  'hosts',
  'agents',
  'grants',
  'approvals',
  'approval_openers',
  'activity',
  'async_jobs',
  'sessions',
  'passkeys',
  'per_call_approvals',
  'oidc_pending',
  'webauthn_challenges',
  'totp_steps',
  'passkey_enrolment_codes',
  'seen_jtis',
  'rate_buckets',
];

/** The rows query-plan-calls.ts refers to (its own seed is for the SQLite store's synchronous calls). */
async function seed(store: Store): Promise<void> {
  await store.write(async (tx) => {
    for (const h of ['h1', 'h2']) await tx.insertHost(host(h));
    for (const a of ['a1', 'a2']) await tx.insertAgent(agent(a, 'h1'));
    for (const p of ['p1', 'p2']) await tx.insertApproval(approval(p, 'a1', 'h1'));
    await tx.putGrant(grant('g1', 'a1', { approvalId: 'p1' }));
    await tx.appendActivity(activity({ agentId: 'a1' }));
    await tx.insertPerCall(perCall('c1', 'a1'));
    await tx.insertPasskey(passkey('k1'));
  });
  await store.insertAsyncJob(asyncJob('j1', 'a1', { expiresAt: NOW + 1 }));
  await store.insertSession(session('s1'));
  await store.markOpened('p1', 'alice', NOW);
}

/** A drive-table call's result: a promise, or an array of them (each filter combination). */
async function settle(result: unknown): Promise<void> {
  await (Array.isArray(result) ? Promise.all(result) : result);
}

/** Public methods along a prototype chain, up to (not including) Object. */
function methods(proto: object | null, skip: ReadonlySet<string>): string[] {
  const names = new Set<string>();
  for (let p = proto; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const name of Object.getOwnPropertyNames(p)) if (!skip.has(name)) names.add(name);
  }
  return [...names].sort();
}

/** Members that are not Store methods: the constructor and the classes' protected/private helpers. */
const HELPERS = new Set(['constructor', 'one', 'many', 'count', 'run', 'exec']);

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly 'Recheck Cond'?: string;
  readonly Plans?: readonly PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Nodes that read all their input before returning a row: a LIMIT above them stops nothing below. */
const BLOCKING = new Set(['Sort', 'Incremental Sort', 'Hash', 'Aggregate', 'Materialize', 'SetOp', 'Unique']);

/**
 * Scans that read a growing table whole: a sequential scan, or (with sequential scans disabled,
 * the planner's next resort) an index scan without an index condition, unless a LIMIT above it
 * stops the walk (the first page of an unfiltered listing walks its index in order).
 */
function wholeScans(plan: PlanNode, limited = false): PlanNode[] {
  const type = plan['Node Type'];
  const growing = GROWING.includes(plan['Relation Name'] ?? '');
  const whole =
    growing &&
    (type === 'Seq Scan' ||
      (['Index Scan', 'Index Only Scan'].includes(type) && plan['Index Cond'] === undefined && !limited));
  const below = type === 'Limit' ? true : BLOCKING.has(type) ? false : limited;
  return [...(whole ? [plan] : []), ...(plan.Plans ?? []).flatMap((child) => wholeScans(child, below))];
}

const flat = (sql: string): string => sql.replace(/\s+/g, ' ').trim();

/**
 * A statement given an owner (`agent_id = $n`, `host_id = $n`, `user_id = $n`) must reach its
 * rows through an index condition on that owner (or on a primary key): a range of a global index
 * (every host's open approvals by deadline, say) grows with the deployment, not with the owner.
 */
function ownerMissed(sql: string, plan: readonly PlanNode[]): boolean {
  const owners = [...sql.matchAll(/\b(host_id|agent_id|user_id) = \$/g)].map((m) => m[1] as string);
  if (owners.length === 0) return false;
  const conditions = plan.flatMap((n) => [n['Index Cond'] ?? '', n['Recheck Cond'] ?? '']);
  return !conditions.some((c) => owners.some((o) => c.includes(`(${o} = `)) || /\((id|id_hash) = /.test(c));
}

/**
 * Rows in the shape of a deployment (many owners, a few rows each, most approvals decided), then
 * ANALYZE: PostgreSQL's planner weighs indexes by statistics, so plans on a near-empty, never
 * analyzed database would say little about production. Ids do not collide with the drive's.
 */
const BULK = `
  INSERT INTO hosts (id, thumbprint, public_jwk, user_id, status, created_at, updated_at)
    SELECT 'hb-' || i, 'tpb-' || i, '{}', 'user-' || i % 200,
      CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'active' END, ${NOW} + (i - 250) * 1000, ${NOW}
    FROM generate_series(0, 499) AS i;
  INSERT INTO agents (id, host_id, user_id, name, public_jwk, key_thumbprint, mode, status, activated_at,
      created_at, updated_at)
    SELECT 'ab-' || i, 'hb-' || i % 500, 'user-' || i % 300, 'agent', '{}', 'kb-' || i, 'delegated',
      CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'active' END, ${NOW}, ${NOW} + (i - 1000) * 1000, ${NOW}
    FROM generate_series(0, 1999) AS i;
  INSERT INTO approvals (id, kind, agent_id, host_id, user_code, method, login_hint, capabilities, status,
      created_at, expires_at)
    SELECT 'pb-' || i, 'capability_request', 'ab-' || i % 2000, 'hb-' || i % 2000 % 500, 'ucb-' || i,
      CASE WHEN i % 2 = 0 THEN 'ciba' ELSE 'device_authorization' END, 'user-' || i % 200, '[]',
      CASE WHEN i % 20 = 0 THEN 'pending' ELSE 'approved' END, ${NOW} + (i - 2000) * 1000, ${NOW} + (i % 100 - 50) * 1000
    FROM generate_series(0, 3999) AS i;
  INSERT INTO grants (id, agent_id, capability, status, capability_version, created_at, updated_at)
    SELECT 'gb-' || i, 'ab-' || i % 2000, 'cap-g' || i / 2000 + 1, 'active', 'v1', ${NOW} + i - 2000, ${NOW}
    FROM generate_series(0, 3999) AS i;
  INSERT INTO activity (at, type, agent_id, host_id, user_id, capability, outcome)
    SELECT ${NOW} - 10000 + i, 'execute', 'ab-' || i % 2000, 'hb-' || i % 500, 'user-' || i % 200,
      'cap-' || i % 50, 'success'
    FROM generate_series(0, 9999) AS i;
  INSERT INTO async_jobs (id, agent_id, capability, upstream_url, created_at, expires_at)
    SELECT 'jb-' || i, 'ab-' || i % 2000, 'cap', 'https://u/' || i, ${NOW}, ${NOW} + i
    FROM generate_series(0, 999) AS i;
  INSERT INTO sessions (id_hash, user_id, auth_method, authenticated_at, csrf_token, created_at, expires_at)
    SELECT 'sb-' || i, 'user-' || i % 200, 'password', ${NOW}, 'c', ${NOW}, ${NOW} + i
    FROM generate_series(0, 999) AS i;
  INSERT INTO passkeys (id, user_id, user_handle, public_key, counter, name, created_at)
    SELECT 'kb-' || i, 'user-' || i % 200, 'uh-' || i, '\\x01', 0, 'key', ${NOW} + i - 500
    FROM generate_series(0, 999) AS i;
  INSERT INTO per_call_approvals (id, agent_id, host_id, user_id, capability, arguments, status, created_at,
      expires_at, keep_until)
    SELECT 'cb-' || i, 'ab-' || i % 2000, 'hb-' || i % 500, CASE WHEN i % 50 = 0 THEN NULL ELSE 'user-' || i % 200 END,
      'cap', '{}', CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'completed' END, ${NOW} + (i - 1000) * 1000,
      ${NOW} + (i % 100 - 50) * 1000, ${NOW} + i * 1000
    FROM generate_series(0, 1999) AS i;
  INSERT INTO passkey_enrolment_codes (user_id, code_hash, expires_at)
    SELECT 'user-' || i, 'ch-' || i, ${NOW} + (i - 500) * 1000 FROM generate_series(0, 999) AS i;
  INSERT INTO approval_openers (approval_id, user_id, opened_at)
    SELECT 'pb-' || i, 'user-' || i % 200, ${NOW} FROM generate_series(1, 3999, 4) AS i;
  INSERT INTO seen_jtis (identity, jti, expires_at)
    SELECT 'agent:ab-' || i % 2000, 'jb-' || i, ${NOW} + i FROM generate_series(0, 9999) AS i;
  INSERT INTO rate_buckets (key, credit, at, window_ms, admitted, full_at)
    SELECT 'agent:ab-' || i, 0, ${NOW}, 60000, true, ${NOW} + i FROM generate_series(0, 1999) AS i;
  ANALYZE;
`;

let server: TestPostgres;
const captured = new Map<string, readonly unknown[]>();
let writerMethods: string[] = [];

beforeAll(async () => {
  server = await startPostgres();
  const store = await PgStore.open(server.url, {
    onQuery: (sql, params) => {
      if (!captured.has(sql)) captured.set(sql, params);
    },
  });
  try {
    await seed(store);
    for (const call of Object.values(STORE_CALLS)) await settle(call(store));
    await store.write(async (tx: StoreWriter) => {
      writerMethods = methods(Object.getPrototypeOf(tx) as object, HELPERS);
      for (const call of Object.values(WRITER_CALLS)) await settle(call(tx));
    });
    for (const call of Object.values(SHARED_CALLS)) await settle(call(store.shared));
  } finally {
    await store.close();
  }
  await withClient((client) => client.query(BULK));
});
afterAll(async () => server.stop());

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

describe('PostgreSQL query plans', () => {
  it('drives every public method of Store and StoreWriter', () => {
    expect(Object.keys(STORE_CALLS).sort()).toEqual(methods(PgStore.prototype, HELPERS));
    expect(Object.keys(WRITER_CALLS).sort()).toEqual(writerMethods);
    expect(writerMethods).toEqual(methods(PgWriter.prototype, HELPERS));
    expect(methods(PgReader.prototype, HELPERS).every((m) => m in WRITER_CALLS)).toBe(true);
    expect(Object.keys(SHARED_CALLS).sort()).toEqual(methods(PgShared.prototype, HELPERS));
  });

  it('serves every statement from an index: no scan of a whole growing table', async () => {
    const statements = [...captured].filter(([sql]) => /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql));
    expect(statements.length).toBeGreaterThan(50);
    const failures = await withClient(async (client) => {
      await client.query('SET enable_seqscan = off');
      const bad: string[] = [];
      for (const [sql, params] of statements) {
        const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (FORMAT JSON) ${sql}`,
          params as unknown[],
        );
        const root = rows[0]!['QUERY PLAN'][0].Plan;
        const plan = nodes(root);
        for (const scan of wholeScans(root)) {
          const index = scan['Index Name'] ? ` using ${scan['Index Name']}` : '';
          bad.push(`${scan['Node Type']} on ${scan['Relation Name']!}${index}\n    in: ${flat(sql)}`);
        }
        if (ownerMissed(flat(sql), plan)) {
          const used = plan.map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}`);
          bad.push(`not through its owner's index: ${used.join(' | ')}\n    in: ${flat(sql)}`);
        }
      }
      return bad;
    });
    expect(failures).toEqual([]);
  });

  it('indexes every foreign key, so a cascade (or SET NULL) does not scan the child table', async () => {
    const missing = await withClient(async (client) => {
      const { rows } = await client.query<{ child: string; column: string; indexed: boolean }>(
        `SELECT c.conrelid::regclass::text AS child, a.attname AS column,
            EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1]) AS indexed
          FROM pg_constraint c
          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
          WHERE c.contype = 'f'`,
      );
      expect(rows.length).toBeGreaterThanOrEqual(8);
      return rows.filter((r) => GROWING.includes(r.child) && !r.indexed).map((r) => `${r.child}.${r.column}`);
    });
    expect(missing).toEqual([]);
  });
});
