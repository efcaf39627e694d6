/**
 * The serve/capabilities command line: each flag once, with its argument and help, so the parser
 * (node:util parseArgs reads `type`, `multiple`, `short`) and `--help` cannot disagree.
 */
export type FlagCommand = 'serve' | 'capabilities' | 'check' | 'db' | 'health';

/** `db` commands work on the database alone: where it is, and nothing else. */
const DB_FLAGS: ReadonlySet<string> = new Set(['db', 'config', 'help', 'version']);

/** `health` needs only where the proxy listens. */
const HEALTH_FLAGS: ReadonlySet<string> = new Set([
  'config',
  'host',
  'port',
  'pid',
  'live',
  'help',
  'version',
]);

export interface FlagSpec {
  readonly type: 'string' | 'boolean';
  readonly multiple?: boolean;
  readonly short?: string;
  /** The argument's name in the help, e.g. FILE. */
  readonly arg?: string;
  readonly help: string;
  /** The one command that takes this flag; without it, both do. */
  readonly only?: FlagCommand;
}

export const FLAGS = {
  spec: { type: 'string', multiple: true, arg: 'FILE|URL', help: 'OpenAPI document (repeatable)' },
  upstream: {
    type: 'string',
    multiple: true,
    arg: 'URL',
    help: 'base URL of the API (once for all specs, or once per --spec)',
  },
  config: {
    type: 'string',
    arg: 'FILE',
    help: 'YAML config (several APIs, filters, prefixes); see config/proxy.example.yaml',
  },
  host: { type: 'string', only: 'serve', arg: 'HOST', help: 'listen address (default 127.0.0.1)' },
  port: {
    type: 'string',
    only: 'serve',
    arg: 'PORT',
    help: 'listen port (default 8080; 0 picks a free one)',
  },
  workers: {
    type: 'string',
    only: 'serve',
    arg: 'N',
    help: 'processes serving the port (node:cluster; default 1); more than 1 needs --db postgres://…',
  },
  'internal-port': {
    type: 'string',
    only: 'serve',
    arg: 'PORT',
    help: 'serve /metrics, /healthz, /readyz and /admin/ on this port (server.internal_host, default 127.0.0.1); the public port then answers 404 for /metrics and /admin/',
  },
  issuer: {
    type: 'string',
    only: 'serve',
    arg: 'URL',
    help: 'public base URL advertised to agents (default http://HOST:PORT)',
  },
  db: {
    type: 'string',
    only: 'serve',
    arg: 'FILE',
    help: 'SQLite file (default ./data/agent-auth-proxy.db), or a postgres:// URL (password: AGENT_AUTH_PROXY_DB_PASSWORD)',
  },
  policy: {
    type: 'string',
    only: 'serve',
    arg: 'FILE',
    help: 'policy YAML (default: built-in policy); see config/policy.example.yaml',
  },
  'admin-token': {
    type: 'string',
    only: 'serve',
    arg: 'TOKEN',
    help: 'enable the operator API under /admin/ (prefer the env variable AGENT_AUTH_PROXY_ADMIN_TOKEN or --admin-token-file: argv is visible)',
  },
  'admin-token-file': { type: 'string', only: 'serve', arg: 'FILE', help: 'read the admin token from FILE' },
  'introspection-token': {
    type: 'string',
    only: 'serve',
    arg: 'TOKEN',
    help: 'token for POST /agent/introspect (or AGENT_AUTH_PROXY_INTROSPECTION_TOKEN)',
  },
  'introspection-token-file': {
    type: 'string',
    only: 'serve',
    arg: 'FILE',
    help: 'read the introspection token from FILE',
  },
  'upstream-header': {
    type: 'string',
    multiple: true,
    arg: '"NAME: VALUE"',
    help: 'static header on every upstream request of the --spec APIs (repeatable; for secrets prefer a config file with headers: {NAME: {env: VAR}})',
  },
  'upstream-timeout': {
    type: 'string',
    arg: 'DURATION',
    help: 'upstream timeout for the --spec APIs, e.g. 10s or 500ms (default 30s)',
  },
  watch: {
    type: 'boolean',
    only: 'serve',
    help: 'reload when the config, policy or a local OpenAPI file changes (as SIGHUP)',
  },
  'mock-upstream': {
    type: 'boolean',
    only: 'serve',
    help: 'answer every operation from its OpenAPI example (no real API needed)',
  },
  'allow-remote-refs': { type: 'boolean', help: 'allow $refs to http(s) URLs inside specs' },
  'allow-local-refs-anywhere': {
    type: 'boolean',
    help: "allow a local spec's $refs to files outside its own directory",
  },
  'allow-http-specs': { type: 'boolean', help: 'allow plain-http spec URLs' },
  'log-level': { type: 'string', arg: 'LEVEL', help: 'debug | info | warn | error | silent (default info)' },
  'log-format': {
    type: 'string',
    only: 'serve',
    arg: 'FORMAT',
    help: 'json (one object per line) | pretty (human-readable) (default json)',
  },
  json: { type: 'boolean', only: 'capabilities', help: 'machine-readable output' },
  live: {
    type: 'boolean',
    only: 'health',
    help: 'ask /healthz (the process works) instead of /readyz (it can serve now): what a check that restarts the container should ask',
  },
  pid: {
    type: 'string',
    only: 'health',
    arg: 'PID',
    help: "read the address from that proxy process's own command line (Linux /proc), e.g. 1 in a container",
  },
  help: { type: 'boolean', short: 'h', help: 'this help' },
  version: { type: 'boolean', short: 'v', help: 'print the version' },
} as const satisfies Record<string, FlagSpec>;

const WIDTH = 24;

/** Whether `command` takes the flag `name`. */
export function takesFlag(command: FlagCommand, name: string): boolean {
  const spec: FlagSpec | undefined = (FLAGS as Record<string, FlagSpec>)[name];
  if (command === 'db') return DB_FLAGS.has(name);
  if (command === 'health') return HEALTH_FLAGS.has(name);
  // check validates a serve command line, so it takes serve's flags.
  const as = command === 'check' ? 'serve' : command;
  return spec !== undefined && (spec.only === undefined || spec.only === as);
}

/**
 * The options part of `--help`, from FLAGS (those of `command`, or all): name and argument, then
 * the help wrapped at 100.
 */
export function flagsHelp(command?: FlagCommand): string {
  const lines: string[] = [];
  for (const [name, spec] of Object.entries(FLAGS) as [string, FlagSpec][]) {
    if (command && !takesFlag(command, name)) continue;
    const head = `  ${spec.short ? `-${spec.short}, ` : ''}--${name}${spec.arg ? ` ${spec.arg}` : ''}`;
    const words = wrap(spec.help, 100 - WIDTH);
    if (head.length < WIDTH) {
      lines.push(`${head.padEnd(WIDTH)}${words[0] ?? ''}`);
    } else {
      lines.push(head, `${' '.repeat(WIDTH)}${words[0] ?? ''}`);
    }
    for (const rest of words.slice(1)) lines.push(`${' '.repeat(WIDTH)}${rest}`);
  }
  return lines.join('\n');
}

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') out.push(line);
  return out;
}
