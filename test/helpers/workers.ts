/**
 * For tests of `serve --workers N` (the built CLI on PostgreSQL, test/helpers/replicas.ts): a
 * request over a connection of its own (so the primary picks a worker for it), an approved agent,
 * the processes under a primary, and the migration lock held to keep a worker starting.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import pg from 'pg';
import { expect } from 'vitest';
import { generateTestKey, type TestKey } from './keys.js';
import type { Replica } from './replicas.js';

export interface FreshReply {
  readonly status: number;
  readonly body: any;
}

/**
 * One request over a connection of its own (closed after it); rejects after `timeoutMs` without
 * an answer (a worker stopped with SIGSTOP never answers).
 */
export function freshRequest(
  url: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<FreshReply> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: {
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
          ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? tryJson(text) : undefined }));
        res.on('error', reject);
      },
    );
    if (options.timeoutMs !== undefined) {
      req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer in ${options.timeoutMs} ms`)));
    }
    req.on('error', reject);
    req.end(payload);
  });
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** An agent under a host a person approved (through the operator API), with its grants. */
export async function activeAgent(
  proxy: Replica,
  capabilities: string[],
): Promise<{ agent: TestKey; agentId: string }> {
  const host = await generateTestKey();
  const agent = await generateTestKey();
  const reg = await proxy.register(host, agent, { capabilities });
  expect(reg.status).toBe(200);
  const open = await proxy.admin('GET', `/admin/approvals?agent_id=${reg.body.agent_id}`);
  const ok = await proxy.admin('POST', `/admin/approvals/${open.body.approvals[0].id}/approve`, {
    user_id: 'alice',
  });
  expect(ok.status).toBe(200);
  return { agent, agentId: reg.body.agent_id };
}

/** The parent of a process (Linux /proc). */
export function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** The processes whose parent is `pid` (a primary's workers). */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((child) => {
      try {
        return parentOf(child) === pid;
      } catch {
        return false; // gone meanwhile
      }
    });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The key of the advisory lock a proxy migrates under (MIGRATION_LOCK, src/storage/pg-schema.ts). */
const MIGRATION_LOCK = 0x6161_7000_0013;

export interface HeldLock {
  /** How many sessions wait for the lock: a worker waiting there reads its files and listens, but does not serve. */
  waiting(): Promise<number>;
  release(): Promise<void>;
}

/** Takes the migration lock on `db` and holds it: a proxy starting meanwhile waits in its migration. */
export async function holdMigrationLock(db: string): Promise<HeldLock> {
  const holder = new pg.Client({ connectionString: db });
  const observer = new pg.Client({ connectionString: db });
  await Promise.all([holder.connect(), observer.connect()]);
  await holder.query('BEGIN');
  await holder.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
  return {
    waiting: async () => {
      const { rows } = await observer.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
      );
      return rows[0]?.n ?? 0;
    },
    release: async () => {
      await holder.query('COMMIT');
      await Promise.all([holder.end(), observer.end()]);
    },
  };
}
