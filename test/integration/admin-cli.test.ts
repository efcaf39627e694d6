/**
 * `agent-auth-proxy admin …` as an operator runs it, against a real proxy started in-process (real
 * HTTP, real SQLite, real signed JWTs): the commands run in this process (the CLI's own
 * `runAdmin`), and one runs through the built CLI (`node dist/cli.js`) as a child process.
 * Every change the CLI claims is checked through the operator or protocol API, not its output.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../helpers/keys.js';
import { ADMIN_TOKEN, startProtocol, type TestProtocol } from '../helpers/protocol.js';
import { softPasskey } from '../helpers/per-call.js';
import { startTestProxy } from '../helpers/proxy.js';
import { runAdmin } from '../../src/cli/admin.js';
import { userErrorLine } from '../../src/cli/output.js';
import { UserError } from '../../src/errors.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist/cli.js');
const WRONG_TOKEN = 'wrong-admin-token-fedcba9876543210';

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a run: the admin token from the environment (as in the README quick start)
 * unless `env` says otherwise; no AGENT_AUTH_PROXY_* leaks in from the test runner's own. */
function runEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('AGENT_AUTH_PROXY_')),
  );
  return { ...base, AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN, ...env };
}

/**
 * Runs `agent-auth-proxy admin …` in this process (the same `runAdmin` the CLI calls, with its
 * output captured, and a usage mistake shown and counted as the CLI shows it). One test below
 * runs the built CLI as a process, so the wiring is covered too.
 */
async function admin(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<Exited> {
  let stdout = '';
  let stderr = '';
  const io = { out: (t: string) => void (stdout += t), err: (t: string) => void (stderr += t) };
  try {
    const code = await runAdmin(args, runEnv(env), io);
    return { code, stdout, stderr };
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    return { code: 2, stdout, stderr: stderr + userErrorLine(err.message) };
  }
}

/** Runs `node dist/cli.js admin …` to completion, as an operator would. */
function adminProcess(args: readonly string[]): Promise<Exited> {
  const child = spawn(process.execPath, [CLI, 'admin', ...args], {
    cwd: ROOT,
    env: runEnv({}),
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

/** Success: exit 0, nothing on stderr. */
function ok(r: Exited): string {
  expect(r.stderr, r.stdout).toBe('');
  expect(r.code).toBe(0);
  return r.stdout;
}

/** A usage mistake: exit 2, one message on stderr, nothing on stdout. */
function usage(r: Exited, message: string): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).toContain(`agent-auth-proxy: ${message}`);
  expect(r.stderr).not.toContain('    at ');
}

/** An API refusal: exit 1, exactly `error: <code>: <message>` on stderr. */
function apiError(r: Exited, code: string, message: string): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stdout).toBe('');
  expect(r.stderr).toBe(`error: ${code}: ${message}\n`);
}

let p: TestProtocol;
let url = '';
let tmp = '';
beforeAll(async () => {
  if (!existsSync(CLI)) {
    try {
      execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'ignore' });
    } catch {
      // tsc reports type errors with a non-zero exit but still emits; the check below decides.
    }
  }
  expect(existsSync(CLI), `${CLI} is missing: run npm run build`).toBe(true);
  // Several unknown hosts register from 127.0.0.1 here; their rate limit (§8.13) is not under test.
  p = await startProtocol({ policy: 'rate_limits:\n  unknown_host_registration: null\n' });
  url = p.proxy.url;
  tmp = mkdtempSync(join(tmpdir(), 'aap-admin-cli-'));
});
afterAll(async () => {
  await p.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** A new host (unlinked) registering a delegated agent: a pending registration approval (§7). */
async function pendingRegistration(
  capabilities: string[],
): Promise<{ host: TestKey; agentId: string; approvalId: string }> {
  const host = await generateTestKey();
  const reg = await p.register(host, { name: 'cli agent', capabilities });
  expect(reg.status).toBe(200);
  expect(reg.body.status).toBe('pending');
  const approval = await p.pendingApproval(reg.body.agent_id);
  return { host, agentId: reg.body.agent_id, approvalId: approval.id };
}

describe('the built CLI', () => {
  it('runs an admin command as a process: output on stdout, exit 0', async () => {
    const r = await adminProcess(['agents', 'list', '--url', url, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toHaveProperty('agents');
  });

  it('shows a usage mistake as one line on stderr, exit 2', async () => {
    const r = await adminProcess(['agents', 'frobnicate', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('agent-auth-proxy: admin: unknown command "agents frobnicate"');
  });
});

describe('admin approvals (§7)', () => {
  it('list shows a pending registration; --agent-id filters; --json is the API reply', async () => {
    const { agentId, approvalId } = await pendingRegistration(['list_pets', 'get_pet']);
    const text = ok(await admin(['approvals', 'list', '--url', url]));
    const line = text.split('\n').find((l) => l.startsWith(approvalId));
    expect(line).toBeDefined();
    expect(line).toContain(agentId);
    expect(line).toContain('registration');
    expect(line).toContain('cli agent');
    expect(line).toContain('list_pets, get_pet');
    expect(text.split('\n')[0]).toMatch(/^ID\s+KIND\s+AGENT\s+AGENT NAME\s+HOST\s+USER CODE/);

    const one = ok(await admin(['approvals', 'list', '--agent-id', agentId, '--url', url, '--json']));
    const api = await p.admin('GET', `/admin/approvals?agent_id=${agentId}`);
    expect(JSON.parse(one)).toEqual(api.body);
    expect(api.body.approvals).toHaveLength(1);

    expect(ok(await admin(['approvals', 'list', '--agent-id', 'agt_none', '--url', url]))).toBe(
      'no pending approvals\n',
    );
  });

  it('list --code finds the approval behind the code a user read off the device page (§7.1)', async () => {
    const { agentId, approvalId } = await pendingRegistration(['list_pets']);
    const code = (await p.pendingApproval(agentId)).user_code as string;
    // As a user would read it out: lower case, a space for the dash.
    const spoken = code.replace('-', ' ').toLowerCase();
    const found = JSON.parse(
      ok(await admin(['approvals', 'list', '--code', spoken, '--url', url, '--json'])),
    );
    expect(found.approvals.map((a: { id: string }) => a.id)).toEqual([approvalId]);
    expect(ok(await admin(['approvals', 'list', '--code', 'BCDF-GHJK', '--url', url]))).toBe(
      'no pending approvals\n',
    );
    const bad = await admin(['approvals', 'list', '--code', 'not-a-code', '--url', url]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('invalid_request');
  });

  it('the README quick start: approve <id> --user-id alice --url, token from the environment', async () => {
    const { host, agentId, approvalId } = await pendingRegistration(['list_pets']);
    const listed = ok(await admin(['approvals', 'list', '--url', url]));
    expect(listed).toContain(approvalId);
    const out = ok(await admin(['approvals', 'approve', approvalId, '--user-id', 'alice', '--url', url]));
    expect(out).toBe(
      `approved ${approvalId}: agent ${agentId} (cli agent) is active\ngranted: list_pets\ndenied:  -\n`,
    );
    const status = await p.status(host, agentId);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      status: 'active',
      user_id: 'alice',
      agent_capability_grants: [{ capability: 'list_pets', status: 'active', granted_by: 'alice' }],
    });
  });

  it('approve --capability approves only those, the rest are denied with --reason (partial approval)', async () => {
    const { host, agentId, approvalId } = await pendingRegistration(['list_pets', 'get_pet', 'create_pet']);
    const out = ok(
      await admin([
        'approvals',
        'approve',
        approvalId,
        '--user-id',
        'bob',
        '--capability',
        'list_pets',
        '--capability',
        'get_pet',
        '--reason',
        'read only',
        '--url',
        url,
      ]),
    );
    expect(out).toContain('granted: list_pets, get_pet\ndenied:  create_pet\n');
    const status = await p.status(host, agentId);
    expect(status.body).toMatchObject({
      status: 'active',
      user_id: 'bob',
      agent_capability_grants: [
        { capability: 'list_pets', status: 'active', granted_by: 'bob' },
        { capability: 'get_pet', status: 'active', granted_by: 'bob' },
        { capability: 'create_pet', status: 'denied', reason: 'read only' },
      ],
    });
    // §2.9: approving a delegated agent of an unlinked host links the host to the approver's user.
    const hostId = status.body.host_id;
    expect((await p.admin('GET', `/admin/hosts/${hostId}`)).body.user_id).toBe('bob');

    // A decided approval cannot be decided again.
    apiError(
      await admin(['approvals', 'deny', approvalId, '--url', url]),
      'approval_closed',
      `Approval request "${approvalId}" is approved.`,
    );
  });

  it('approve --constraints narrows a grant (§2.13), inline or from @FILE', async () => {
    const { host, agentId, approvalId } = await pendingRegistration(['list_pets']);
    const file = join(tmp, 'constraints.json');
    writeFileSync(file, JSON.stringify({ list_pets: { limit: { max: 10 } } }));
    const json = ok(
      await admin([
        'approvals',
        'approve',
        approvalId,
        '--user-id',
        'carol',
        '--constraints',
        `@${file}`,
        '--url',
        url,
        '--json',
      ]),
    );
    const reply = JSON.parse(json);
    expect(reply).toMatchObject({ id: approvalId, status: 'approved', approved: ['list_pets'], denied: [] });
    const status = await p.status(host, agentId);
    expect(status.body.agent_capability_grants).toMatchObject([
      { capability: 'list_pets', status: 'active', constraints: { limit: { max: 10 } } },
    ]);

    // Constraints the server refuses come back as the API's error, exit 1.
    const other = await pendingRegistration(['list_pets']);
    apiError(
      await admin([
        'approvals',
        'approve',
        other.approvalId,
        '--user-id',
        'carol',
        '--constraints',
        '{"get_pet":{"petId":1}}',
        '--url',
        url,
      ]),
      'invalid_request',
      'constraints.get_pet: that capability was not requested.',
    );
    expect((await p.pendingApproval(other.agentId))?.id).toBe(other.approvalId);
  });

  it('deny --reason rejects the registration', async () => {
    const { agentId, approvalId } = await pendingRegistration(['create_pet']);
    const out = ok(await admin(['approvals', 'deny', approvalId, '--reason', 'not this one', '--url', url]));
    expect(out).toBe(`denied ${approvalId}: agent ${agentId} (cli agent) is rejected\ndenied:  create_pet\n`);
    // §7.1: a denied registration is terminal; the reason is kept on the grant.
    const agent = await p.admin('GET', `/admin/agents/${agentId}`);
    expect(agent.body).toMatchObject({
      status: 'rejected',
      agent_capability_grants: [{ capability: 'create_pet', status: 'denied', reason: 'not this one' }],
    });
    expect(await p.pendingApproval(agentId)).toBeUndefined();
  });

  it('an unknown approval id is the API error approval_not_found', async () => {
    apiError(
      await admin(['approvals', 'approve', 'apr_nope', '--url', url]),
      'approval_not_found',
      'No approval request "apr_nope".',
    );
  });
});

describe('admin hosts (§2.8 pre-registration, §2.9 linking, §5.10 revocation)', () => {
  it('add pre-registers a linked host with defaults; list and show find it', async () => {
    const key = await generateTestKey();
    const file = join(tmp, 'host.jwk.json');
    writeFileSync(file, JSON.stringify(key.publicJwk));
    const out = ok(
      await admin([
        'hosts',
        'add',
        '--name',
        'ci runner',
        '--public-key',
        `@${file}`,
        '--user-id',
        'dave',
        '--default-capability',
        'list_pets',
        '--default-capability',
        'get_pet',
        '--url',
        url,
      ]),
    );
    expect(out).toMatch(/^created host\n\nhost: +hst_/);
    const hostId = /host: +(\S+)/.exec(out)?.[1] ?? '';
    const api = await p.admin('GET', `/admin/hosts/${hostId}`);
    expect(api.status).toBe(200);
    expect(api.body).toMatchObject({
      name: 'ci runner',
      status: 'active',
      user_id: 'dave',
      default_capabilities: ['list_pets', 'get_pet'],
      pre_registered: true,
      public_key: key.publicJwk,
    });

    // The same key again (inline JWK this time) updates the host: 200, not a second host.
    const again = ok(
      await admin(['hosts', 'add', '--public-key', JSON.stringify(key.publicJwk), '--url', url, '--json']),
    );
    expect(JSON.parse(again)).toMatchObject({ host_id: hostId, default_capabilities: [] });

    const listed = ok(await admin(['hosts', 'list', '--user-id', 'dave', '--url', url]));
    expect(listed.split('\n').filter((l) => l.startsWith('hst_'))).toHaveLength(1);
    expect(listed).toContain(hostId);
    expect(listed).toContain('1 host\n');
    const listedJson = JSON.parse(
      ok(await admin(['hosts', 'list', '--status', 'active', '--url', url, '--json'])),
    );
    expect(listedJson).toEqual((await p.admin('GET', '/admin/hosts?status=active')).body);
    expect(listedJson.hosts.map((h: { host_id: string }) => h.host_id)).toContain(hostId);
    expect(ok(await admin(['hosts', 'list', '--status', 'revoked', '--url', url]))).toBe('no hosts\n');

    const reg = await p.register(key, { name: 'runner agent' });
    expect(reg.status).toBe(200);
    const shown = ok(await admin(['hosts', 'show', hostId, '--url', url]));
    expect(shown).toMatch(/^user: +dave$/m);
    expect(shown).toMatch(/^pre-registered: +yes$/m);
    expect(shown).toMatch(new RegExp(`^${reg.body.agent_id} +active +delegated +runner agent$`, 'm'));
  });

  it('add refuses unknown default capabilities (invalid_capabilities) and creates nothing', async () => {
    const key = await generateTestKey();
    const before = (await p.admin('GET', '/admin/hosts')).body.hosts.length;
    apiError(
      await admin([
        'hosts',
        'add',
        '--public-key',
        JSON.stringify(key.publicJwk),
        '--default-capability',
        'no_such_capability',
        '--url',
        url,
      ]),
      'invalid_capabilities',
      'Unknown or blocked capabilities: no_such_capability.',
    );
    expect((await p.admin('GET', '/admin/hosts')).body.hosts.length).toBe(before);
  });

  it('link, unlink (revokes delegated agents) and revoke (cascades)', async () => {
    const key = await generateTestKey();
    const added = JSON.parse(
      ok(
        await admin(['hosts', 'add', '--public-key', JSON.stringify(key.publicJwk), '--url', url, '--json']),
      ),
    );
    const hostId: string = added.host_id;
    expect(added.user_id).toBeNull();

    expect(ok(await admin(['hosts', 'link', hostId, '--user-id', 'erin', '--url', url]))).toBe(
      `linked host ${hostId} to erin; 0 autonomous agents claimed\n`,
    );
    expect((await p.admin('GET', `/admin/hosts/${hostId}`)).body.user_id).toBe('erin');

    // A delegated agent of the linked host with a default-free registration, approved.
    const reg = await p.register(key, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    if (approval)
      expect((await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {})).status).toBe(200);
    expect((await p.status(key, reg.body.agent_id)).body.status).toBe('active');

    expect(ok(await admin(['hosts', 'unlink', hostId, '--url', url]))).toBe(
      `unlinked host ${hostId}; 1 delegated agent revoked\n`,
    );
    expect((await p.admin('GET', `/admin/hosts/${hostId}`)).body.user_id).toBeNull();
    expect((await p.admin('GET', `/admin/agents/${reg.body.agent_id}`)).body.status).toBe('revoked');
    apiError(
      await admin(['hosts', 'unlink', hostId, '--url', url]),
      'invalid_request',
      `Host ${hostId} is not linked to a user.`,
    );

    expect(ok(await admin(['hosts', 'revoke', hostId, '--url', url]))).toBe(
      `revoked host ${hostId}; 0 agents revoked\n`,
    );
    expect((await p.admin('GET', `/admin/hosts/${hostId}`)).body.status).toBe('revoked');
    apiError(
      await admin(['hosts', 'link', hostId, '--user-id', 'erin', '--url', url]),
      'host_revoked',
      'The host has been revoked.',
    );
  });

  it('show of an unknown host is host_not_found', async () => {
    apiError(
      await admin(['hosts', 'show', 'hst_nope', '--url', url]),
      'host_not_found',
      'No host "hst_nope".',
    );
  });
});

describe('admin agents and activity', () => {
  it('list --host-id, show with grants, revoke (§2.6) and the activity it leaves', async () => {
    const { hostId, agent, agentId } = await p.activeAgent(['list_pets', 'get_pet']);

    const listed = ok(await admin(['agents', 'list', '--host-id', hostId, '--url', url]));
    expect(listed).toMatch(/^AGENT ID\s+STATUS\s+MODE\s+HOST ID\s+USER\s+CREATED\s+NAME$/m);
    expect(listed).toMatch(
      new RegExp(`^${agentId} +active +delegated +${hostId} +alice +\\S+ +test agent$`, 'm'),
    );
    expect(listed).toContain('1 agent\n');
    const listedJson = JSON.parse(
      ok(await admin(['agents', 'list', '--host-id', hostId, '--url', url, '--json'])),
    );
    expect(listedJson).toEqual((await p.admin('GET', `/admin/agents?host_id=${hostId}`)).body);
    expect(
      ok(await admin(['agents', 'list', '--host-id', hostId, '--status', 'revoked', '--url', url])),
    ).toBe('no agents\n');

    const shown = ok(await admin(['agents', 'show', agentId, '--url', url]));
    expect(shown).toMatch(/^status: +active$/m);
    expect(shown).toMatch(/^CAPABILITY\s+STATUS\s+GRANTED BY/m);
    const shownJson = JSON.parse(ok(await admin(['agents', 'show', agentId, '--url', url, '--json'])));
    expect(shownJson).toEqual((await p.admin('GET', `/admin/agents/${agentId}`)).body);
    for (const grant of shownJson.agent_capability_grants) {
      expect(grant.status).toBe('active');
      expect(shown).toMatch(new RegExp(`^${grant.capability} +active +${grant.granted_by} +- +-$`, 'm'));
    }
    expect(shownJson.agent_capability_grants.map((g: { capability: string }) => g.capability)).toEqual([
      'list_pets',
      'get_pet',
    ]);

    expect(ok(await admin(['agents', 'revoke', agentId, '--url', url]))).toBe(`revoked agent ${agentId}\n`);
    expect((await p.admin('GET', `/admin/agents/${agentId}`)).body.status).toBe('revoked');
    const after = await p.request('GET', '/capability/list', { token: await p.agentToken(agent, agentId) });
    expect(after.status).toBe(403);
    expect(after.body.error).toBe('agent_revoked');

    const activity = ok(await admin(['activity', '--agent-id', agentId, '--url', url]));
    expect(activity).toMatch(/^ID\s+AT\s+TYPE\s+OUTCOME\s+AGENT/m);
    expect(activity).toMatch(new RegExp(`agent\\.revoked +revoked +${agentId}`));
    const json = JSON.parse(ok(await admin(['activity', '--agent-id', agentId, '--url', url, '--json'])));
    expect(json).toEqual((await p.admin('GET', `/admin/activity?agent_id=${agentId}`)).body);
    expect(json.activity.map((e: { type: string }) => e.type)).toContain('agent.revoked');

    const first = JSON.parse(ok(await admin(['activity', '--limit', '1', '--url', url, '--json'])));
    expect(first.activity).toHaveLength(1);
    const cursor: string = first.next_cursor;
    expect(cursor).toBe(String(first.activity[0].id));
    const page = ok(await admin(['activity', '--limit', '1', '--url', url]));
    expect(page).toMatch(new RegExp(`\\n1 event; more with --cursor ${cursor}\\n$`));
    const next = JSON.parse(
      ok(await admin(['activity', '--limit', '1', '--cursor', cursor, '--url', url, '--json'])),
    );
    expect(next.activity[0].id).toBeLessThan(first.activity[0].id);
  });

  it('show and revoke of an unknown agent are agent_not_found', async () => {
    apiError(
      await admin(['agents', 'show', 'agt_nope', '--url', url]),
      'agent_not_found',
      'No agent "agt_nope".',
    );
    apiError(
      await admin(['agents', 'revoke', 'agt_nope', '--url', url]),
      'agent_not_found',
      'No agent "agt_nope".',
    );
  });
});

describe('admin passkeys (a person who lost theirs)', () => {
  it('list shows them; remove --passkey-id takes one, --all the rest; each change seen through the API', async () => {
    // An ID that starts with '-' (base64url, one in 32) must paste back after --passkey-id.
    const lost = await softPasskey(p, 'zoe', Buffer.from([0xf8, ...randomBytes(15)]));
    expect(lost.id.startsWith('-')).toBe(true);
    const other = await softPasskey(p, 'zoe');
    const listed = ok(await admin(['passkeys', 'list', '--user-id', 'zoe', '--url', url]));
    expect(listed.split('\n')[0]).toMatch(/^ID\s+NAME\s+ADDED\s+LAST USED$/);
    expect(listed).toContain(`${lost.id}  test key`);
    expect(listed).toContain(other.id);
    expect(listed).toContain('2 passkeys of user zoe');

    const one = ok(
      await admin([
        'passkeys',
        'remove',
        '--user-id',
        'zoe',
        '--passkey-id',
        lost.id,
        '--reason',
        'lost',
        '--url',
        url,
      ]),
    );
    expect(one.split('\n')[0]).toBe('removed 1 passkey of user zoe; 0 sessions ended');
    expect(one).toContain(lost.id);
    const left = await p.admin('GET', '/admin/users/zoe/passkeys');
    expect((left.body.passkeys as { id: string }[]).map((k) => k.id)).toEqual([other.id]);

    const json = JSON.parse(
      ok(await admin(['passkeys', 'remove', '--user-id', 'zoe', '--all', '--url', url, '--json'])),
    );
    expect(json).toMatchObject({ user_id: 'zoe', removed: [{ id: other.id }], sessions_ended: 0 });
    expect(ok(await admin(['passkeys', 'list', '--user-id', 'zoe', '--url', url]))).toBe(
      'user zoe has no passkeys\n',
    );
    apiError(
      await admin(['passkeys', 'remove', '--user-id', 'zoe', '--all', '--url', url]),
      'passkey_not_found',
      'User "zoe" has no passkeys.',
    );
    // This proxy enrols a first passkey on a fresh sign-in alone: no code to issue.
    const code = await admin(['passkeys', 'code', '--user-id', 'zoe', '--url', url]);
    expect(code.code).toBe(1);
    expect(code.stderr).toContain('error: invalid_request: This proxy asks for no enrolment code');
  });
});

describe('admin token, URL and connection failures', () => {
  it('a wrong token is invalid_token (exit 1), and the token is never echoed', async () => {
    const file = join(tmp, 'wrong-token');
    writeFileSync(file, `${WRONG_TOKEN}\n`);
    for (const [args, env] of [
      [['approvals', 'list', '--url', url], { AGENT_AUTH_PROXY_ADMIN_TOKEN: WRONG_TOKEN }],
      [['hosts', 'list', '--url', url, '--token', WRONG_TOKEN], {}],
      [['agents', 'list', '--url', url, '--token-file', file], { AGENT_AUTH_PROXY_ADMIN_TOKEN: undefined }],
    ] as const) {
      const r = await admin(args, env);
      apiError(r, 'invalid_token', 'The admin token is not valid.');
      expect(r.stderr + r.stdout).not.toContain(WRONG_TOKEN);
      expect(r.stderr + r.stdout).not.toContain(ADMIN_TOKEN);
    }
  });

  it('--token-file and --token take precedence over the environment', async () => {
    const file = join(tmp, 'good-token');
    writeFileSync(file, `${ADMIN_TOKEN}\n`);
    const env = { AGENT_AUTH_PROXY_ADMIN_TOKEN: WRONG_TOKEN };
    ok(await admin(['hosts', 'list', '--url', url, '--token-file', file], env));
    ok(await admin(['hosts', 'list', '--url', url, '--token', ADMIN_TOKEN], env));
  });

  it('AGENT_AUTH_PROXY_URL is used when --url is absent; --url wins over it', async () => {
    ok(await admin(['hosts', 'list'], { AGENT_AUTH_PROXY_URL: url }));
    const closed = await closedPortUrl();
    const r = await admin(['hosts', 'list', '--url', closed], { AGENT_AUTH_PROXY_URL: url });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach the proxy at ${closed}:`);
  });

  it('an unreachable proxy: exit 1 with a message naming the URL', async () => {
    const closed = await closedPortUrl();
    const r = await admin(['approvals', 'list', '--url', closed]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `error: cannot reach the proxy at ${closed}: connection refused (is the proxy running?)\n`,
    );
    expect(r.stderr).not.toContain(ADMIN_TOKEN);
  });

  it('a proxy without the operator API: not_found with a hint (exit 1)', async () => {
    const plain = await startTestProxy();
    try {
      const r = await admin(['hosts', 'list', '--url', plain.url]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^error: not_found: .+\nhint: .*admin token/);
    } finally {
      await plain.close();
    }
  });
});

// Regression (F7): the CLI allowed --limit up to 1000 for every listing and any --ttl, so a value
// the server refuses was sent, and the mistake came back as exit 1 after a request.
describe('--limit and --ttl are checked against the bounds the server has', () => {
  const LISTINGS: [command: string[], path: string, max: number][] = [
    [['approvals', 'list'], '/admin/approvals', 1000],
    [['calls', 'list'], '/admin/per-call-approvals', 200],
    [['hosts', 'list'], '/admin/hosts', 1000],
    [['agents', 'list'], '/admin/agents', 1000],
    [['activity'], '/admin/activity', 1000],
  ];

  it('each listing takes its own maximum and refuses one more (exit 2), as the server does', async () => {
    for (const [command, path, max] of LISTINGS) {
      ok(await admin([...command, '--limit', String(max), '--url', url]));
      usage(
        await admin([...command, '--limit', String(max + 1), '--url', url]),
        `--limit "${max + 1}": must be a whole number from 1 to ${max}`,
      );
      expect((await p.admin('GET', `${path}?limit=${max + 1}`)).status, path).toBe(400);
    }
  });

  it('--ttl at the bounds reaches the server, which takes it', async () => {
    // This proxy issues no codes: a --ttl the server accepted meets that refusal, not the ttl one.
    for (const ttl of ['60s', '1m', '7d', '168h']) {
      const r = await admin(['passkeys', 'code', '--user-id', 'zoe', '--ttl', ttl, '--url', url]);
      expect(r.code, ttl).toBe(1);
      expect(r.stderr, ttl).toContain('error: invalid_request: This proxy asks for no enrolment code');
    }
  });
});

// Regression (F9): a repeated flag silently took the last value (`--user-id a --user-id b` acted for b).
describe('a flag given twice', () => {
  it('is refused (exit 2) before any request, naming it and not its values', async () => {
    const closed = await closedPortUrl();
    for (const [flag, args] of [
      ['user-id', ['hosts', 'list', '--user-id', 'a', '--user-id', 'b']],
      ['url', ['hosts', 'list', '--url', closed]],
      ['token', ['hosts', 'list', '--token', 'first-token-0123456789', '--token', 'second-token-0123456789']],
      ['json', ['hosts', 'list', '--json', '--json']],
    ] as const) {
      const r = await admin([...args, '--url', closed]);
      usage(r, `admin: Option '--${flag}' is given more than once; give it once`);
      expect(r.stderr).not.toContain('-token-0123456789');
    }
  });
  // A repeatable flag (--capability) stays repeatable: the partial approval test above repeats it.
});

// Regression (F6): the admin token went over plain http to any host, without a word.
describe('plain http to a host other than this machine', () => {
  const REMOTE = 'http://proxy.invalid:8080';

  it('is refused (exit 2) before any request, naming --url and --insecure-http', async () => {
    const r = await admin(['hosts', 'list', '--url', REMOTE]);
    usage(
      r,
      `--url: ${REMOTE} is plain http to a host other than this machine, which would send the admin token in clear text; use https://, or pass --insecure-http to allow it`,
    );
    expect(r.stderr).not.toContain(ADMIN_TOKEN);
  });

  it('is refused from AGENT_AUTH_PROXY_URL too, naming the variable', async () => {
    usage(
      await admin(['hosts', 'list'], { AGENT_AUTH_PROXY_URL: 'http://10.0.0.7:8080' }),
      'AGENT_AUTH_PROXY_URL: http://10.0.0.7:8080 is plain http to a host other than this machine',
    );
  });

  it('--insecure-http sends it anyway, after a one-line warning on stderr', async () => {
    const r = await admin(['hosts', 'list', '--url', REMOTE, '--insecure-http']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const [warning, error] = r.stderr.split('\n');
    expect(warning).toBe(
      `warning: --insecure-http: sending the admin token to ${REMOTE} over plain http, readable on the way`,
    );
    expect(error).toMatch(/^error: cannot reach the proxy at http:\/\/proxy\.invalid:8080: /);
    expect(r.stderr).not.toContain(ADMIN_TOKEN);
  });

  it('loopback over http needs no flag and prints no warning; https needs none either', async () => {
    const port = new URL(url).port;
    ok(await admin(['hosts', 'list', '--url', `http://localhost:${port}`]));
    ok(await admin(['hosts', 'list', '--url', `http://127.0.0.1:${port}`]));
    const tls = await admin(['hosts', 'list', '--url', 'https://proxy.invalid:8443']);
    expect(tls.code).toBe(1);
    expect(tls.stderr).toMatch(/^error: cannot reach the proxy at https:\/\/proxy\.invalid:8443: /);
  });
});

describe('usage mistakes exit 2 before any request', () => {
  // Every case points at a closed port: reaching the network would exit 1, not 2.
  let closed = '';
  beforeAll(async () => {
    closed = await closedPortUrl();
  });

  const cases: [string, string[], string, Record<string, string | undefined>?][] = [
    ['no command', [], 'admin: missing a command'],
    ['an unknown command', ['hosts', 'frobnicate'], 'admin: unknown command "hosts frobnicate"'],
    ['a missing id', ['approvals', 'approve'], 'admin approvals approve: missing the approval id'],
    [
      'an extra argument',
      ['hosts', 'show', 'hst_1', 'hst_2'],
      'admin hosts show: unexpected argument "hst_2"',
    ],
    [
      'an option the command does not take',
      ['hosts', 'list', '--capability', 'x'],
      'admin hosts list does not take --capability',
    ],
    ['an unknown option', ['hosts', 'list', '--bogus'], "admin: Unknown option '--bogus'"],
    [
      '--constraints that is not JSON',
      ['approvals', 'approve', 'apr_1', '--constraints', '{nope'],
      '--constraints: not valid JSON',
    ],
    [
      '--constraints that is not an object',
      ['approvals', 'approve', 'apr_1', '--constraints', '[]'],
      '--constraints: must be a JSON object',
    ],
    [
      'hosts add without --public-key',
      ['hosts', 'add', '--name', 'x'],
      'admin hosts add: --public-key is required',
    ],
    [
      'a --public-key file that is missing',
      ['hosts', 'add', '--public-key', '@/nonexistent/key.json'],
      '--public-key @/nonexistent/key.json: not found or not readable',
    ],
    ['hosts link without --user-id', ['hosts', 'link', 'hst_1'], 'admin hosts link: --user-id is required'],
    ['passkeys list without --user-id', ['passkeys', 'list'], 'admin passkeys list: --user-id is required'],
    [
      'users sign-out without --user-id',
      ['users', 'sign-out'],
      'admin users sign-out: --user-id is required',
    ],
    [
      'passkeys remove with neither --passkey-id nor --all',
      ['passkeys', 'remove', '--user-id', 'zoe'],
      'admin passkeys remove: give --passkey-id ID or --all, not both',
    ],
    [
      'passkeys code with a --ttl that is not a duration',
      ['passkeys', 'code', '--user-id', 'zoe', '--ttl', 'soon'],
      '--ttl: invalid duration "soon"',
    ],
    [
      'passkeys remove with both --passkey-id and --all',
      ['passkeys', 'remove', '--user-id', 'zoe', '--passkey-id', 'k1', '--all'],
      'admin passkeys remove: give --passkey-id ID or --all, not both',
    ],
    [
      'an unknown --status',
      ['agents', 'list', '--status', 'sleeping'],
      '--status "sleeping": must be one of pending, active, expired, revoked, rejected, claimed',
    ],
    [
      'a --limit out of range',
      ['activity', '--limit', '0'],
      '--limit "0": must be a whole number from 1 to 1000',
    ],
    [
      'calls list with a --limit over its maximum (200, not 1000)',
      ['calls', 'list', '--limit', '500'],
      '--limit "500": must be a whole number from 1 to 200',
    ],
    [
      'passkeys code with a --ttl over 7 days',
      ['passkeys', 'code', '--user-id', 'zoe', '--ttl', '8d'],
      '--ttl "8d": must be from 1m to 7d',
    ],
    [
      'passkeys code with a --ttl under a minute',
      ['passkeys', 'code', '--user-id', 'zoe', '--ttl', '30s'],
      '--ttl "30s": must be from 1m to 7d',
    ],
    [
      'the same flag twice',
      ['hosts', 'list', '--user-id', 'a', '--user-id', 'b'],
      "admin: Option '--user-id' is given more than once; give it once",
    ],
    [
      'a plain-http --url to another host',
      ['hosts', 'list', '--url', 'http://proxy.invalid:8080'],
      '--url: http://proxy.invalid:8080 is plain http to a host other than this machine',
    ],
    [
      'a --since that is not a time',
      ['activity', '--since', 'yesterday'],
      '--since "yesterday": must be an ISO 8601 time',
    ],
    [
      'two --capability filters for activity',
      ['activity', '--capability', 'a', '--capability', 'b'],
      'admin activity: --capability filters by one capability',
    ],
    [
      '--token and --token-file together',
      ['hosts', 'list', '--token', 'x', '--token-file', 'y'],
      'admin: give --token or --token-file, not both',
    ],
    [
      'no token at all',
      ['hosts', 'list'],
      'admin: no admin token: set AGENT_AUTH_PROXY_ADMIN_TOKEN or pass --token-file FILE',
      { AGENT_AUTH_PROXY_ADMIN_TOKEN: undefined },
    ],
    [
      'a token with whitespace',
      ['hosts', 'list'],
      'AGENT_AUTH_PROXY_ADMIN_TOKEN: the admin token must be printable ASCII without whitespace',
      { AGENT_AUTH_PROXY_ADMIN_TOKEN: 'abc def' },
    ],
    [
      'a URL that is not http',
      ['hosts', 'list', '--url', 'ftp://127.0.0.1/'],
      '--url: must be an http:// or https:// URL',
    ],
    [
      'a URL with credentials',
      ['hosts', 'list', '--url', 'http://u:p@127.0.0.1:1/'],
      '--url: must not contain credentials',
    ],
  ];
  for (const [title, args, message, env] of cases) {
    it(title, async () => {
      const withUrl = args.includes('--url') ? args : [...args, '--url', closed];
      usage(await admin(withUrl, env), message);
    });
  }

  it('--help prints the admin usage with every command (exit 0)', async () => {
    const out = ok(await admin(['--help']));
    for (const command of [
      'approvals list',
      'approvals approve',
      'approvals deny',
      'hosts list',
      'hosts show',
      'hosts add',
      'hosts link',
      'hosts unlink',
      'hosts revoke',
      'agents list',
      'agents show',
      'agents revoke',
      'passkeys list',
      'passkeys remove',
      'passkeys code',
      'users sign-out',
      'activity',
    ])
      expect(out).toContain(`agent-auth-proxy admin ${command}`);
  });
});

/** A URL on 127.0.0.1 where nothing listens (a port just freed). */
async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
