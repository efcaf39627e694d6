/**
 * The README quick start end to end, as an operator runs it (issue 4): the BUILT CLI
 * (`node dist/cli.js`) serves the bundled petstore in front of a real recording upstream; a host
 * registers an agent (§5.3), the operator approves it with `admin approvals` (§7), the agent
 * executes (§5.11) with real signed JWTs, the host revokes it (§5.7), and the next execution
 * fails with 403 agent_revoked without reaching the upstream.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';
import { json, TestUpstream, type RecordedRequest } from '../../helpers/upstream.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = join(ROOT, 'dist/cli.js');
const PETSTORE = 'examples/openapi/petstore.yaml';
const ADMIN_TOKEN = 'quickstart-admin-token-0123456789abcdef';

/** Newest modification time of any file under `dir` (recursively). */
function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** Builds dist/ when it is missing or older than src/ (the test must run what an operator runs). */
function ensureBuilt(): void {
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= newest(join(ROOT, 'src'))) return;
  try {
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'ignore' });
  } catch {
    // tsc reports type errors with a non-zero exit but still emits; the check below decides.
  }
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
}

/** The environment of the children: the runner's own, without any AGENT_AUTH_PROXY_* of it. */
function childEnv(): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('AGENT_AUTH_PROXY_')),
  );
  return { ...base, AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN };
}

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node dist/cli.js admin …` to completion; the admin token comes from the environment. */
function adminCli(args: readonly string[]): Promise<Exited> {
  const child = spawn(process.execPath, [CLI, 'admin', ...args], {
    cwd: ROOT,
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts the server and resolves with its `listening` log line (JSON on stdout). */
function serve(
  args: readonly string[],
): Promise<{ child: ChildProcess; listening: Record<string, unknown> }> {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server = child;
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line within 20 s: ${stderr}`)), 20_000);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      for (const line of stdout.slice(0, stdout.lastIndexOf('\n') + 1).split('\n')) {
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          if (entry.msg === 'listening') {
            clearTimeout(timer);
            resolve({ child, listening: entry });
            return;
          }
        } catch {
          // not a log line
        }
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code ?? signal}) before listening: ${stderr}`));
    });
  });
}

async function call(
  method: string,
  url: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

let server: ChildProcess | undefined;
let upstream: TestUpstream;
let tmp = '';
let url = '';

beforeAll(async () => {
  ensureBuilt();
  upstream = await TestUpstream.start();
  tmp = mkdtempSync(join(tmpdir(), 'aap-quickstart-'));
  const { listening } = await serve([
    '--spec',
    PETSTORE,
    '--upstream',
    `${upstream.url}/v1`,
    '--port',
    '0',
    '--db',
    join(tmp, 'proxy.db'),
  ]);
  url = String(listening.url);
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(listening.admin_api).toBe(true);
}, 180_000);

afterAll(async () => {
  const child = server;
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    process.kill(child.pid, 'SIGKILL');
    await exited;
  }
  await upstream?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('README quick start: register → approve (admin CLI) → execute → revoke → execute fails', () => {
  it('runs end to end against the built CLI and a real upstream', async () => {
    const host: TestKey = await generateTestKey();
    const agent: TestKey = await generateTestKey();
    const executeLocation = `${url}/capability/execute`;
    const agentToken = (agentId: string): Promise<string> => agentJwt(agent, agentId, executeLocation);

    // §5.1 discovery says where to execute.
    const config: any = await (await fetch(`${url}/.well-known/agent-configuration`)).json();
    expect(config.issuer).toBe(url);
    expect(JSON.stringify(config)).toContain(executeLocation);

    // §5.3: an unknown host registers a delegated agent for get_pet and create_pet → pending.
    const reg = await call(
      'POST',
      `${url}/agent/register`,
      await hostJwt(host, url, { agent_public_key: agent.publicJwk }),
      { name: 'quick start agent', capabilities: ['get_pet', 'create_pet'] },
    );
    expect(reg.status).toBe(200);
    expect(reg.body.status).toBe('pending');
    const agentId: string = reg.body.agent_id;

    // Before approval the host (new, self-signed) and its agent are pending: no access (§4.5
    // checks the host first; §8.10 self-attestation), and the upstream sees nothing.
    const early = await call('POST', executeLocation, await agentToken(agentId), {
      capability: 'get_pet',
      arguments: { petId: 1 },
    });
    expect(early.status).toBe(403);
    expect(early.body.error).toBe('host_pending');
    expect(upstream.requests).toHaveLength(0);

    // §7: the operator approves from the admin CLI, as in the README.
    const listed = await adminCli(['approvals', 'list', '--url', url, '--json']);
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    const approvals = (JSON.parse(listed.stdout) as { approvals: { id: string; agent_id: string }[] })
      .approvals;
    const approval = approvals.find((a) => a.agent_id === agentId);
    expect(approval).toBeDefined();
    const approved = await adminCli([
      'approvals',
      'approve',
      (approval as { id: string }).id,
      '--user-id',
      'alice',
      '--url',
      url,
    ]);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    expect(approved.stdout).toContain(`agent ${agentId}`);
    expect(approved.stdout).toMatch(/granted: get_pet, create_pet\n/);

    const status = await call(
      'GET',
      `${url}/agent/status?agent_id=${encodeURIComponent(agentId)}`,
      await hostJwt(host, url),
    );
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ status: 'active', user_id: 'alice' });

    // §5.11: get_pet reaches GET /v1/pets/7 with none of the agent's credentials.
    upstream.on('GET /v1/pets/7', (_req, res) =>
      json(res, 200, { id: 7, name: 'Rex', species: 'dog', status: 'available' }),
    );
    const getToken = await agentToken(agentId);
    const got = await call('POST', executeLocation, getToken, {
      capability: 'get_pet',
      arguments: { petId: 7 },
    });
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: { id: 7, name: 'Rex', species: 'dog', status: 'available' } });
    expect(upstream.requests).toHaveLength(1);
    const get = upstream.requests[0] as RecordedRequest;
    expect(get.method).toBe('GET');
    expect(get.url).toBe('/v1/pets/7');
    expect(get.headers.authorization).toBeUndefined();
    expect(JSON.stringify(get.headers)).not.toContain(getToken);
    expect(JSON.stringify(get.headers)).not.toContain(getToken.split('.')[2] as string);

    // create_pet sends the JSON body and relays the 201's JSON as data.
    upstream.on('POST /v1/pets', (req, res) => {
      const pet = JSON.parse(req.body.toString('utf8')) as Record<string, unknown>;
      json(res, 201, { id: 8, status: 'available', ...pet });
    });
    const createToken = await agentToken(agentId);
    const created = await call('POST', executeLocation, createToken, {
      capability: 'create_pet',
      arguments: { name: 'Tom', species: 'cat' },
    });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ data: { id: 8, status: 'available', name: 'Tom', species: 'cat' } });
    expect(upstream.requests).toHaveLength(2);
    const post = upstream.requests[1] as RecordedRequest;
    expect(post.method).toBe('POST');
    expect(post.url).toBe('/v1/pets');
    expect(post.headers['content-type']).toBe('application/json');
    expect(JSON.parse(post.body.toString('utf8'))).toEqual({ name: 'Tom', species: 'cat' });
    expect(post.headers.authorization).toBeUndefined();
    expect(JSON.stringify(post.headers)).not.toContain(createToken);

    // §5.7: the host revokes the agent.
    const revoked = await call('POST', `${url}/agent/revoke`, await hostJwt(host, url), {
      agent_id: agentId,
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ agent_id: agentId, status: 'revoked' });

    // Execute now fails with 403 agent_revoked (§4.5, §5.13), for both capabilities; nothing
    // more reaches the upstream.
    for (const [capability, args] of [
      ['get_pet', { petId: 7 }],
      ['create_pet', { name: 'Jerry', species: 'dog' }],
    ] as const) {
      const after = await call('POST', executeLocation, await agentToken(agentId), {
        capability,
        arguments: args,
      });
      expect(after.status, capability).toBe(403);
      expect(after.body.error, capability).toBe('agent_revoked');
    }
    expect(upstream.requests).toHaveLength(2);
  });
});
