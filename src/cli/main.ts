/**
 * The command line's commands: argv → serve, capabilities, admin, agent, hash-password. Parses and
 * prints through a CliOutput; the work happens in app.ts, the OpenAPI layer and (admin) the
 * operator API. Operator mistakes exit with code 2 and one clear message.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  resolveDatabaseOnly,
  resolveSettings,
  type CliOverrides,
  type Settings,
} from '../config/settings.js';
import { backupDatabase } from '../storage/backup.js';
import { UserError } from '../errors.js';
import { startProxy, type ProxyDeps } from '../app.js';
import { loadServedCatalog } from '../start/served-catalog.js';
import { runPrimary } from '../cluster/primary.js';
import { announceStarted, asWorker, isWorker, workerDeps } from '../cluster/worker.js';
import { createLogger } from '../log.js';
import { watchedFiles, watchFiles } from '../watch.js';
import { checkSettings } from '../check.js';
import type { Catalog } from '../openapi/catalog.js';
import { runAdmin } from './admin.js';
import { runAgent } from './agent/main.js';
import { realRuntime, type AgentRuntime } from './agent/session.js';
import { FLAGS, flagsHelp, takesFlag, type FlagCommand } from './flags.js';
import { runHealth } from './health.js';
import { toOverrides } from './overrides.js';
import { runHashPassword } from './hash-password.js';
import { writeCatalogJson } from './catalog-json.js';
import { processOutput, userErrorLine, type CliOutput } from './output.js';

const USAGE = `Usage:
  agent-auth-proxy [serve] [options]            start the proxy
  agent-auth-proxy capabilities [options] [--json]
                                                print the capability catalog and exit
  agent-auth-proxy admin approvals|hosts|agents|activity ... [--url URL] [--json]
                                                drive the operator API of a running proxy
  agent-auth-proxy agent init|register|status|capabilities|request|execute|revoke ... [--json]
                                                a small agent client: keys, registration, approval
                                                polling, execution (for trying and smoke tests)
  agent-auth-proxy check [options]              validate config, policy and OpenAPI documents as serve
                                                would, without starting; exit 0 or 1
  agent-auth-proxy db backup FILE [--db FILE | --config FILE]
                                                copy the database, while the proxy runs, to FILE
  agent-auth-proxy health [--live] [--pid PID | --config FILE --port PORT]
                                                ask a running proxy's /readyz; exit 0 when ready
  agent-auth-proxy hash-password < password     print the scrypt hash of the password on stdin
                                                for sign_in.local.users[].password_hash

agent-auth-proxy COMMAND --help prints one command's help; --version works with any command.

Options of serve:
${flagsHelp('serve')}`;

const SERVE_USAGE = `Usage: agent-auth-proxy [serve] [options]

Serves the Agent Auth Protocol for the APIs of --spec (with --upstream) or --config, until
SIGTERM or SIGINT; SIGHUP re-reads the config's APIs, the OpenAPI documents and the policy.

Options:
${flagsHelp('serve')}`;

const CAPABILITIES_USAGE = `Usage: agent-auth-proxy capabilities [options] [--json]

Prints the capability catalog the proxy would serve (name, method, path, description; with
--json also the input and output schemas) and exits. Loads the documents only: no database, no
listener.

Options:
${flagsHelp('capabilities')}`;

const CHECK_USAGE = `Usage: agent-auth-proxy check [options]

Validates what serve with the same options would load (the config, its secrets, the OpenAPI
documents, the policy, upstream URLs and credentials) without opening the database or a port,
for CI pipelines and ExecStartPre. Prints what it checked and exits 0, or every problem with its
file and key path and exits 1.

Options:
${flagsHelp('check')}`;

const DB_USAGE = `Usage: agent-auth-proxy db backup FILE [--db FILE | --config FILE]

Copies the SQLite database (--db, else the config's database, else ./data/agent-auth-proxy.db)
to FILE with SQLite's online backup: safe while the proxy runs, a consistent snapshot, checked
after copying. FILE must not exist yet.

Options:
${flagsHelp('db')}`;

const HEALTH_USAGE = `Usage: agent-auth-proxy health [--live] [--pid PID | --config FILE] [--host HOST] [--port PORT]

Asks a running proxy's /readyz (with --live, its /healthz) and exits 0 when it answers 200, else 1.
The image's HEALTHCHECK uses --live: during a database outage the proxy is alive but not ready, and
a restart would only meet the same outage and drop the activity records it is holding.
The address is the one serve would listen on with the same options, or with --pid the one that
process was started with (its own command line and working directory), so the check follows the
port a container was started with.

Options:
${flagsHelp('health')}`;

const HASH_PASSWORD_USAGE = `Usage: agent-auth-proxy hash-password < password

Reads a password on standard input (never from argv, which other users can read) and prints its
scrypt hash for sign_in.local.users[].password_hash. Example:
  read -rs P && printf %s "$P" | agent-auth-proxy hash-password`;

/**
 * Runs one command line to its exit code: 0 done, 1 an unexpected failure (with its stack, a bug to
 * report), 2 an operator mistake (one line, no stack). The entry point (src/cli.ts) and in-process
 * tests both call this.
 */
export async function runCli(
  argv: readonly string[],
  io: CliOutput = processOutput,
  // The agent client's clock and sleep: tests pass the proxy's test clock so polling never waits.
  agentRuntime: AgentRuntime = realRuntime,
): Promise<number> {
  try {
    return await main(argv, io, agentRuntime);
  } catch (err) {
    if (err instanceof UserError) {
      io.err(userErrorLine(err.message));
      return 2;
    }
    io.err(
      `agent-auth-proxy: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return 1;
  }
}

async function main(argv: readonly string[], io: CliOutput, agentRuntime: AgentRuntime): Promise<number> {
  // Every command answers --version the same way, before its own arguments are read.
  if (argv.includes('--version')) {
    io.out(`${packageVersion()}\n`);
    return 0;
  }
  if (argv[0] === 'admin') return runAdmin(argv.slice(1), process.env, io);
  if (argv[0] === 'agent') return runAgent(argv.slice(1), process.env, io, agentRuntime);
  if (argv[0] === 'hash-password') {
    if (argv.length === 2 && (argv[1] === '--help' || argv[1] === '-h')) {
      io.out(`${HASH_PASSWORD_USAGE}\n`);
      return 0;
    }
    if (argv.length > 1) {
      throw new UserError(
        `hash-password takes no arguments: the password comes on stdin\nRun agent-auth-proxy hash-password --help for usage.`,
      );
    }
    io.out(`${await runHashPassword(process.stdin)}\n`);
    return 0;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: FLAGS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UserError(`${(err as Error).message}\nRun agent-auth-proxy --help for usage.`);
  }
  const { values, positionals } = parsed;
  const named = positionals[0];
  if (values.help) {
    const usage = {
      serve: SERVE_USAGE,
      capabilities: CAPABILITIES_USAGE,
      check: CHECK_USAGE,
      db: DB_USAGE,
      health: HEALTH_USAGE,
    };
    io.out(`${usage[named as keyof typeof usage] ?? USAGE}\n`);
    return 0;
  }
  if (values.version) {
    io.out(`${packageVersion()}\n`);
    return 0;
  }
  const command = named ?? 'serve';
  if (!COMMANDS.has(command))
    throw new UserError(`unknown command "${command}"\nRun agent-auth-proxy --help for usage.`);
  if (command === 'db') {
    rejectForeignFlags('db', values);
    return databaseCommand(positionals.slice(1), { db: values.db, config: values.config }, io);
  }
  if (command === 'health') {
    rejectForeignFlags('health', values);
    if (positionals.length > 1) throw new UserError(`unexpected argument "${positionals[1] ?? ''}"`);
    return runHealth(toOverrides(values), values.pid, io, values.live === true);
  }
  if (positionals.length > 1)
    throw new UserError(
      `unexpected argument "${positionals[1] ?? ''}"\nRun agent-auth-proxy ${command} --help for usage.`,
    );
  rejectForeignFlags(command as FlagCommand, values);
  const cli = toOverrides(values);
  if (command === 'check') return check(cli, io);
  return command === 'serve'
    ? serve(cli, values.watch === true)
    : printCapabilities(cli, values.json === true, io);
}

/**
 * `serve`: one process, or with `--workers N` (N > 1) the primary of N worker processes
 * (src/cluster/), each of which comes back here and serves like one process.
 */
async function serve(cli: CliOverrides, watching: boolean): Promise<number> {
  const settings = resolveSettings(cli);
  if (settings.workers === 1) return serveOne(cli, settings, watching, {});
  if (!isWorker()) {
    const logger = createLogger(settings.logLevel, undefined, Date.now, settings.logFormat, { worker: 0 });
    return runPrimary({ workers: settings.workers, logger });
  }
  return asWorker(() => serveOne(cli, settings, watching, workerDeps(settings)));
}

async function serveOne(
  cli: CliOverrides,
  settings: Settings,
  watching: boolean,
  deps: Pick<ProxyDeps, 'logger' | 'metricsExposition'>,
): Promise<number> {
  // A reload reads the config file again with the same flags and environment (README "Live changes").
  const proxy = await startProxy(settings, { ...deps, rereadSettings: () => resolveSettings(cli) });
  if (isWorker()) announceStarted(proxy.url);
  // The outcome is logged and counted by the reload itself; a signal has nobody to answer.
  const reload = (): void => void proxy.reload();
  process.on('SIGHUP', reload);
  const unwatch = watching ? watchFiles(watchedFiles(settings, cli.config), reload) : undefined;
  // A worker stops when the primary says so (SIGTERM): a Ctrl-C reaches the whole process group,
  // and the primary, which gets it too, stops every worker in turn.
  const stopSignals: NodeJS.Signals[] = isWorker() ? ['SIGTERM'] : ['SIGINT', 'SIGTERM'];
  const ignore = (): void => undefined;
  if (isWorker()) process.on('SIGINT', ignore);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      for (const signal of stopSignals) process.off(signal, stop);
      process.off('SIGHUP', reload);
      unwatch?.();
      resolve();
    };
    for (const signal of stopSignals) process.once(signal, stop);
  });
  await proxy.close();
  return 0;
}

const COMMANDS: ReadonlySet<string> = new Set(['serve', 'capabilities', 'check', 'db', 'health']);

function rejectForeignFlags(command: FlagCommand, values: Readonly<Record<string, unknown>>): void {
  for (const name of Object.keys(values)) {
    if (!takesFlag(command, name)) {
      throw new UserError(
        `${command} does not take --${name}\nRun agent-auth-proxy ${command} --help for usage.`,
      );
    }
  }
}

/** `db backup FILE`. */
async function databaseCommand(
  args: readonly string[],
  where: { db: string | undefined; config: string | undefined },
  io: CliOutput,
): Promise<number> {
  const [action, file, extra] = args;
  if (action !== 'backup' || file === undefined || extra !== undefined) {
    throw new UserError('db: the command is db backup FILE\nRun agent-auth-proxy db --help for usage.');
  }
  const database = resolveDatabaseOnly({
    ...(where.db !== undefined ? { db: where.db } : {}),
    ...(where.config !== undefined ? { config: where.config } : {}),
  });
  if (database.kind !== 'sqlite') {
    throw new UserError(
      "db backup copies a SQLite file; back up PostgreSQL with its own tools (pg_dump, or your provider's snapshots)",
    );
  }
  const source = database.file;
  const target = resolve(file);
  const copied = await backupDatabase(source, target);
  io.out(
    `backed up ${source} (schema version ${copied.schemaVersion}, ${copied.bytes} bytes) to ${target}\n`,
  );
  return 0;
}

/** `check`: exit 0 with what was checked, or 1 with every problem (a failed check is its answer, not a usage mistake). */
async function check(cli: CliOverrides, io: CliOutput): Promise<number> {
  try {
    const report = await checkSettings(resolveSettings(cli));
    for (const w of report.warnings) io.err(`warning: ${w}\n`);
    io.out(
      `ok: ${report.capabilities} capabilities from ${report.apis} API${report.apis === 1 ? '' : 's'}, policy ${report.policy ?? '(built-in)'}\n`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    io.err(userErrorLine(err.message));
    return 1;
  }
}

async function printCapabilities(cli: CliOverrides, json: boolean, io: CliOutput): Promise<number> {
  const { catalog } = await loadServedCatalog(resolveSettings(cli));
  if (json) {
    await writeCatalogJson(catalog, io);
    return 0;
  }
  io.out(catalogTable(catalog));
  for (const w of catalog.warnings) io.err(`warning: ${w}\n`);
  return 0;
}

function catalogTable(catalog: Catalog): string {
  const rows = catalog.capabilities.map((c) => [
    c.name,
    c.operation.method.toUpperCase(),
    c.operation.path,
    (c.description.split('\n')[0] ?? '').slice(0, 60),
  ]);
  const header = ['NAME', 'METHOD', 'PATH', 'DESCRIPTION'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd();
  const apis = catalog.apis.length;
  return [
    line(header),
    ...rows.map(line),
    '',
    `${rows.length} capabilities from ${apis} API${apis === 1 ? '' : 's'}`,
    '',
  ].join('\n');
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}
