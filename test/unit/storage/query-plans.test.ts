/**
 * Storage that scales (issue 17): every statement the SQLite store prepares is served by an
 * index. Each public method of Store and StoreWriter is driven once against a real database file;
 * each statement it prepared is then explained (EXPLAIN QUERY PLAN), and a plan that scans a
 * table growing with use, or sorts its rows in a temporary B-tree, fails the test. A second test
 * checks that every foreign key a cascade follows has an index (cascades are not in the plans).
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store, StoreWriter } from '../../../src/storage/types.js';
import { tempDbFile } from '../../helpers/proxy.js';
import { STORE_CALLS, WRITER_CALLS, callAll, seed } from './query-plan-calls.js';

/** Every table grows with use (hosts, agents, their grants, approvals, activity, jobs, sessions…). */
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
];

/**
 * Plan lines accepted although they say SCAN, each with why it is bounded by construction. Keyed
 * by a fragment of the statement's SQL and the plan line.
 */
const ALLOWED: readonly { readonly sql: string; readonly plan: string; readonly why: string }[] = [
  ...['hosts', 'agents', 'approvals'].map((table) => ({
    sql: `SELECT * FROM ${table} ORDER BY created_at, id LIMIT @limit`,
    plan: `SCAN ${table} USING INDEX ${table}_listing`,
    why: 'the first page of an unfiltered listing: walks the listing index in order, stops at LIMIT',
  })),
  {
    sql: 'SELECT * FROM activity ORDER BY id DESC LIMIT @limit',
    plan: 'SCAN activity',
    why: 'no filter: every row matches, so the newest-first walk of the primary key reads LIMIT rows',
  },
  {
    sql: 'SELECT * FROM ( SELECT * FROM approvals WHERE login_hint = @userId',
    plan: 'USE TEMP B-TREE FOR ORDER BY',
    why: "sorts one user's inbox only: their CIBA requests and the device requests they opened, each from its index",
  },
  {
    sql: 'SELECT * FROM agents WHERE user_id = @userId OR host_id IN',
    plan: 'USE TEMP B-TREE FOR ORDER BY',
    why: "sorts one user's agents only, found by two index searches (agents_user_listing, agents_host_listing)",
  },
];

/**
 * Class members of the store (sqlite-async-store.ts over the SQLite engine) that are not Store
 * methods: its private helpers.
 */
const PRIVATE = new Set(['constructor', 'run', 'transact', 'next', 'transactionView']);

const file = tempDbFile();
const prepared = new Set<string>();
let store: Store;

beforeAll(async () => {
  store = openSqliteStore({ file, onPrepare: (sql) => prepared.add(sql) });
  await seed(store);
  await callAll(STORE_CALLS, store);
  await store.write((tx) => callAll(WRITER_CALLS, tx));
});
afterAll(() => store.close());

/** Dummy values for a statement's parameters: the plan does not depend on them. */
function dummyParams(sql: string): unknown[] {
  const named = [...sql.matchAll(/@(\w+)/g)].map((m) => m[1] as string);
  if (named.length > 0) return [Object.fromEntries(named.map((n) => [n, 'x']))];
  return Array.from(sql.matchAll(/\?/g), () => 'x');
}

/**
 * A statement given an owner (`host_id = ?`, `agent_id = ?`, `user_id = ?`) must find its rows
 * through that owner's index (or by primary key): a range of a global index (every host's open
 * approvals by deadline, say) is a SEARCH, but it grows with the deployment, not with the owner.
 */
function ownerMissed(flat: string, plan: readonly string[]): boolean {
  const owners = [...flat.matchAll(/\b(host_id|agent_id|user_id) = [?@]/g)].map((m) => m[1] as string);
  if (owners.length === 0) return false;
  return !plan.some((d) => owners.some((o) => d.includes(`${o}=`)) || /\((id|id_hash|rowid)=\?\)/.test(d));
}

function scans(sql: string, db: Database.Database): string[] {
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...dummyParams(sql)) as { detail: string }[];
  const bad: string[] = [];
  if (
    ownerMissed(
      sql.replace(/\s+/g, ' '),
      plan.map((p) => p.detail),
    )
  ) {
    bad.push(`not through its owner's index: ${plan.map((p) => p.detail).join(' | ')}`);
  }
  for (const { detail } of plan) {
    const scan = /^SCAN (\w+)/.exec(detail);
    const flagged =
      (scan !== null && GROWING.includes(scan[1] as string)) || /USE TEMP B-TREE FOR .*ORDER BY/.test(detail);
    const flat = sql.replace(/\s+/g, ' ');
    if (flagged && !ALLOWED.some((a) => flat.includes(a.sql) && detail.includes(a.plan))) bad.push(detail);
  }
  return bad;
}

describe('query plans', () => {
  it('drives every public method of Store and StoreWriter', async () => {
    const proto = Object.getPrototypeOf(store) as object;
    const methods = Object.getOwnPropertyNames(proto).filter((n) => !PRIVATE.has(n));
    expect(Object.keys(STORE_CALLS).sort()).toEqual(methods.sort());
    let writerMethods: string[] = [];
    await store.write((tx: StoreWriter) => {
      writerMethods = Object.keys(tx);
      return Promise.resolve();
    });
    expect(Object.keys(WRITER_CALLS).sort()).toEqual(writerMethods.sort());
  });

  it('serves every statement from an index: no scan of a growing table, no sort', () => {
    const db = new Database(file, { readonly: true });
    try {
      const failures = [...prepared].flatMap((sql) =>
        scans(sql, db).map((line) => `${line}\n    in: ${sql.replace(/\s+/g, ' ')}`),
      );
      expect(prepared.size).toBeGreaterThan(40);
      expect(failures).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('indexes every foreign key, so a cascade (or SET NULL) does not scan the child table', () => {
    const db = new Database(file, { readonly: true });
    try {
      const missing: string[] = [];
      for (const table of GROWING) {
        const keys = db.pragma(`foreign_key_list(${table})`) as { from: string; table: string }[];
        const indexes = (db.pragma(`index_list(${table})`) as { name: string }[]).map((i) =>
          (db.pragma(`index_info(${i.name})`) as { name: string }[]).map((c) => c.name),
        );
        for (const key of keys) {
          if (!indexes.some((cols) => cols[0] === key.from)) missing.push(`${table}.${key.from}`);
        }
      }
      expect(missing).toEqual([]);
    } finally {
      db.close();
    }
  });
});
