/**
 * A real PostgreSQL server for the PostgreSQL store's tests (issue 13): `initdb` into a temporary
 * directory, then `postgres` in the foreground on a free loopback port, its unix socket in that
 * directory, trust authentication, fsync off. One server per test file; a database per test is a
 * cheap `CREATE DATABASE … TEMPLATE …`. The outage tests stop and start it on the same port and
 * data directory (stopServer, startServer).
 *
 * initdb and postgres refuse to run as root, so as root (this machine, CI) both run as an
 * unprivileged user: `postgres` when the system has one (Debian's package creates it), else a
 * dedicated system user `aap-postgres`, created once. They are started through `setpriv`, which
 * execs them: the child's pid is the postmaster's, stopped by that pid only. `--pdeathsig` makes
 * the kernel stop the server if the test process dies without cleaning up (SIGKILL, a crash).
 *
 * Binaries: from the PATH or /usr/lib/postgresql/<version>/bin (scripts/ensure-postgres.sh).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

export interface TestPostgres {
  /** A database created at start, empty. */
  readonly url: string;
  readonly port: number;
  /** Creates a database, empty or a copy of `template` (which nobody may be connected to); its URL. */
  createDatabase(template?: string): Promise<string>;
  /** The database name in a URL this server returned. */
  databaseOf(url: string): string;
  /** Stops the server (fast shutdown), keeping its port and data: a database outage. */
  stopServer(): Promise<void>;
  /** Starts the stopped server again on the same port and data; resolves once it answers. */
  startServer(): Promise<void>;
  restart(): Promise<void>;
  /** Stops the server for good and removes its files. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const LOG_LIMIT = 16_384;

/** Servers started by this process, stopped at exit if a test file did not stop them. */
const running = new Map<number, string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [pid, dir] of running) {
      try {
        process.kill(pid, 'SIGQUIT'); // immediate shutdown: nothing to keep
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** The directory holding initdb and postgres: the PATH's, else the newest Debian version's. */
export function postgresBinDir(): string {
  const has = (dir: string): boolean => ['initdb', 'postgres'].every((b) => existsSync(join(dir, b)));
  for (const dir of (process.env.PATH ?? '').split(delimiter)) if (dir && has(dir)) return dir;
  const debian = '/usr/lib/postgresql';
  const versions = existsSync(debian)
    ? readdirSync(debian)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  for (const v of versions) if (has(join(debian, v, 'bin'))) return join(debian, v, 'bin');
  throw new Error('initdb and postgres not found: run scripts/ensure-postgres.sh (it installs them)');
}

interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

/** As root, the unprivileged user the server runs as (created if the system has none). */
async function serverUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async (name: string): Promise<RunAs | undefined> => {
    try {
      const uid = Number((await run('id', ['-u', name])).stdout.trim());
      const gid = Number((await run('id', ['-g', name])).stdout.trim());
      return { uid, gid };
    } catch {
      return undefined;
    }
  };
  const existing = (await lookup('postgres')) ?? (await lookup('aap-postgres'));
  if (existing) return existing;
  await run('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'aap-postgres']);
  const created = await lookup('aap-postgres');
  if (!created) throw new Error('useradd aap-postgres succeeded but the user cannot be found');
  return created;
}

const onPath = (name: string): boolean =>
  (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, name)));

/**
 * How to run a command as `user`, stopped when this process dies: through util-linux's `setpriv`
 * (which execs it, so the pid is the command's). Without setpriv (not Linux), as this user
 * directly, with no parent-death signal: the exit hook is then the only cleanup.
 */
function asUser(user: RunAs | undefined, command: string, args: readonly string[]): [string, string[]] {
  if (!onPath('setpriv')) {
    if (user) throw new Error('running PostgreSQL as root needs setpriv (util-linux) to drop privileges');
    return [command, [...args]];
  }
  const identity = user ? [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups'] : [];
  return ['setpriv', [...identity, '--pdeathsig', 'QUIT', '--', command, ...args]];
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startPostgres(): Promise<TestPostgres> {
  installExitHook();
  const bin = postgresBinDir();
  const user = await serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'aap-pg-'));
  const data = join(dir, 'data');
  const socket = join(dir, 'sock');
  mkdirSync(socket);
  if (user) {
    for (const path of [dir, socket]) chownSync(path, user.uid, user.gid);
  }
  try {
    const [cmd, args] = asUser(user, join(bin, 'initdb'), [
      ...['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
    ]);
    await run(cmd, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' } });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${(err as { stderr?: string }).stderr ?? String(err)}`);
  }

  let port = 0;
  let child: ChildProcess | undefined;
  let log = '';

  const launch = async (): Promise<void> => {
    log = '';
    const [cmd, args] = asUser(user, join(bin, 'postgres'), [
      ...['-D', data, '-p', String(port), '-k', socket],
      ...['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
      ...['-c', 'full_page_writes=off', '-c', 'shared_buffers=16MB', '-c', 'max_connections=100'],
    ]);
    const proc = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' },
    });
    child = proc;
    const keep = (chunk: Buffer): void => {
      log = (log + chunk.toString()).slice(-LOG_LIMIT);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    // Neither the server nor its pipes keep a finished test process alive; the exit hook stops it.
    proc.unref();
    for (const stream of [proc.stdout, proc.stderr]) (stream as unknown as { unref?: () => void }).unref?.();
    if (proc.pid === undefined) throw new Error('postgres did not start');
    running.set(proc.pid, dir);
    proc.once('exit', () => {
      if (proc.pid !== undefined) running.delete(proc.pid);
    });
    await ready(proc);
  };

  const ready = async (proc: ChildProcess): Promise<void> => {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(`postgres exited during start-up:\n${log}`);
      }
      const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.end();
        return;
      } catch {
        await client.end().catch(() => undefined);
      }
      if (Date.now() > deadline) throw new Error(`postgres not ready after ${READY_TIMEOUT_MS} ms:\n${log}`);
      await sleep(50);
    }
  };

  const stopServer = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGINT'); // fast shutdown: clients are disconnected, data is kept
    const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };

  const startServer = async (): Promise<void> => {
    if (child) return;
    await launch();
  };

  // A port found free can be taken before the server binds it: try another a few times.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (err) {
      await stopServer();
      if (attempt >= 3 || !/could not bind|could not create listen socket/i.test(log)) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }

  const urlOf = (database: string): string => `postgres://postgres@127.0.0.1:${port}/${database}`;

  const createDatabase = async (template?: string): Promise<string> => {
    const name = `t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    try {
      const from = template === undefined ? '' : ` TEMPLATE ${pg.escapeIdentifier(template)}`;
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}${from}`);
    } finally {
      await admin.end();
    }
    return urlOf(name);
  };

  const url = await createDatabase();

  return {
    url,
    port,
    createDatabase,
    databaseOf: (u) => decodeURIComponent(new URL(u).pathname.slice(1)),
    stopServer,
    startServer,
    restart: async () => {
      await stopServer();
      await startServer();
    },
    stop: async () => {
      await stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
