/**
 * Replay across restarts (§4.6, §8.4; issue 10 class 3), with the built CLI on a SQLite file: a
 * JWT accepted before the proxy died (SIGKILL, the moment the response arrived) or stopped
 * (SIGTERM) is refused after it starts again on the same database. Accepted jtis are journalled
 * before the request goes on (README "Storage and durability"), so no restart forgets one.
 */
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/cli-process.js';
import { CliProxy, cliWorkspace, type Reply } from '../../helpers/cli-restarts.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';

const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
const ADMIN_TOKEN = 'replay-restart-admin-token-0123456789';
/** A fixed issuer: each process gets a new port, but tokens stay addressed to "this server". */
const ISSUER = 'http://proxy.replay.test';
const POLICY = `
capabilities:
  defaults: [list_pets]
rate_limits:
  per_ip: null
  per_host: null
  per_agent: null
  per_user: null
  unknown_host_registration: null
  # 40 executions at once must all be let through together (the point of the 40-at-once case),
  # above the default cap of 16 upstream calls in flight per agent.
  in_flight_per_agent: 40
`;

const workspace = cliWorkspace('aap-replay-restart-', POLICY);

/** One proxy process on `db` (port 0) and a small client for it. */
class Proxy extends CliProxy {
  static async boot(db: string, extra: readonly string[] = []): Promise<Proxy> {
    return new Proxy(
      await CliProxy.serve(
        workspace,
        ['--spec', PETSTORE, '--issuer', ISSUER, '--db', db, '--policy', workspace.policyFile, ...extra],
        ADMIN_TOKEN,
      ),
    );
  }

  /** SIGTERM: the clean shutdown path. */
  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.exited;
    expect(this.child.exitCode).toBe(0);
  }

  agentToken(agent: TestKey, agentId: string, audience = ISSUER): Promise<string> {
    return agentJwt(agent, agentId, audience);
  }

  hostToken(host: TestKey, extra: Record<string, unknown> = {}): Promise<string> {
    return hostJwt(host, ISSUER, extra);
  }
}

/** A linked host and its active agent (list_pets granted by policy), on a fresh database. */
async function setUp(proxy: Proxy): Promise<{ host: TestKey; agent: TestKey; agentId: string }> {
  const host = await generateTestKey();
  const pre = await proxy.request('POST', '/admin/hosts', ADMIN_TOKEN, {
    public_key: host.publicJwk,
    user_id: 'alice',
  });
  expect(pre.status).toBe(201);
  const agent = await generateTestKey();
  const reg = await proxy.request(
    'POST',
    '/agent/register',
    await proxy.hostToken(host, { agent_public_key: agent.publicJwk }),
    { name: 'replay victim', capabilities: ['list_pets'] },
  );
  expect(reg.status).toBe(200);
  expect(reg.body.status).toBe('active');
  return { host, agent, agentId: reg.body.agent_id };
}

function expectReplayRefused(reply: Reply): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status: 401, error: 'invalid_jwt' });
  expect(reply.body.message).toMatch(/already used/);
}

describe('a JWT accepted before a restart is refused after it (jti journal)', () => {
  it.each([
    ['SIGKILL right after the response', 'kill'],
    ['a clean SIGTERM shutdown', 'term'],
  ] as const)(
    'agent and host JWTs replayed after %s → 401 invalid_jwt',
    async (_name, how) => {
      const db = join(mkdtempSync(join(workspace.tmp, 'db-')), 'proxy.db');
      const first = await Proxy.boot(db);
      const { host, agent, agentId } = await setUp(first);
      const agentToken = await first.agentToken(agent, agentId);
      const hostToken = await first.hostToken(host);
      expect((await first.request('GET', '/capability/list', agentToken)).status).toBe(200);
      expect((await first.request('GET', `/agent/status?agent_id=${agentId}`, hostToken)).status).toBe(200);
      if (how === 'kill') await first.crash();
      else await first.stop();

      const second = await Proxy.boot(db);
      expectReplayRefused(await second.request('GET', '/capability/list', agentToken));
      expectReplayRefused(await second.request('GET', `/agent/status?agent_id=${agentId}`, hostToken));
      // Fresh tokens of the same principals are served: only the used jtis are remembered.
      expect(
        (await second.request('GET', '/capability/list', await second.agentToken(agent, agentId))).status,
      ).toBe(200);
      expect(
        (await second.request('GET', `/agent/status?agent_id=${agentId}`, await second.hostToken(host)))
          .status,
      ).toBe(200);
      await second.crash();
    },
    60_000,
  );

  it('a burst of 40 tokens accepted concurrently, SIGKILL the moment the last answer arrives: every one is refused after restart', async () => {
    const db = join(mkdtempSync(join(workspace.tmp, 'db-')), 'proxy.db');
    const first = await Proxy.boot(db);
    const { agent, agentId } = await setUp(first);
    const tokens = await Promise.all(Array.from({ length: 40 }, () => first.agentToken(agent, agentId)));
    let answered = 0;
    await Promise.all(
      tokens.map(async (token) => {
        const reply = await first.request('GET', '/capability/list', token);
        expect(reply.status).toBe(200);
        if (++answered === tokens.length) first.child.kill('SIGKILL');
      }),
    );
    await first.exited;

    const second = await Proxy.boot(db);
    for (const token of tokens) expectReplayRefused(await second.request('GET', '/capability/list', token));
    await second.crash();
  }, 60_000);

  it('40 executions at once (upstream calls in flight, so their jtis share journal writes), SIGKILL after the last answer: every one is refused after restart', async () => {
    const db = join(mkdtempSync(join(workspace.tmp, 'db-')), 'proxy.db');
    const first = await Proxy.boot(db, ['--mock-upstream']);
    const { agent, agentId } = await setUp(first);
    const execute = `${ISSUER}/capability/execute`;
    const tokens = await Promise.all(
      Array.from({ length: 40 }, () => first.agentToken(agent, agentId, execute)),
    );
    const call = { capability: 'list_pets', arguments: {} };
    let answered = 0;
    await Promise.all(
      tokens.map(async (token) => {
        const reply = await first.request('POST', '/capability/execute', token, call);
        expect(reply.status).toBe(200);
        if (++answered === tokens.length) first.child.kill('SIGKILL');
      }),
    );
    await first.exited;

    const second = await Proxy.boot(db, ['--mock-upstream']);
    for (const token of tokens) {
      expectReplayRefused(await second.request('POST', '/capability/execute', token, call));
    }
    await second.crash();
  }, 60_000);
});
