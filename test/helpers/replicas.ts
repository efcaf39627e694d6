/**
 * Replicas (issue 13): N real proxy processes (the built `dist/cli.js serve`, as an operator runs
 * it) on one PostgreSQL database, with the same config, policy, issuer and admin token, each on a
 * port of its own, in front of one recording upstream. A client may send any request to any
 * replica, as through a load balancer: tokens are addressed to the shared issuer. No import from
 * src/: these tests check the build.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveCli, type ServedCli } from './cli-serve.js';
import { killChildren, ROOT } from './cli-process.js';
import { agentJwt, hostJwt, type TestKey } from './keys.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { TestUpstream } from './upstream.js';
import { requestJson } from './proxy.js';

export const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
export const ADMIN_TOKEN = 'replicas-admin-token-0123456789abcdef';
/** The URL every replica calls itself: what a load balancer in front of them would answer at. */
export const ISSUER = 'http://replicas.test';
export const EXECUTE_AUD = `${ISSUER}/capability/execute`;

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
}

/** One proxy process and a small client for it. */
export class Replica {
  constructor(private readonly served: ServedCli) {}

  get url(): string {
    return this.served.url;
  }

  get child(): ChildProcess {
    return this.served.child;
  }

  /** The JSON log lines it wrote so far. */
  logs(): Record<string, unknown>[] {
    return this.served.logs();
  }

  /** What it wrote to stderr so far. */
  stderr(): string {
    return this.served.stderr();
  }

  /** Resolves with the exit code and signal once the process is gone. */
  get exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.served.exited;
  }

  async request(method: string, path: string, token?: string, body?: unknown): Promise<Reply> {
    return requestJson(`${this.url}${path}`, method, token, body);
  }

  admin(method: string, path: string, body?: unknown): Promise<Reply> {
    return this.request(method, path, ADMIN_TOKEN, body);
  }

  /** POST /agent/register with a host JWT carrying the agent's key. */
  async register(host: TestKey, agent: TestKey, body: Record<string, unknown>): Promise<Reply> {
    const token = await hostJwt(host, ISSUER, { agent_public_key: agent.publicJwk });
    return this.request('POST', '/agent/register', token, { name: 'replicated agent', ...body });
  }

  /** §5.11 with a fresh agent JWT (or `token`, to send one again). */
  async execute(
    agent: TestKey,
    agentId: string,
    capability: string,
    args: Record<string, unknown>,
    token?: string,
  ): Promise<Reply> {
    const jwt = token ?? (await agentJwt(agent, agentId, EXECUTE_AUD));
    return this.request('POST', '/capability/execute', jwt, { capability, arguments: args });
  }

  /** SIGTERM, and wait until the process is gone. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.served.exited;
  }
}

export interface ReplicaSet {
  readonly replicas: readonly Replica[];
  readonly upstream: TestUpstream;
  /** The policy file every replica reads (a test may change it, then reload). */
  readonly policyFile: string;
  /**
   * Another replica on the same database (e.g. one restarted); `args` and `ready` replace the
   * set's own (e.g. `[]` and `listening` for one process).
   */
  start(options?: { readonly args?: readonly string[]; readonly ready?: string }): Promise<Replica>;
  close(): Promise<void>;
}

/**
 * Starts `count` replicas on `db` with `policy` (YAML); every child joins `children`, so the test
 * can kill leftovers by PID.
 */
export async function startReplicas(options: {
  readonly db: string;
  readonly policy: string;
  readonly children: Set<ChildProcess>;
  readonly count?: number;
  /** More of the config (YAML, top-level keys), e.g. `sign_in`. */
  readonly config?: string;
  /** Another shared issuer (passkeys need https or a `localhost` name); ISSUER by default. */
  readonly issuer?: string;
  /** More serve flags for every replica, e.g. `--workers 2`. */
  readonly args?: readonly string[];
  /** The log message that means a replica serves (serveCli's `ready`). */
  readonly ready?: string;
}): Promise<ReplicaSet> {
  const upstream = await TestUpstream.start();
  const dir = mkdtempSync(join(tmpdir(), 'aap-replicas-'));
  const config = join(dir, 'proxy.yaml');
  const policy = join(dir, 'policy.yaml');
  writeFileSync(
    config,
    [
      'apis:',
      `  - spec: ${JSON.stringify(PETSTORE)}`,
      `    upstream: ${upstream.url}/v1`,
      ...(options.config !== undefined ? [options.config] : []),
    ].join('\n'),
  );
  writeFileSync(policy, options.policy);
  const started: Replica[] = [];
  const start = async (
    only: { readonly args?: readonly string[]; readonly ready?: string } = {},
  ): Promise<Replica> => {
    const ready = only.ready ?? options.ready;
    const served = await serveCli(
      [
        ...['--config', config, '--db', options.db, '--policy', policy, '--issuer', options.issuer ?? ISSUER],
        ...(only.args ?? options.args ?? []),
      ],
      {
        cwd: dir,
        env: { AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN },
        children: options.children,
        ...(ready !== undefined ? { ready } : {}),
      },
    );
    const replica = new Replica(served);
    started.push(replica);
    return replica;
  };
  try {
    const replicas = await Promise.all(Array.from({ length: options.count ?? 2 }, () => start()));
    return {
      replicas,
      upstream,
      policyFile: policy,
      start,
      close: async () => {
        await Promise.all(started.map((r) => r.stop()));
        await upstream.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(started.map((r) => r.stop()));
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

export interface ReplicaCluster extends ReplicaSet {
  /** The cluster's own server (stopServer/startServer for an outage). */
  readonly postgres: TestPostgres;
  /** The replicas' database. */
  readonly db: string;
  /** Every replica process still running, the last started last (one still starting too). */
  readonly children: ReadonlySet<ChildProcess>;
}

/**
 * A PostgreSQL of its own and replicas on a fresh database of it (startReplicas' options, less
 * the database and the children). `close` stops the replicas, kills any leftover by PID, then
 * stops the server.
 */
export async function startReplicaCluster(
  options: Omit<Parameters<typeof startReplicas>[0], 'db' | 'children'>,
): Promise<ReplicaCluster> {
  const children = new Set<ChildProcess>();
  const postgres = await startPostgres();
  try {
    const db = await postgres.createDatabase();
    const set = await startReplicas({ ...options, db, children });
    return {
      ...set,
      postgres,
      db,
      children,
      close: async () => {
        await set.close();
        killChildren(children);
        await postgres.stop();
      },
    };
  } catch (err) {
    killChildren(children);
    await postgres.stop();
    throw err;
  }
}

/**
 * Calls `attempt` until `done` says its result is the awaited one; resolves with that result and
 * how long it took. Polls, never sleeps a fixed time: the bound is what the test asserts.
 */
export async function until<T>(
  attempt: () => Promise<T>,
  done: (result: T) => boolean,
  timeoutMs = 5000,
): Promise<{ result: T; elapsedMs: number }> {
  const started = Date.now();
  for (;;) {
    const result = await attempt();
    const elapsedMs = Date.now() - started;
    if (done(result)) return { result, elapsedMs };
    if (elapsedMs > timeoutMs) throw new Error(`not done after ${timeoutMs} ms: ${JSON.stringify(result)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
