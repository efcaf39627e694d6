/**
 * `agent-auth-proxy admin …`: the operator API (/admin/*, src/http/routes/admin*.ts) from the
 * command line. Each command (admin-commands.ts) is a request built from argv and a formatter for
 * its reply; this runs one: argv, the token, the call, the output. The decisions stay on the
 * server. Exit codes: 0 done, 1 the API refused or could not be reached,
 * 2 a usage mistake (thrown as UserError, printed by cli.ts).
 */
import { processOutput, type CliOutput } from './output.js';
import { readFileSync } from 'node:fs';
import { UserError } from '../errors.js';
import { AdminApiError, adminClient, ConnectionError, parseBaseUrl } from './admin-api.js';
import { COMMANDS, COMMON, HELP, parseAdminArgs, type Values } from './admin-commands.js';
import { plainHttpWarning } from './plain-http.js';

export const ADMIN_USAGE = `Usage:
  agent-auth-proxy admin approvals list [--agent-id ID] [--code USER-CODE]
                         [--limit N] [--cursor CURSOR]
  agent-auth-proxy admin approvals approve ID [--user-id USER] [--capability NAME ...]
                         [--constraints JSON|@FILE] [--reason TEXT]
  agent-auth-proxy admin approvals deny ID [--reason TEXT]
  agent-auth-proxy admin calls list [--status STATUS] [--limit N] [--cursor CURSOR]
  agent-auth-proxy admin calls deny ID [--reason TEXT]
  agent-auth-proxy admin hosts list [--status STATUS] [--user-id USER]
                         [--limit N] [--cursor CURSOR]
  agent-auth-proxy admin hosts show ID
  agent-auth-proxy admin hosts add --public-key JWK|@FILE [--name NAME] [--user-id USER]
                         [--default-capability NAME ...]
  agent-auth-proxy admin hosts link ID --user-id USER
  agent-auth-proxy admin hosts unlink ID
  agent-auth-proxy admin hosts revoke ID
  agent-auth-proxy admin agents list [--host-id ID] [--status STATUS] [--user-id USER]
                         [--limit N] [--cursor CURSOR]
  agent-auth-proxy admin agents show ID
  agent-auth-proxy admin agents revoke ID
  agent-auth-proxy admin passkeys list --user-id USER
  agent-auth-proxy admin passkeys remove --user-id USER (--passkey-id ID | --all)
                         [--reason TEXT]     (also ends the user's sessions)
  agent-auth-proxy admin passkeys code --user-id USER [--ttl DURATION]
                         (sign_in.first_passkey: operator_code; default 24h, from 1m to 7d)
  agent-auth-proxy admin users sign-out --user-id USER [--reason TEXT]
  agent-auth-proxy admin users remove --user-id USER [--reason TEXT]
  agent-auth-proxy admin activity [--agent-id ID] [--host-id ID] [--capability NAME]
                         [--since TIME] [--until TIME] [--limit N] [--cursor CURSOR]

Options of every admin command:
  --url URL          the proxy (default $AGENT_AUTH_PROXY_URL, else http://127.0.0.1:8080);
                     plain http only to this machine (localhost, 127.0.0.0/8, [::1])
  --insecure-http    send the admin token over plain http to another host anyway (with a
                     warning): anyone on the network between can read it
  --token-file FILE  read the admin token from FILE
  --token TOKEN      the admin token (default $AGENT_AUTH_PROXY_ADMIN_TOKEN; argv is visible to
                     other users: prefer the variable or --token-file)
  --json             print the API's JSON reply instead of a table
  -h, --help         this help`;

export const ENV_URL = 'AGENT_AUTH_PROXY_URL';
export const ENV_TOKEN = 'AGENT_AUTH_PROXY_ADMIN_TOKEN';
const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Runs one admin command; returns the exit code. Usage mistakes throw UserError (exit 2). */
export async function runAdmin(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  io: CliOutput = processOutput,
): Promise<number> {
  let parsed: ReturnType<typeof parseAdminArgs>;
  try {
    parsed = parseAdminArgs(argv);
  } catch (err) {
    throw new UserError(`admin: ${(err as Error).message}\n${HELP}`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(`${ADMIN_USAGE}\n`);
    return 0;
  }
  const [group, action] = positionals;
  if (group === undefined) throw new UserError(`admin: missing a command\n${HELP}`);
  const name = group === 'activity' ? group : `${group} ${action ?? ''}`.trim();
  const command = COMMANDS[name];
  if (!command) throw new UserError(`admin: unknown command "${name}"\n${HELP}`);
  const rest = positionals.slice(name.split(' ').length);
  if (command.id !== undefined && rest.length === 0)
    throw new UserError(`admin ${name}: missing the ${command.id} id\n${HELP}`);
  const extra = rest[command.id === undefined ? 0 : 1];
  if (extra !== undefined) throw new UserError(`admin ${name}: unexpected argument "${extra}"\n${HELP}`);
  for (const key of Object.keys(values)) {
    if (!(COMMON as readonly string[]).includes(key) && !(command.flags as readonly string[]).includes(key))
      throw new UserError(`admin ${name} does not take --${key}\n${HELP}`);
  }
  const call = command.request(values, rest[0] ?? '');
  const target = proxyUrl(values, env);
  const client = adminClient(target.url, adminToken(values, env));
  const warning = plainHttpWarning(
    target.url,
    target.from,
    'the admin token',
    values['insecure-http'] === true,
  );
  if (warning !== undefined) io.err(warning);

  try {
    const reply = await client.call(call.method, call.path, call.body);
    io.out(
      values.json
        ? `${JSON.stringify(reply.body, null, 2)}\n`
        : `${command.text(reply.body, reply.status)}\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof AdminApiError) {
      io.err(`error: ${err.code}: ${err.message}\n`);
      if (err.code === 'not_found')
        io.err(
          `hint: ${client.baseUrl} has no operator API; the proxy serves /admin/ only when started with an admin token\n`,
        );
      return 1;
    }
    if (err instanceof ConnectionError) {
      io.err(`error: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

/** --url, else the environment, else the default; with where it came from, for messages. */
function proxyUrl(values: Values, env: NodeJS.ProcessEnv): { url: string; from: string } {
  if (values.url !== undefined) return { url: parseBaseUrl(values.url, '--url'), from: '--url' };
  return { url: parseBaseUrl(env[ENV_URL] || DEFAULT_URL, ENV_URL), from: ENV_URL };
}

/** --token, else --token-file, else the environment. Messages never contain the token. */
function adminToken(values: Values, env: NodeJS.ProcessEnv): string {
  if (values.token !== undefined && values['token-file'] !== undefined)
    throw new UserError('admin: give --token or --token-file, not both');
  let token: string | undefined;
  let from: string;
  if (values.token !== undefined) {
    token = values.token;
    from = '--token';
  } else if (values['token-file'] !== undefined) {
    from = `--token-file ${values['token-file']}`;
    try {
      token = readFileSync(values['token-file'], 'utf8').trim();
    } catch {
      throw new UserError(`${from}: not found or not readable`);
    }
  } else {
    token = env[ENV_TOKEN];
    from = ENV_TOKEN;
  }
  if (!token) {
    throw new UserError(
      from === ENV_TOKEN
        ? `admin: no admin token: set ${ENV_TOKEN} or pass --token-file FILE`
        : `${from}: the admin token is empty`,
    );
  }
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new UserError(`${from}: the admin token must be printable ASCII without whitespace`);
  return token;
}
