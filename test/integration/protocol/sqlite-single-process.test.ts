/**
 * One `serve` process per SQLite database, and only one that can write it (README "Storage and
 * durability"), with the built CLI. Each process keeps its replay memory (§4.6) and hot caches
 * (§10.2) to itself: a second process on the file accepted a jti the first had accepted, and
 * served an agent the first had revoked. A read-only database started ready and answered 500 to
 * every write while executions ran without their audit records (§11).
 */
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, ROOT } from '../../helpers/cli-process.js';
import { CliProxy, cliWorkspace } from '../../helpers/cli-restarts.js';

const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
const ADMIN_TOKEN = 'single-process-admin-token-0123456789';
const workspace = cliWorkspace('aap-single-process-', 'capabilities:\n  defaults: [list_pets]\n');
/** An unprivileged user for the read-only case when the tests run as root (who may write anyway). */
const NOBODY = 65534;

class Proxy extends CliProxy {
  static async boot(db: string): Promise<Proxy> {
    return new Proxy(await CliProxy.serve(workspace, serveArgs(db), ADMIN_TOKEN));
  }

  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.exited;
  }
}

function serveArgs(db: string): string[] {
  return ['--spec', PETSTORE, '--db', db, '--policy', workspace.policyFile];
}

/**
 * `serve` on `db`, until it exits or says it listens (then it is stopped): its exit code, or
 * `listening` when it started, and what it wrote to stderr.
 */
function startOrExit(
  db: string,
  as?: { uid: number; gid: number },
): Promise<{ outcome: number | 'listening'; stderr: string }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...serveArgs(db)], {
    cwd: workspace.tmp,
    env: { ...process.env, AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(as ?? {}),
  });
  workspace.children.add(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (!chunk.includes('"msg":"listening"')) return;
      child.kill('SIGKILL');
      resolve({ outcome: 'listening', stderr });
    });
    child.on('close', (code) => resolve({ outcome: code ?? -1, stderr }));
  });
}

function freshDb(): string {
  return join(mkdtempSync(join(workspace.tmp, 'db-')), 'proxy.db');
}

describe('one serve process per SQLite database', () => {
  it('refuses a second serve on the same file with exit code 2 naming it; the first keeps serving', async () => {
    const db = freshDb();
    const first = await Proxy.boot(db);
    const second = await startOrExit(db);
    expect(second.outcome).toBe(2);
    expect(second.stderr).toContain(db);
    expect(second.stderr).toMatch(/in use by another agent-auth-proxy process/);
    expect((await first.request('GET', '/admin/hosts', ADMIN_TOKEN)).status).toBe(200);
    // Stopped cleanly, it lets the next one start.
    await first.stop();
    await (await Proxy.boot(db)).stop();
  });

  it('starts again after the holder was killed (SIGKILL): the lock is never stale', async () => {
    const db = freshDb();
    await (await Proxy.boot(db)).crash();
    const again = await Proxy.boot(db);
    expect((await again.request('GET', '/admin/hosts', ADMIN_TOKEN)).status).toBe(200);
    await again.stop();
  });
});

describe('a database the proxy cannot write', () => {
  it('stops the start with exit code 2 naming the file, instead of serving 500s (chmod 0400)', async () => {
    const db = freshDb();
    await (await Proxy.boot(db)).stop(); // a real, migrated database, its WAL checkpointed away
    chmodSync(db, 0o400);
    // Root writes a 0400 file all the same: the proxy then runs as a user the mode does bind.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      // Everything beside the database too: a -wal or -shm left by the first run, if any, is
      // root's 0600, which would fail the open before the write check.
      const dir = dirname(db);
      for (const path of [dir, ...readdirSync(dir).map((f) => join(dir, f))]) chownSync(path, NOBODY, NOBODY);
      chmodSync(workspace.tmp, 0o755);
      chmodSync(workspace.policyFile, 0o644);
    }
    const started = await startOrExit(db, asRoot ? { uid: NOBODY, gid: NOBODY } : undefined);
    expect(started.outcome).toBe(2);
    expect(started.stderr).toContain(db);
    expect(started.stderr).toMatch(/cannot be written/);
  });
});
