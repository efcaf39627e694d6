/** The built CLI as a proxy process on a SQLite file, and the temp workspace it runs in, for the tests that kill it and start it again on the same database. */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { CLI, ensureBuiltCli, killChildren } from './cli-process.js';
import { serveCli, type ServedCli } from './cli-serve.js';
import { requestJson } from './proxy.js';

export interface Reply {
  status: number;
  body: any;
}

export interface CliWorkspace {
  /** Every child this file started; killed by PID after each test if still running. */
  readonly children: Set<ChildProcess>;
  /** The file's temp directory (set before its first test, removed after its last). */
  readonly tmp: string;
  /** The policy, written to `tmp`. */
  readonly policyFile: string;
}

/**
 * Registers the file's hooks: before all, checks the built CLI and writes `policy` to a new temp
 * directory named from `prefix`; after each test, kills the children still running; after all,
 * removes the directory.
 */
export function cliWorkspace(prefix: string, policy: string): CliWorkspace {
  const workspace = { children: new Set<ChildProcess>(), tmp: '', policyFile: '' };
  beforeAll(() => {
    expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
    workspace.tmp = mkdtempSync(join(tmpdir(), prefix));
    workspace.policyFile = join(workspace.tmp, 'policy.yaml');
    writeFileSync(workspace.policyFile, policy);
  });
  afterEach(() => killChildren(workspace.children));
  afterAll(() => rmSync(workspace.tmp, { recursive: true, force: true }));
  return workspace;
}

/** One running proxy process (port 0) and a small client for it; a file's subclass boots it. */
export class CliProxy {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<void>;

  protected constructor(served: ServedCli) {
    this.child = served.child;
    this.url = served.url;
    this.exited = served.exited.then(() => undefined);
  }

  /** Starts the CLI with `args` in the workspace's directory, with `adminToken` as its admin token. */
  protected static serve(
    workspace: CliWorkspace,
    args: readonly string[],
    adminToken: string,
  ): Promise<ServedCli> {
    return serveCli(args, {
      cwd: workspace.tmp,
      env: { AGENT_AUTH_PROXY_ADMIN_TOKEN: adminToken },
      children: workspace.children,
    });
  }

  /** SIGKILL, now: no shutdown hook, no flush, no checkpoint. */
  async crash(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  async request(method: string, path: string, token?: string, body?: unknown): Promise<Reply> {
    const { status, body: answer } = await requestJson(`${this.url}${path}`, method, token, body);
    return { status, body: answer };
  }
}
