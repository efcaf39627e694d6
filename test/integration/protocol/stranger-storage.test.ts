/**
 * Storage from strangers (issue 10 class 1; §2.11, §8.10, §10.9): any self-signed key may register
 * (§5.3), so what a host nobody approved can make the proxy store is bounded per request (entries,
 * bytes, nesting of constraints: policy capability_requests), per pending host (agents, open
 * approvals) and in total (pending hosts: policy pending_hosts), and pending rows are deleted after
 * lifetimes.pending_cleanup. Real HTTP, real signed JWTs; the SQLite file is counted directly.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

// Rate limits off: the bounds below must hold on their own, whatever the limiter allows.
const NO_RATE_LIMITS = `
rate_limits:
  per_ip: null
  per_agent: null
  per_host: null
  per_user: null
  unknown_host_registration: null
`;

let p: TestProtocol | undefined;
let dbFile = '';
afterEach(async () => {
  await p?.close();
  p = undefined;
});

async function start(policy = ''): Promise<TestProtocol> {
  dbFile = tempDbFile();
  p = await startProtocol({ policy: `${NO_RATE_LIMITS}${policy}`, overrides: { db: dbFile } });
  return p;
}

interface Counts {
  hosts: number;
  pendingHosts: number;
  agents: number;
  grants: number;
  approvals: number;
}

/** Row counts read straight from the database file (WAL: a second reader sees every commit). */
function counts(): Counts {
  const db = new Database(dbFile, { readonly: true });
  try {
    const n = (sql: string): number => (db.prepare(sql).get() as { n: number }).n;
    return {
      hosts: n('SELECT count(*) AS n FROM hosts'),
      pendingHosts: n("SELECT count(*) AS n FROM hosts WHERE status = 'pending'"),
      agents: n('SELECT count(*) AS n FROM agents'),
      grants: n('SELECT count(*) AS n FROM grants'),
      approvals: n('SELECT count(*) AS n FROM approvals'),
    };
  } finally {
    db.close();
  }
}

function expectError(reply: Reply, status: number, code: string, message: RegExp): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error: code });
  expect(reply.body.message).toMatch(message);
}

/** `depth` nested arrays around 1: depth 1 is [1]. */
function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** Runs `count` calls, at most `parallel` at a time, and returns every reply. */
async function flood(count: number, parallel: number, call: (i: number) => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - i) }, (_, k) => call(i + k));
    replies.push(...(await Promise.all(batch)));
  }
  return replies;
}

describe('per request: capability_requests (defaults 100 entries, 8192 bytes, depth 8)', () => {
  it('a stranger registering with thousands of capability entries → 400 naming capability_requests.max_entries; nothing stored', async () => {
    const proxy = await start();
    const before = counts();
    for (const size of [101, 5000]) {
      const reply = await proxy.register(await generateTestKey(), {
        capabilities: Array.from({ length: size }, () => 'list_pets'),
      });
      expectError(reply, 400, 'invalid_request', /capability_requests\.max_entries = 100/);
      expect(reply.body).toMatchObject({ limit: 'capability_requests.max_entries', maximum: 100 });
    }
    expect(counts()).toEqual(before);
    // 100 entries is within the bound (and then fails only on the duplicate name).
    const atBound = await proxy.register(await generateTestKey(), {
      capabilities: Array.from({ length: 100 }, () => 'list_pets'),
    });
    expectError(atBound, 400, 'invalid_request', /twice/);
  });

  it('a stranger proposing a huge constraint (a 50 000-entry in list) → 400 naming capability_requests.max_constraint_bytes; nothing stored', async () => {
    const proxy = await start();
    const before = counts();
    const huge = {
      name: 'list_pets',
      constraints: { status: { in: Array.from({ length: 50_000 }, (_, i) => `s${i}`) } },
    };
    const reply = await proxy.register(await generateTestKey(), { capabilities: [huge] });
    expectError(reply, 400, 'invalid_request', /capability_requests\.max_constraint_bytes = 8192/);
    expect(counts()).toEqual(before);
  });

  it('many constraints that are each small but together too large → 400 naming the byte bound', async () => {
    const proxy = await start();
    const values = Array.from({ length: 700 }, (_, i) => `v${i}`);
    const reply = await proxy.register(await generateTestKey(), {
      capabilities: [
        { name: 'list_pets', constraints: { status: { in: values } } },
        { name: 'get_pet', constraints: { petId: { in: values } } },
      ],
    });
    expectError(reply, 400, 'invalid_request', /capability_requests\.max_constraint_bytes/);
    // Either one alone is within the bound.
    const one = await proxy.register(await generateTestKey(), {
      capabilities: [{ name: 'list_pets', constraints: { status: { in: values } } }],
    });
    expect(one.status).toBe(200);
  });

  it('a deeply nested constraint (depth 9, and 30) → 400 naming capability_requests.max_constraint_depth; depth 8 is stored', async () => {
    const proxy = await start();
    const before = counts();
    for (const depth of [7, 28]) {
      // { in: [X] } is two levels around X.
      const reply = await proxy.register(await generateTestKey(), {
        capabilities: [{ name: 'list_pets', constraints: { limit: { in: [nested(depth)] } } }],
      });
      expectError(reply, 400, 'invalid_request', /capability_requests\.max_constraint_depth = 8/);
    }
    expect(counts()).toEqual(before);
    const atBound = await proxy.register(await generateTestKey(), {
      capabilities: [{ name: 'list_pets', constraints: { limit: { in: [nested(6)] } } }],
    });
    expect(atBound.status).toBe(200);
    expect(atBound.body.status).toBe('pending');
  });

  it('an active agent asking for thousands of capabilities or huge constraints (request-capability) is refused the same way', async () => {
    const proxy = await start();
    const { agent, agentId } = await proxy.activeAgent(['list_pets']);
    const ask = async (body: unknown) =>
      proxy.request('POST', '/agent/request-capability', {
        token: await proxy.agentToken(agent, agentId),
        body,
      });
    expectError(
      await ask({ capabilities: Array.from({ length: 3000 }, () => 'get_pet') }),
      400,
      'invalid_request',
      /capability_requests\.max_entries/,
    );
    expectError(
      await ask({
        capabilities: [{ name: 'get_pet', constraints: { petId: { in: Array(5000).fill('xxxxxxxx') } } }],
      }),
      400,
      'invalid_request',
      /capability_requests\.max_constraint_bytes/,
    );
    expectError(
      await ask({ capabilities: [{ name: 'get_pet', constraints: { petId: nested(20) } }] }),
      400,
      'invalid_request',
      /capability_requests\.max_constraint_depth/,
    );
  });

  it('the bounds come from the policy', async () => {
    const proxy = await start(`
capability_requests:
  max_entries: 2
  max_constraint_bytes: 64
  max_constraint_depth: 2
`);
    expectError(
      await proxy.register(await generateTestKey(), { capabilities: ['list_pets', 'get_pet', 'create_pet'] }),
      400,
      'invalid_request',
      /capability_requests\.max_entries = 2/,
    );
    expectError(
      await proxy.register(await generateTestKey(), {
        capabilities: [
          {
            name: 'list_pets',
            constraints: { status: { in: ['a-long-enough-value', 'another-long-value', 'x'] } },
          },
        ],
      }),
      400,
      'invalid_request',
      /capability_requests\.max_constraint_bytes = 64/,
    );
    expectError(
      await proxy.register(await generateTestKey(), {
        capabilities: [{ name: 'list_pets', constraints: { limit: { in: [[1]] } } }],
      }),
      400,
      'invalid_request',
      /capability_requests\.max_constraint_depth = 2/,
    );
  });
});

describe('per pending host: pending_hosts.max_agents and max_open_approvals', () => {
  it('a pending host registering 1 000 agents: 10 are stored, the rest → 403 host_pending naming pending_hosts.max_agents', async () => {
    const proxy = await start();
    const stranger = await generateTestKey();
    const replies = await flood(1000, 25, () =>
      proxy.register(stranger, { capabilities: ['list_pets', 'get_pet'] }),
    );
    const ok = replies.filter((r) => r.status === 200);
    expect(ok).toHaveLength(10);
    for (const r of ok) expect(r.body.status).toBe('pending');
    const refused = replies.filter((r) => r.status !== 200);
    expect(refused).toHaveLength(990);
    for (const r of refused) expectError(r, 403, 'host_pending', /pending_hosts\.max_agents = 10/);
    expect(counts()).toMatchObject({ hosts: 1, pendingHosts: 1, agents: 10, grants: 20, approvals: 10 });
  });

  it('open approval requests are bounded separately (max_open_approvals below max_agents); they free up as they expire', async () => {
    const proxy = await start(`
pending_hosts:
  max_agents: 5
  max_open_approvals: 2
`);
    const stranger = await generateTestKey();
    expect((await proxy.register(stranger)).status).toBe(200);
    expect((await proxy.register(stranger)).status).toBe(200);
    expectError(await proxy.register(stranger), 403, 'host_pending', /pending_hosts\.max_open_approvals = 2/);
    expect(counts()).toMatchObject({ agents: 2, approvals: 2 });
    // Once those requests expire (approval.expires_in, 10 m) they are no longer open…
    proxy.clock.advance(10 * 60_000 + 1);
    expect((await proxy.register(stranger)).status).toBe(200);
    expect((await proxy.register(stranger)).status).toBe(200);
    expectError(await proxy.register(stranger), 403, 'host_pending', /max_open_approvals/);
    // …but the agents stay until pending cleanup: max_agents still bounds them.
    proxy.clock.advance(10 * 60_000 + 1);
    expect((await proxy.register(stranger)).status).toBe(200);
    expectError(await proxy.register(stranger), 403, 'host_pending', /pending_hosts\.max_agents = 5/);
    expect(counts()).toMatchObject({ hosts: 1, agents: 5 });
  });

  it('retrying a pending registration after every expiry keeps one approval row per agent, not one per retry', async () => {
    const proxy = await start();
    const stranger = await generateTestKey();
    const agentKey = await generateTestKey();
    const first = await proxy.register(stranger, {}, agentKey);
    expect(first.status).toBe(200);
    for (let i = 0; i < 20; i++) {
      proxy.clock.advance(10 * 60_000 + 1);
      if (i % 2 === 0) await proxy.proxy.maintain();
      const retry = await proxy.register(stranger, {}, agentKey);
      expect(retry.status).toBe(200);
      expect(retry.body.agent_id).toBe(first.body.agent_id);
      expect(retry.body.approval.user_code).not.toBe(first.body.approval.user_code);
    }
    expect(counts()).toMatchObject({ agents: 1, approvals: 1 });
  });

  it('an approved host is not bound by the pending-host caps', async () => {
    const proxy = await start(`
pending_hosts:
  max_agents: 1
`);
    const { key } = await proxy.linkedHost('alice');
    for (let i = 0; i < 3; i++) expect((await proxy.register(key)).status).toBe(200);
  });
});

describe('in total: pending_hosts.max_hosts', () => {
  it('the 6th stranger host → 429 rate_limited naming pending_hosts.max_hosts with Retry-After; approving one frees room', async () => {
    const proxy = await start(`
pending_hosts:
  max_hosts: 5
`);
    const strangers: TestKey[] = [];
    const first: Reply[] = [];
    for (let i = 0; i < 5; i++) {
      const key = await generateTestKey();
      strangers.push(key);
      const reply = await proxy.register(key);
      expect(reply.status).toBe(200);
      first.push(reply);
    }
    const refused = await flood(50, 10, async () => proxy.register(await generateTestKey()));
    for (const r of refused) {
      expectError(r, 429, 'rate_limited', /pending_hosts\.max_hosts = 5/);
      expect(r.headers.get('retry-after')).toBe('60');
    }
    expect(counts()).toMatchObject({ hosts: 5, pendingHosts: 5, agents: 5 });
    // Hosts already pending may still use their own room (a second agent each).
    expect((await proxy.register(strangers[0] as TestKey)).status).toBe(200);
    // A human approves one host: it is no longer pending, so a new stranger fits again.
    const approval = await proxy.pendingApproval(first[1]?.body.agent_id);
    expect(
      (await proxy.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'bob' })).status,
    ).toBe(200);
    expect((await proxy.register(await generateTestKey())).status).toBe(200);
    expectError(await proxy.register(await generateTestKey()), 429, 'rate_limited', /max_hosts/);
  });
});

describe('pending rows expire: lifetimes.pending_cleanup (§10.9)', () => {
  it('pending agents, their grants and approvals, then their host are deleted once older than pending_cleanup, and not before', async () => {
    const proxy = await start(`
lifetimes:
  pending_cleanup: 1h
pending_hosts:
  max_agents: 3
`);
    const stranger = await generateTestKey();
    for (let i = 0; i < 3; i++) {
      expect((await proxy.register(stranger, { capabilities: ['list_pets', 'get_pet'] })).status).toBe(200);
    }
    expectError(await proxy.register(stranger), 403, 'host_pending', /max_agents/);
    proxy.clock.advance(30 * 60_000);
    const younger = await generateTestKey();
    expect((await proxy.register(younger, { capabilities: ['list_pets'] })).status).toBe(200);
    expect(counts()).toEqual({ hosts: 2, pendingHosts: 2, agents: 4, grants: 7, approvals: 4 });

    // One hour after the first host's agents were created, to the millisecond: still there.
    proxy.clock.advance(30 * 60_000);
    await proxy.proxy.maintain();
    expect(counts().agents).toBe(4);
    // One millisecond later they are gone, with everything they stored; the younger host stays.
    proxy.clock.advance(1);
    await proxy.proxy.maintain();
    expect(counts()).toEqual({ hosts: 1, pendingHosts: 1, agents: 1, grants: 1, approvals: 1 });
    // The stranger's room is free again: it registers as a new pending host.
    const again = await proxy.register(stranger);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('pending');
    proxy.clock.advance(60 * 60_000 + 1);
    await proxy.proxy.maintain();
    expect(counts()).toEqual({ hosts: 0, pendingHosts: 0, agents: 0, grants: 0, approvals: 0 });
  });
});
