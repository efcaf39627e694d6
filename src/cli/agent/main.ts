/**
 * `agent-auth-proxy agent …`: a small Agent Auth client for trying the proxy and smoke-testing a
 * deployment. It speaks only the protocol over HTTP (it imports nothing from src/protocol or
 * src/storage). Exit codes: 0 done, 1 the proxy refused or could not be reached (printed as
 * `error: <code>: <message>`), 2 a usage mistake (a UserError, printed by main.ts).
 */
import { UserError } from '../../errors.js';
import { ConnectionError, parseBaseUrl } from '../admin-api.js';
import type { CliOutput } from '../output.js';
import { parseFlags } from '../parse-flags.js';
import { jsonObject, oneOf, requested } from './args.js';
import { ProxyError } from './client.js';
import { createKeyFile, keyFilePath } from './key-file.js';
import { register, revoke, status } from './lifecycle.js';
import { openSession, realRuntime, type AgentRuntime, type Session } from './session.js';
import { thumbprint } from './signer.js';
import { capabilities, execute, requestCapability } from './use.js';

export const AGENT_USAGE = `Usage:
  agent-auth-proxy agent init [--force]
  agent-auth-proxy agent register --url URL [--name NAME] [--capability NAME ...]
                         [--constraints JSON|@FILE] [--mode delegated|autonomous] [--reason TEXT]
                         [--wait]
  agent-auth-proxy agent status
  agent-auth-proxy agent capabilities
  agent-auth-proxy agent request --capability NAME ... [--constraints JSON|@FILE] [--reason TEXT]
                         [--wait]
  agent-auth-proxy agent execute CAPABILITY [--args JSON|@FILE] [--wait]
  agent-auth-proxy agent revoke

A client of the Agent Auth Protocol for trying the proxy and smoke-testing a deployment: init
creates a host and an agent key pair (Ed25519) in a file only its owner may read; register asks
the proxy for the agent and prints where to approve it (with --wait, polls until decided or
expired); execute runs a capability with JSON arguments and prints its data.

Options of every agent command:
  --file FILE    the key file (default $AGENT_AUTH_FILE, else ./.agent-auth/agent.json; mode 0600)
  --url URL      the proxy (default: the one stored by register, else $AGENT_AUTH_PROXY_URL)
  --json         print the proxy's JSON replies instead of text
  --dpop         bind each JWT to the key that signs it and send a DPoP proof with it (§4.4, RFC
                 9449), as the proxy requires for capabilities its policy lists in capabilities.dpop
  --insecure-http
                 allow a plain-http URL of a host other than this machine (localhost,
                 127.0.0.0/8, [::1]), with a warning: every signed token is a bearer credential
                 until it expires, readable by anyone on the network between
  -h, --help     this help
--constraints is an object keyed by capability name, e.g. '{"list_pets":{"limit":{"max":10}}}'.`;

const HELP = 'Run agent-auth-proxy agent --help for usage.';

const OPTIONS = {
  file: { type: 'string' },
  url: { type: 'string' },
  json: { type: 'boolean' },
  dpop: { type: 'boolean' },
  'insecure-http': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  force: { type: 'boolean' },
  name: { type: 'string' },
  capability: { type: 'string', multiple: true },
  constraints: { type: 'string' },
  mode: { type: 'string' },
  reason: { type: 'string' },
  wait: { type: 'boolean' },
  args: { type: 'string' },
} as const;

type Values = ReturnType<typeof parse>['values'];
const COMMON = new Set(['file', 'url', 'json', 'dpop', 'insecure-http', 'help']);
/** The flags each command takes beyond the common ones, and how many positionals. */
const COMMANDS: Readonly<Record<string, { flags: readonly string[]; positionals: number }>> = {
  init: { flags: ['force'], positionals: 0 },
  register: { flags: ['name', 'capability', 'constraints', 'mode', 'reason', 'wait'], positionals: 0 },
  status: { flags: [], positionals: 0 },
  capabilities: { flags: [], positionals: 0 },
  request: { flags: ['capability', 'constraints', 'reason', 'wait'], positionals: 0 },
  execute: { flags: ['args', 'wait'], positionals: 1 },
  revoke: { flags: [], positionals: 0 },
};

function parse(argv: readonly string[]) {
  try {
    return parseFlags(argv, OPTIONS);
  } catch (err) {
    throw new UserError(`agent: ${(err as Error).message}\n${HELP}`);
  }
}

export async function runAgent(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  io: CliOutput,
  runtime: AgentRuntime = realRuntime,
): Promise<number> {
  const { values, positionals } = parse(argv);
  const [name, ...rest] = positionals;
  if (values.help) {
    io.out(`${AGENT_USAGE}\n`);
    return 0;
  }
  if (name === undefined) throw new UserError(`agent: a command is required\n${HELP}`);
  const command = COMMANDS[name];
  if (command === undefined) throw new UserError(`agent: unknown command "${name}"\n${HELP}`);
  for (const flag of Object.keys(values)) {
    if (!COMMON.has(flag) && !command.flags.includes(flag))
      throw new UserError(`agent ${name} does not take --${flag}\n${HELP}`);
  }
  if (rest.length !== command.positionals)
    throw new UserError(`agent ${name}: expected ${command.positionals || 'no'} argument(s)\n${HELP}`);
  const path = keyFilePath(values.file, env);
  if (name === 'init') return init(path, values, io);
  try {
    const s = await openSession({
      path,
      url: values.url,
      env,
      runtime,
      io,
      json: values.json === true,
      dpop: values.dpop === true,
      insecureHttp: values['insecure-http'] === true,
    });
    return await dispatch(s, name, rest[0] ?? '', values);
  } catch (err) {
    if (err instanceof ProxyError) {
      io.err(`error: ${err.code}: ${err.message}\n`);
      // §5.3: a key registers once; a new attempt needs a new agent key.
      if (err.code === 'agent_exists')
        io.err(
          `This agent key is already registered: see agent status, or agent init --force for new keys.\n`,
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

function init(path: string, v: Values, io: CliOutput): number {
  const url = v.url === undefined ? undefined : parseBaseUrl(v.url, '--url');
  const file = createKeyFile(path, v.force === true, url);
  const keys = { file: path, host: thumbprint(file.host_key), agent_key: thumbprint(file.agent_key) };
  io.out(
    v.json
      ? `${JSON.stringify(keys, null, 2)}\n`
      : `created ${path} (mode 0600) with a host key (${keys.host}) and an agent key (${keys.agent_key})\n` +
          'next: agent-auth-proxy agent register --url URL --capability NAME --wait\n',
  );
  return 0;
}

function dispatch(s: Session, name: string, positional: string, v: Values): Promise<number> {
  switch (name) {
    case 'register':
      return register(s, {
        name: v.name ?? 'agent-auth-proxy agent',
        capabilities: requested(v, false),
        mode: oneOf('--mode', v.mode, ['delegated', 'autonomous']),
        reason: v.reason,
        wait: v.wait === true,
      });
    case 'status':
      return status(s);
    case 'capabilities':
      return capabilities(s);
    case 'request':
      return requestCapability(s, requested(v, true), v.reason, v.wait === true);
    case 'execute':
      return execute(
        s,
        positional,
        v.args === undefined ? undefined : jsonObject('--args', v.args),
        v.wait === true,
      );
    default:
      return revoke(s);
  }
}
