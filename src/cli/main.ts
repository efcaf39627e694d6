/**
 * The command line's commands: argv → serve, capabilities, admin, agent, hash-password. Parses and
 * prints through a CliOutput; the work happens in app.ts, the OpenAPI layer and (admin) the
 * operator API. Operator mistakes exit with code 2 and one clear message.
 *
 * Each command's module is imported when that command runs: the server alone takes about 200 ms
 * and 40 MiB to load, which `--version`, `agent …` or the image's HEALTHCHECK (`health`, every
 * 10 s beside the proxy) would otherwise pay on every run.
 */
import { readFileSync } from 'node:fs';
import { UserError } from '../errors.js';
import type { AgentRuntime } from './agent/session.js';
import { FLAGS, flagsHelp, takesFlag, type FlagCommand } from './flags.js';
import { processOutput, terminalSafe, userErrorLine, type CliOutput } from './output.js';
import { toOverrides } from './overrides.js';
import { beforeTerminator, parseFlags } from './parse-flags.js';

const USAGE = `Usage:
  agent-auth-proxy [serve] [options]            start the proxy
  agent-auth-proxy capabilities [options] [--json]
                                                print the capability catalog and exit
  agent-auth-proxy admin approvals|calls|hosts|agents|passkeys|users|activity ...
                         [--url URL] [--json]
                                                drive the operator API of a running proxy
  agent-auth-proxy agent init|register|status|capabilities|request|execute|revoke ... [--json]
                                                a small agent client: keys, registration, approval
                                                polling, execution (for trying and smoke tests)
  agent-auth-proxy check [options]              validate config, policy and OpenAPI documents as serve
                                                would, without starting; exit 0 or 1
  agent-auth-proxy db backup FILE [--db FILE | --config FILE]
                                                copy the database, while the proxy runs, to FILE
  agent-auth-proxy health [--live] [--pid PID | --config FILE] [--host HOST] [--port PORT]
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
  given: CliOutput = processOutput,
  // The agent client's clock and sleep: tests pass the proxy's test clock so polling never waits;
  // absent, the real ones.
  agentRuntime?: AgentRuntime,
): Promise<number> {
  // Servers and documents put text on the terminal through every command: none of it steers it.
  const io = terminalSafe(given);
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

async function main(
  argv: readonly string[],
  io: CliOutput,
  agentRuntime: AgentRuntime | undefined,
): Promise<number> {
  // Every command answers --version the same way, before its own arguments are read; after `--`
  // it is an argument like any other word.
  if (beforeTerminator(argv).includes('--version')) {
    io.out(`${packageVersion()}\n`);
    return 0;
  }
  if (argv[0] === 'admin') {
    const { runAdmin } = await import('./admin.js');
    return runAdmin(argv.slice(1), process.env, io);
  }
  if (argv[0] === 'agent') {
    const [{ runAgent }, { realRuntime }] = await Promise.all([
      import('./agent/main.js'),
      import('./agent/session.js'),
    ]);
    return runAgent(argv.slice(1), process.env, io, agentRuntime ?? realRuntime);
  }
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
    const { runHashPassword } = await import('./hash-password.js');
    io.out(`${await runHashPassword(process.stdin)}\n`);
    return 0;
  }
  let parsed;
  try {
    parsed = parseFlags(argv, FLAGS);
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
    const { databaseCommand } = await import('./database.js');
    return databaseCommand(positionals.slice(1), { db: values.db, config: values.config }, io);
  }
  if (command === 'health') {
    rejectForeignFlags('health', values);
    if (positionals.length > 1) throw new UserError(`unexpected argument "${positionals[1] ?? ''}"`);
    const { runHealth } = await import('./health.js');
    return runHealth(toOverrides(values), values.pid, io, values.live === true);
  }
  if (positionals.length > 1)
    throw new UserError(
      `unexpected argument "${positionals[1] ?? ''}"\nRun agent-auth-proxy ${command} --help for usage.`,
    );
  rejectForeignFlags(command as FlagCommand, values);
  const cli = toOverrides(values);
  if (command === 'check') {
    const { check } = await import('./check-command.js');
    return check(cli, io);
  }
  if (command === 'serve') {
    const { serve } = await import('./serve.js');
    return serve(cli, values.watch === true);
  }
  const { printCapabilities } = await import('./capabilities.js');
  return printCapabilities(cli, values.json === true, io);
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

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}
