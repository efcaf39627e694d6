/**
 * `agent-auth-proxy health`: asks a running proxy's `/readyz` (with `--live`, `/healthz`), exit 0
 * when it answers 200, 1 otherwise. The container HEALTHCHECK asks `--live`: an orchestrator that
 * replaces unhealthy containers must not restart every replica during a database outage, which
 * they would only meet again, losing the activity records they hold meanwhile. The address comes
 * from the same options serve takes (--config, --host, --port), or with `--pid PID` from that
 * process's own command line and working directory (Linux /proc), so a health check follows
 * whatever port the container was started with.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { get } from 'node:http';
import { parseArgs } from 'node:util';
import { resolveListenAddress } from '../config/listen-address.js';
import type { CliOverrides } from '../config/settings.js';
import { UserError } from '../errors.js';
import { FLAGS } from './flags.js';
import type { CliOutput } from './output.js';
import { toOverrides } from './overrides.js';

const TIMEOUT_MS = 3000;

/** Where the proxy started as process `pid` listens: its argv after the CLI script, from its cwd. */
export function addressOfProcess(pid: string): { host: string; port: number } {
  let argv: string[];
  let cwd: string;
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '');
    cwd = readlinkSync(`/proc/${pid}/cwd`);
  } catch (err) {
    throw new UserError(`health --pid ${pid}: cannot read that process (${(err as Error).message})`);
  }
  const script = argv.findIndex((a) => /(?:^|\/)(?:cli\.js|agent-auth-proxy)$/.test(a));
  if (script < 0) throw new UserError(`health --pid ${pid}: that process is not agent-auth-proxy`);
  const args = argv.slice(script + 1);
  if (args[0] === 'serve') args.shift();
  const { values } = parseArgs({ args, options: FLAGS, allowPositionals: true, strict: false });
  return resolveListenAddress(toOverrides(values as Parameters<typeof toOverrides>[0]), cwd);
}

/** The URL of `path` for a listen address: all-interface addresses are asked on loopback. */
export function probeUrl(
  { host, port }: { host: string; port: number },
  path: '/readyz' | '/healthz',
): string {
  if (port === 0) throw new UserError('health: the proxy was started on port 0 (a random port); give --port');
  const probe =
    host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' || host === '[::]' ? '[::1]' : host;
  const bracketed = probe.includes(':') && !probe.startsWith('[') ? `[${probe}]` : probe;
  return `http://${bracketed}:${port}${path}`;
}

export async function runHealth(
  cli: CliOverrides,
  pid: string | undefined,
  io: CliOutput,
  live = false,
): Promise<number> {
  const url = probeUrl(
    pid !== undefined ? addressOfProcess(pid) : resolveListenAddress(cli),
    live ? '/healthz' : '/readyz',
  );
  const [yes, no] = live ? ['live', 'not live'] : ['ready', 'not ready'];
  try {
    const status = await statusOf(url);
    if (status === 200) {
      io.out(`${yes}: ${url}\n`);
      return 0;
    }
    io.err(`${no}: ${url} answered ${status}\n`);
  } catch (err) {
    io.err(`${no}: ${url}: ${(err as Error).message}\n`);
  }
  return 1;
}

/**
 * The status of a GET of `url`, within TIMEOUT_MS. node:http rather than fetch: fetch loads
 * Node's bundled undici, 30 MiB of memory in a command run every few seconds beside the proxy.
 */
export function statusOf(url: string, timeoutMs = TIMEOUT_MS): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false }, (res) => {
      clearTimeout(deadline);
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(deadline);
      reject(err);
    });
  });
}
