/**
 * `agent-auth-proxy agent …` (issue 12) as a newcomer runs it, against a real proxy (real HTTP on
 * 127.0.0.1, real SQLite, the built-in mock upstream): init writes a 0600 key file; register
 * prints the code (§5.3, §7.1), which the operator API approves while `--wait` polls; request
 * (§5.4), execute (§5.11), a refused execution, revoke (§5.7). The commands run in this process
 * through runCli with the proxy's test clock as the CLI's clock, so polling never sleeps for
 * real; one test runs the built CLI as a process.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { CLI, ensureBuiltCli, ROOT } from '../helpers/cli-process.js';
import { startGateway } from '../helpers/gateway.js';
import { startProtocol, type TestProtocol } from '../helpers/protocol.js';
import { json } from '../helpers/upstream.js';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

let p: TestProtocol;
let dir: string;
const sleeps: number[] = [];

beforeAll(async () => {
  // A short approval lifetime keeps the expiry test to a dozen polls.
  p = await startProtocol({
    overrides: { mockUpstream: true },
    policy: 'approval:\n  expires_in: 1m\n  interval: 5s\n',
  });
  dir = mkdtempSync(join(tmpdir(), 'aap-agent-cli-'));
});
afterAll(async () => {
  await p.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs `agent-auth-proxy agent …` in process. The CLI sleeps by moving the proxy's clock;
 * `duringSleep` runs at each sleep with the output so far, as a user acting meanwhile would.
 */
async function agent(
  args: readonly string[],
  duringSleep?: (stdout: string) => Promise<void>,
  proxy: TestProtocol = p,
): Promise<Ran> {
  const ran = { code: 0, stdout: '', stderr: '' };
  const io = { out: (t: string) => void (ran.stdout += t), err: (t: string) => void (ran.stderr += t) };
  const runtime = {
    now: () => proxy.clock.now(),
    sleep: async (ms: number) => {
      sleeps.push(ms);
      proxy.clock.advance(ms);
      if (duringSleep) await duringSleep(ran.stdout);
    },
  };
  ran.code = await runCli(['agent', ...args], io, runtime);
  return ran;
}

/** The operator approves the approval whose user code the CLI printed (§7.1). */
function approveFromOutput(proxy: TestProtocol = p): (stdout: string) => Promise<void> {
  let done = false;
  return async (stdout) => {
    if (done) return;
    const code = /enter the code (\S+)\)/.exec(stdout)?.[1];
    expect(code, stdout).toBeDefined();
    const list = await proxy.admin('GET', `/admin/approvals?user_code=${encodeURIComponent(code ?? '')}`);
    const approval = list.body.approvals[0];
    const ok = await proxy.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    done = true;
  };
}

describe('agent init', () => {
  it('writes a host and an agent key pair to a file only its owner can read', async () => {
    const file = join(dir, 'init', 'agent.json');
    const ran = await agent(['init', '--file', file]);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain('mode 0600');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    expect(stored.host_key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', d: expect.any(String) });
    expect(stored.agent_key.x).not.toBe(stored.host_key.x);
  });

  it('refuses to overwrite a key file without --force', async () => {
    const file = join(dir, 'twice.json');
    expect((await agent(['init', '--file', file])).code).toBe(0);
    const before = readFileSync(file, 'utf8');
    const again = await agent(['init', '--file', file]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already exists.*--force/);
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect((await agent(['init', '--file', file, '--force'])).code).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toBe(before);
  });

  it('refuses a key file that group or others can read', async () => {
    const file = join(dir, 'open.json');
    expect((await agent(['init', '--file', file, '--url', p.proxy.url])).code).toBe(0);
    chmodSync(file, 0o644);
    const ran = await agent(['status', '--file', file]);
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain('its mode is 0644, open to group or others: run chmod 600');
  });
});

describe('agent register → approve → execute → revoke', () => {
  const file = (): string => join(dir, 'flow.json');

  it('registers, prints the verification URI and code, and --wait sees the approval', async () => {
    expect((await agent(['init', '--file', file()])).code).toBe(0);
    const ran = await agent(
      [
        'register',
        '--file',
        file(),
        '--url',
        p.proxy.url,
        '--name',
        'smoke',
        '--capability',
        'get_pet',
        '--wait',
      ],
      approveFromOutput(),
    );
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toContain(`To approve, open ${p.issuer}/device?code=`);
    expect(ran.stdout).toMatch(/agent is active\ncapabilities:\n {2}get_pet +active/);
    expect(ran.code).toBe(0);
    // Polled at the advertised interval (§5.3), on the test clock.
    expect(sleeps.at(-1)).toBe(5000);
    const stored = JSON.parse(readFileSync(file(), 'utf8'));
    expect(stored).toMatchObject({ url: p.proxy.url, agent_id: expect.any(String) });
    expect(statSync(file()).mode & 0o777).toBe(0o600);
  });

  it('status shows the agent and its grants (§5.5)', async () => {
    const ran = await agent(['status', '--file', file(), '--json']);
    expect(ran.code).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: 'active', user_id: 'alice' });
  });

  it('requests a capability (§5.4) and waits for its approval', async () => {
    const ran = await agent(
      ['request', '--file', file(), '--capability', 'delete_pet', '--wait'],
      approveFromOutput(),
    );
    expect(ran.stderr).toBe('');
    expect(ran.stdout).toMatch(/decided:\n[\s\S]*delete_pet +active/);
    expect(ran.code).toBe(0);
  });

  it('request --wait fails (exit 1) when the capability is denied, so a script does not go on', async () => {
    let denied = false;
    const ran = await agent(
      ['request', '--file', file(), '--capability', 'create_pet', '--wait'],
      async (stdout) => {
        if (denied) return;
        const code = /enter the code (\S+)\)/.exec(stdout)?.[1];
        const list = await p.admin('GET', `/admin/approvals?user_code=${encodeURIComponent(code ?? '')}`);
        const id = list.body.approvals[0].id as string;
        expect((await p.admin('POST', `/admin/approvals/${id}/deny`, { reason: 'no' })).status).toBe(200);
        denied = true;
      },
    );
    expect(ran.stdout).toMatch(/decided:\n[\s\S]*create_pet +denied/);
    expect(ran.code).toBe(1);
  });

  it('lists capabilities with their grant status', async () => {
    const ran = await agent(['capabilities', '--file', file()]);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toMatch(/^get_pet +granted/m);
    expect(ran.stdout).toMatch(/^list_pets +not_granted/m);
  });

  it('executes with JSON arguments and prints the upstream data (§5.11)', async () => {
    const ran = await agent(['execute', 'get_pet', '--file', file(), '--args', '{"petId": 7}']);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ name: expect.any(String) });
  });

  it("prints the proxy's error as error: code: message and exits 1", async () => {
    const ran = await agent(['execute', 'list_pets', '--file', file()]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/^error: capability_not_granted: .+\n$/);
  });

  it('revokes the agent (§5.7); a later execution is refused', async () => {
    const revoked = await agent(['revoke', '--file', file()]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(/: revoked\n$/);
    const ran = await agent(['execute', 'get_pet', '--file', file(), '--args', '{"petId": 7}']);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/^error: agent_revoked: /);
    // §5.3: the same agent key cannot register again; the CLI says what to do.
    const again = await agent(['register', '--file', file(), '--capability', 'get_pet']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^error: agent_exists: .+\n.*agent init --force/);
  });
});

describe('agent usage and bounds', () => {
  it('stops polling when the approval expires, and exits 1', async () => {
    const file = join(dir, 'expire.json');
    expect((await agent(['init', '--file', file])).code).toBe(0);
    const start = p.clock.now();
    const ran = await agent([
      'register',
      '--file',
      file,
      '--url',
      p.proxy.url,
      '--capability',
      'get_pet',
      '--wait',
    ]);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toContain('expired before anyone decided');
    // Bounded by the approval's expires_in (1m), not by anything else.
    expect(p.clock.now() - start).toBe(60_000);
  });

  it('usage mistakes exit 2 without contacting the proxy', async () => {
    const file = join(dir, 'usage.json');
    expect((await agent(['init', '--file', file, '--url', p.proxy.url])).code).toBe(0);
    const cases = [
      ['execute', '--file', file],
      ['frobnicate', '--file', file],
      ['execute', 'get_pet', '--file', file, '--args', '[1]'],
      ['request', '--file', file],
      ['status', '--file', file, '--force'],
    ];
    for (const args of cases) {
      const ran = await agent(args);
      expect(ran.code, args.join(' ')).toBe(2);
      expect(ran.stderr).toMatch(/^agent-auth-proxy: /);
    }
    const bad = await agent(['register', '--file', file, '--capability', 'a', '--constraints', '{"b": {}}']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--constraints names "b", which is not one of the --capability names');
    const unregistered = await agent(['status', '--file', file]);
    expect(unregistered.code).toBe(2);
    expect(unregistered.stderr).toContain('run agent-auth-proxy agent register first');
  });

  it('agent --help documents every command', async () => {
    const ran = await agent(['--help']);
    expect(ran.code).toBe(0);
    for (const command of ['init', 'register', 'status', 'capabilities', 'request', 'execute', 'revoke'])
      expect(ran.stdout).toContain(`agent-auth-proxy agent ${command}`);
    let top = '';
    expect(await runCli(['--help'], { out: (t) => void (top += t), err: () => undefined })).toBe(0);
    expect(top).toContain('agent-auth-proxy agent init|register|');
  });

  it('an unreachable proxy is an error (exit 1), not a crash', async () => {
    // A port that was free a moment ago: nothing listens there.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const file = join(dir, 'unreachable.json');
    expect((await agent(['init', '--file', file, '--url', `http://127.0.0.1:${port}`])).code).toBe(0);
    const ran = await agent(['register', '--file', file]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toBe(
      `error: cannot reach http://127.0.0.1:${port}/.well-known/agent-configuration: connection refused (is the proxy running?)\n`,
    );
  });

  it('register passes --constraints per capability (§2.13) and --mode', async () => {
    const file = join(dir, 'constrained.json');
    expect((await agent(['init', '--file', file, '--url', p.proxy.url])).code).toBe(0);
    const ran = await agent(
      ['register', '--file', file, '--capability', 'get_pet', '--mode', 'delegated', '--json'].concat([
        '--constraints',
        '{"get_pet": {"petId": {"max": 10}}}',
      ]),
    );
    expect(ran.code, ran.stderr).toBe(0);
    const body = JSON.parse(ran.stdout);
    expect(body.status).toBe('pending');
    const approval = await p.pendingApproval(body.agent_id);
    expect(JSON.stringify(approval)).toContain('"max":10');
  });

  it('the built CLI runs agent init as a process, the file from $AGENT_AUTH_FILE', () => {
    expect(ensureBuiltCli()).toBe(true);
    const file = join(dir, 'process', 'agent.json');
    const init = spawnSync(process.execPath, [CLI, 'agent', 'init'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, AGENT_AUTH_FILE: file },
    });
    expect(init.stderr).toBe('');
    expect(init.status).toBe(0);
    expect(init.stdout).toContain(`created ${file} (mode 0600)`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});

// Regression (F6): the agent's signed JWTs (bearer credentials until they expire) went over plain
// http to any host without a word.
describe('agent: plain http to a host other than this machine', () => {
  const REMOTE = 'http://proxy.invalid:8080';
  const refused = (from: string, url: string): string =>
    `agent-auth-proxy: ${from}: ${url} is plain http to a host other than this machine, which would send signed agent tokens (bearer credentials until they expire) in clear text; use https://, or pass --insecure-http to allow it\n`;

  it('is refused (exit 2) before any request, whether the URL is --url, stored or the variable', async () => {
    const file = join(dir, 'remote.json');
    // init sends nothing: it stores the URL, and the commands that send refuse it.
    expect((await agent(['init', '--file', file, '--url', REMOTE])).code).toBe(0);
    const stored = await agent(['status', '--file', file]);
    expect(stored).toEqual({ code: 2, stdout: '', stderr: refused(`the proxy URL in ${file}`, REMOTE) });
    const given = await agent(['register', '--file', file, '--url', 'http://10.1.2.3:8080']);
    expect(given).toEqual({ code: 2, stdout: '', stderr: refused('--url', 'http://10.1.2.3:8080') });
    const bare = join(dir, 'remote-env.json');
    expect((await agent(['init', '--file', bare])).code).toBe(0);
    vi.stubEnv('AGENT_AUTH_PROXY_URL', REMOTE);
    try {
      const env = await agent(['register', '--file', bare]);
      expect(env).toEqual({ code: 2, stdout: '', stderr: refused('AGENT_AUTH_PROXY_URL', REMOTE) });
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('--insecure-http allows it, after a one-line warning on stderr', async () => {
    const file = join(dir, 'remote-insecure.json');
    expect((await agent(['init', '--file', file, '--url', REMOTE])).code).toBe(0);
    const ran = await agent(['register', '--file', file, '--insecure-http']);
    expect(ran.code).toBe(1);
    const [warning, error] = ran.stderr.split('\n');
    expect(warning).toBe(
      `warning: --insecure-http: sending signed agent tokens (bearer credentials until they expire) to ${REMOTE} over plain http, readable on the way`,
    );
    expect(error).toMatch(
      /^error: cannot reach http:\/\/proxy\.invalid:8080\/\.well-known\/agent-configuration: /,
    );
  });

  it('http on 127.0.0.1 (the proxy of every other test here) needs no flag and warns of nothing', async () => {
    const file = join(dir, 'loopback.json');
    expect((await agent(['init', '--file', file, '--url', p.proxy.url])).code).toBe(0);
    const ran = await agent(['register', '--file', file, '--capability', 'get_pet']);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
  });
});

// Regression (F9): a repeated flag silently took the last value.
describe('agent: a flag given twice', () => {
  it('is refused (exit 2) naming it, before the key file or the proxy is touched', async () => {
    for (const [flag, args] of [
      ['file', ['status', '--file', join(dir, 'a.json'), '--file', join(dir, 'b.json')]],
      ['name', ['register', '--name', 'a', '--name', 'b']],
      ['url', ['register', '--url', p.proxy.url, '--url', p.proxy.url]],
    ] as const) {
      const ran = await agent(args);
      expect(ran).toEqual({
        code: 2,
        stdout: '',
        stderr: `agent-auth-proxy: agent: Option '--${flag}' is given more than once; give it once\nRun agent-auth-proxy agent --help for usage.\n`,
      });
    }
  });
});

describe('agent execute --wait on an async capability (§5.11)', () => {
  it('follows the 202 status_url with a fresh JWT per poll, backing off, and prints the result', async () => {
    const gw = await startGateway();
    try {
      const file = join(dir, 'async.json');
      expect((await agent(['init', '--file', file, '--url', gw.p.proxy.url], undefined, gw.p)).code).toBe(0);
      const registered = await agent(
        // Polling the status URL needs the grant of the operation it maps to (get_job).
        ['register', '--file', file, '--capability', 'start_job', '--capability', 'get_job', '--wait'],
        approveFromOutput(gw.p),
        gw.p,
      );
      expect(registered.code, registered.stderr).toBe(0);
      gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, {}, { location: '/v1/jobs/9' }));
      let polls = 0;
      gw.upstream.on('GET /v1/jobs/9', (_req, res) => {
        polls += 1;
        if (polls < 3) json(res, 200, { status: 'running' });
        else json(res, 200, { status: 'completed', result: { rows: 9 } });
      });
      const pending = await agent(
        ['execute', 'start_job', '--file', file, '--args', '{"size": 1}'],
        undefined,
        gw.p,
      );
      expect(pending.code).toBe(0);
      expect(pending.stdout).toMatch(
        /^pending: poll http:\/\/.+\/capability\/status\/\S+ \(or run again with --wait\)\n$/,
      );
      sleeps.length = 0;
      const ran = await agent(
        ['execute', 'start_job', '--file', file, '--args', '{"size": 1}', '--wait'],
        undefined,
        gw.p,
      );
      expect(ran.stderr).toBe('');
      expect(ran.code).toBe(0);
      expect(JSON.parse(ran.stdout)).toEqual({ rows: 9 });
      expect(sleeps).toEqual([1000, 2000, 4000]);
    } finally {
      await gw.close();
    }
  });
});

describe('agent --dpop (§4.4)', () => {
  it('binds every JWT and proves it, so capabilities the policy lists in capabilities.dpop run', async () => {
    const gw = await startGateway({
      policy: [
        'rate_limits:',
        '  unknown_host_registration: null',
        'capabilities:',
        '  dpop: [list_items, start_job]',
      ].join('\n'),
    });
    try {
      const file = join(dir, 'dpop.json');
      expect((await agent(['init', '--file', file, '--url', gw.p.proxy.url], undefined, gw.p)).code).toBe(0);
      const registered = await agent(
        // Registration and its status polls with host JWTs bound and proven too.
        [
          'register',
          '--file',
          file,
          '--dpop',
          '--capability',
          'list_items',
          '--capability',
          'start_job',
          '--wait',
        ],
        approveFromOutput(gw.p),
        gw.p,
      );
      expect(registered.code, registered.stderr).toBe(0);
      gw.upstream.on('GET /v1/items', (_req, res) => json(res, 200, [{ id: 'i1' }]));

      const plain = await agent(['execute', 'list_items', '--file', file], undefined, gw.p);
      expect(plain.code).toBe(1);
      expect(plain.stderr).toMatch(/^error: invalid_jwt: list_items needs a DPoP-bound agent JWT/);
      expect(gw.upstream.received('/v1/items')).toHaveLength(0);

      const proven = await agent(['execute', 'list_items', '--file', file, '--dpop'], undefined, gw.p);
      expect(proven.stderr).toBe('');
      expect(JSON.parse(proven.stdout)).toEqual([{ id: 'i1' }]);

      // A GET with a query (the listing) and a POST (a request) are proven as well.
      const listed = await agent(['capabilities', '--file', file, '--dpop'], undefined, gw.p);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toMatch(/^list_items\s+granted/m);
      const requested = await agent(
        ['request', '--file', file, '--dpop', '--capability', 'get_job'],
        undefined,
        gw.p,
      );
      expect(requested.code, requested.stderr).toBe(0);

      // The async job's status polls carry proofs too (the poll of a listed capability needs one).
      await gw.p.admin('POST', `/admin/approvals/${await pendingApprovalId(gw.p)}/approve`, {});
      gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, {}, { location: '/v1/jobs/5' }));
      gw.upstream.on('GET /v1/jobs/5', (_req, res) => json(res, 200, { status: 'completed', result: 5 }));
      const ran = await agent(
        ['execute', 'start_job', '--file', file, '--args', '{"size": 1}', '--wait', '--dpop'],
        undefined,
        gw.p,
      );
      expect(ran.stderr).toBe('');
      expect(JSON.parse(ran.stdout)).toBe(5);
      const revoked = await agent(['revoke', '--file', file, '--dpop'], undefined, gw.p);
      expect(revoked.code, revoked.stderr).toBe(0);
      expect(revoked.stdout).toContain('revoked');
    } finally {
      await gw.close();
    }
  });
});

async function pendingApprovalId(proxy: TestProtocol): Promise<string> {
  const list = await proxy.admin('GET', '/admin/approvals');
  const [approval] = list.body.approvals as { id: string }[];
  expect(approval).toBeDefined();
  return approval?.id ?? '';
}
