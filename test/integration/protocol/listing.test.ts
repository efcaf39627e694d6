/**
 * §5.2 GET /capability/list and §5.2.1 GET /capability/describe in their three modes (no auth,
 * host JWT, agent JWT), with the policy's `capabilities.public` and `capabilities.blocked`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentJwt, generateTestKey, hostJwt, signJwt, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

// get_inventory is listed as public AND blocked: blocked wins, it is never shown (README policy).
const POLICY = `
capabilities:
  blocked: [get_inventory]
  public: [list_pets, get_pet, get_inventory]
`;
const ALL_VISIBLE = ['create_pet', 'delete_pet', 'get_pet', 'list_pets', 'place_order'];

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterAll(() => p.close());

const names = (reply: Reply): string[] => (reply.body.capabilities as { name: string }[]).map((c) => c.name);
const statuses = (reply: Reply): Record<string, string> =>
  Object.fromEntries(
    (reply.body.capabilities as { name: string; grant_status: string }[]).map((c) => [
      c.name,
      c.grant_status,
    ]),
  );

/** An active agent whose grants are: list_pets granted, create_pet denied, get_pet pending. */
async function mixedAgent(): Promise<{ host: TestKey; agent: TestKey; agentId: string }> {
  const { key: host } = await p.linkedHost('alice');
  const reg = await p.register(host, { capabilities: ['list_pets', 'create_pet'] });
  expect(reg.status).toBe(200);
  const agentId: string = reg.body.agent_id;
  const approval = await p.pendingApproval(agentId);
  const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
    capabilities: ['list_pets'],
  });
  expect(ok.status).toBe(200);
  const more = await p.request('POST', '/agent/request-capability', {
    token: await p.agentToken(reg.agent, agentId),
    body: { capabilities: ['get_pet'] },
  });
  expect(more.status).toBe(200);
  const status = await p.status(host, agentId);
  expect(status.body).toMatchObject({
    status: 'active',
    agent_capability_grants: expect.arrayContaining([
      expect.objectContaining({ capability: 'list_pets', status: 'active' }),
      expect.objectContaining({ capability: 'create_pet', status: 'denied' }),
      expect.objectContaining({ capability: 'get_pet', status: 'pending' }),
    ]),
  });
  return { host, agent: reg.agent, agentId };
}

describe('§5.2 without authentication: only public capabilities', () => {
  it('lists exactly the policy public set minus blocked, without grant_status, cacheable', async () => {
    const list = await p.request('GET', '/capability/list');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      capabilities: [
        { name: 'get_pet', description: expect.any(String), version: expect.any(String) },
        { name: 'list_pets', description: expect.any(String), version: expect.any(String) },
      ],
      next_cursor: null,
      has_more: false,
    });
    expect(list.headers.get('cache-control')).toBe('public, max-age=300');
    expect(list.headers.get('vary')?.toLowerCase()).toContain('authorization');
  });

  it('§5.2.1 describes a public capability, and 404s a non-public, a blocked or an unknown one', async () => {
    const ok = await p.request('GET', '/capability/describe?name=get_pet');
    expect(ok.status).toBe(200);
    expect(ok.body.name).toBe('get_pet');
    expect(ok.body.input).toBeTypeOf('object');
    expect(ok.body).not.toHaveProperty('grant_status');
    for (const name of ['create_pet', 'get_inventory', 'no_such_thing']) {
      const r = await p.request('GET', `/capability/describe?name=${name}`);
      expect(r.status, name).toBe(404);
      expect(r.body.error, name).toBe('capability_not_found');
    }
  });

  it('without a policy file every capability is public (default policy)', async () => {
    const q = await startProtocol();
    try {
      const list = await q.request('GET', '/capability/list');
      expect(list.status).toBe(200);
      expect(names(list)).toEqual([
        'create_pet',
        'delete_pet',
        'get_inventory',
        'get_pet',
        'list_pets',
        'place_order',
      ]);
      const d = await q.request('GET', '/capability/describe?name=delete_pet');
      expect(d.status).toBe(200);
    } finally {
      await q.close();
    }
  });

  it('a policy file without capabilities.public lists every capability anonymously (the documented default); `public: []` lists none', async () => {
    const omitted = await startProtocol({ policy: 'modes: [delegated]\n' });
    const none = await startProtocol({ policy: 'capabilities:\n  public: []\n' });
    try {
      const all = await omitted.request('GET', '/capability/list');
      expect(all.status).toBe(200);
      expect(all.body.capabilities.map((c: { name: string }) => c.name).sort()).toEqual(
        omitted.proxy.protocol.catalog.capabilities.map((c) => c.name).sort(),
      );
      expect((await omitted.request('GET', '/capability/describe?name=list_pets')).status).toBe(200);
      const list = await none.request('GET', '/capability/list');
      expect(list.status).toBe(200);
      expect(list.body).toEqual({ capabilities: [], next_cursor: null, has_more: false });
      const d = await none.request('GET', '/capability/describe?name=list_pets');
      expect(d.status).toBe(404);
      expect(d.body.error).toBe('capability_not_found');
    } finally {
      await omitted.close();
      await none.close();
    }
  });
});

describe('§5.2 with a host JWT: everything the host may request, never blocked', () => {
  it('an unknown self-signed host lists every non-blocked capability, private caching', async () => {
    const host = await generateTestKey();
    const list = await p.request('GET', '/capability/list', { token: await p.hostToken(host) });
    expect(list.status).toBe(200);
    expect(names(list)).toEqual(ALL_VISIBLE);
    expect(list.body.capabilities.every((c: object) => !('grant_status' in c))).toBe(true);
    expect(list.headers.get('cache-control')).toBe('private, max-age=300');
  });

  it('a registered host sees the same set; describe shows non-public ones but not blocked ones', async () => {
    const { key } = await p.linkedHost('alice');
    const list = await p.request('GET', '/capability/list', { token: await p.hostToken(key) });
    expect(list.status).toBe(200);
    expect(names(list)).toEqual(ALL_VISIBLE);
    const d = await p.request('GET', '/capability/describe?name=create_pet', {
      token: await p.hostToken(key),
    });
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ name: 'create_pet' });
    expect(d.body).not.toHaveProperty('grant_status');
    const blocked = await p.request('GET', '/capability/describe?name=get_inventory', {
      token: await p.hostToken(key),
    });
    expect(blocked.status).toBe(404);
    expect(blocked.body.error).toBe('capability_not_found');
  });

  it('query filters within the authenticated set, and never surfaces a blocked match', async () => {
    const host = await generateTestKey();
    const inv = await p.request('GET', '/capability/list?query=inventory', {
      token: await p.hostToken(host),
    });
    expect(inv.status).toBe(200);
    expect(inv.body.capabilities).toEqual([]);
    const pet = await p.request('GET', '/capability/list?query=pet%20remove', {
      token: await p.hostToken(host),
    });
    expect(names(pet)).toEqual(['delete_pet']);
  });

  it('a revoked host is refused (403 host_revoked), not treated as anonymous', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    expect((await p.admin('POST', `/admin/hosts/${hostId}/revoke`)).status).toBe(200);
    const list = await p.request('GET', '/capability/list', { token: await p.hostToken(key) });
    expect(list.status).toBe(403);
    expect(list.body.error).toBe('host_revoked');
  });

  it('pagination works in host mode: pages of 2 cover every visible capability once', async () => {
    const host = await generateTestKey();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const path: string = `/capability/list?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await p.request('GET', path, { token: await p.hostToken(host) });
      expect(page.status).toBe(200);
      expect(page.body.capabilities.length).toBeLessThanOrEqual(2);
      expect(page.body.has_more).toBe(page.body.next_cursor !== null);
      seen.push(...names(page));
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual(ALL_VISIBLE);
  });
});

describe('§5.2 with an agent JWT: every capability with grant_status', () => {
  let mixed: { host: TestKey; agent: TestKey; agentId: string };
  beforeAll(async () => {
    mixed = await mixedAgent();
    // Another agent holds delete_pet: it must not leak into this agent's statuses.
    await p.activeAgent(['delete_pet'], { userId: 'alice' });
  });

  it('granted only for its own effective grants; pending and denied are not_granted; no blocked', async () => {
    const list = await p.request('GET', '/capability/list', {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(list.status).toBe(200);
    expect(statuses(list)).toEqual({
      create_pet: 'not_granted',
      delete_pet: 'not_granted',
      get_pet: 'not_granted',
      list_pets: 'granted',
      place_order: 'not_granted',
    });
    expect(list.headers.get('cache-control')).toBe('private, no-store');
  });

  it('§5.2.1 describe carries grant_status; blocked is capability_not_found', async () => {
    const granted = await p.request('GET', '/capability/describe?name=list_pets', {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({ name: 'list_pets', grant_status: 'granted' });
    const notGranted = await p.request('GET', '/capability/describe?name=delete_pet', {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(notGranted.body).toMatchObject({ name: 'delete_pet', grant_status: 'not_granted' });
    const blocked = await p.request('GET', '/capability/describe?name=get_inventory', {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(blocked.status).toBe(404);
    expect(blocked.body.error).toBe('capability_not_found');
  });

  it('pagination works in agent mode, grant_status on every page', async () => {
    const first = await p.request('GET', '/capability/list?limit=3', {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(first.status).toBe(200);
    expect(first.body.has_more).toBe(true);
    expect(names(first)).toEqual(['create_pet', 'delete_pet', 'get_pet']);
    const second = await p.request('GET', `/capability/list?limit=3&cursor=${first.body.next_cursor}`, {
      token: await p.agentToken(mixed.agent, mixed.agentId),
    });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(statuses(second)).toEqual({ list_pets: 'granted', place_order: 'not_granted' });
  });

  it('after revoking the granted capability is gone with the agent: 403 agent_revoked', async () => {
    const a = await p.activeAgent(['get_pet']);
    const revoke = await p.admin('POST', `/admin/agents/${a.agentId}/revoke`);
    expect(revoke.status).toBe(200);
    const list = await p.request('GET', '/capability/list', {
      token: await p.agentToken(a.agent, a.agentId),
    });
    expect(list.status).toBe(403);
    expect(list.body.error).toBe('agent_revoked');
  });

  it('a pending agent is refused (403 agent_pending), not listed as anonymous', async () => {
    // An active host without a user: its delegated agent waits for approval (README grant table).
    const host = await generateTestKey();
    const pre = await p.admin('POST', '/admin/hosts', { name: 'unlinked', public_key: host.publicJwk });
    expect(pre.status).toBe(201);
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    for (const path of ['/capability/list', '/capability/describe?name=list_pets']) {
      const r = await p.request('GET', path, { token: await p.agentToken(reg.agent, reg.body.agent_id) });
      expect(r.status, path).toBe(403);
      expect(r.body.error, path).toBe('agent_pending');
    }
  });

  it('§4.5 an agent of a pending (unknown, dynamically registered) host is refused with host_pending', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    const r = await p.request('GET', '/capability/list', {
      token: await p.agentToken(reg.agent, reg.body.agent_id),
    });
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('host_pending');
  });
});

describe('invalid credentials are rejected, never downgraded to anonymous (§4.5, §4.5.1)', () => {
  let agent: { agent: TestKey; agentId: string };
  let forger: TestKey;
  beforeAll(async () => {
    agent = await p.activeAgent(['list_pets']);
    forger = await generateTestKey();
  });

  const cases: [string, () => Promise<string>][] = [
    ['garbage bearer', () => Promise.resolve('not-a-jwt')],
    [
      'agent JWT signed by another key',
      () => agentJwt(forger, agent.agentId, p.issuer, {}, { nowMs: p.clock.now() }),
    ],
    ['agent JWT for an unknown agent', () => p.agentToken(forger, 'agt_does_not_exist')],
    [
      'agent JWT with a foreign audience',
      () => p.agentToken(agent.agent, agent.agentId, {}, 'https://other.example'),
    ],
    [
      'expired agent JWT',
      () => p.agentToken(agent.agent, agent.agentId, { iat: Math.floor(p.clock.now() / 1000) - 600 }),
    ],
    [
      'host JWT whose iss is not its key thumbprint',
      async () =>
        hostJwt(forger, p.issuer, { iss: (await generateTestKey()).thumbprint }, { nowMs: p.clock.now() }),
    ],
    [
      'host JWT with a foreign audience',
      () => hostJwt(forger, 'https://other.example', {}, { nowMs: p.clock.now() }),
    ],
    [
      'JWT with an unexpected typ',
      () =>
        signJwt(forger, 'JWT', { iss: forger.thumbprint, aud: p.issuer, host_public_key: forger.publicJwk }),
    ],
  ];

  for (const [name, make] of cases) {
    it(`${name} → 401 invalid_jwt on list and describe`, async () => {
      const list = await p.request('GET', '/capability/list', { token: await make() });
      expect(list.status).toBe(401);
      expect(list.body.error).toBe('invalid_jwt');
      const describeReply = await p.request('GET', '/capability/describe?name=list_pets', {
        token: await make(),
      });
      expect(describeReply.status).toBe(401);
      expect(describeReply.body.error).toBe('invalid_jwt');
    });
  }

  it('§4.6 a replayed agent JWT is rejected the second time', async () => {
    const token = await p.agentToken(agent.agent, agent.agentId);
    expect((await p.request('GET', '/capability/list', { token })).status).toBe(200);
    const again = await p.request('GET', '/capability/list', { token });
    expect(again.status).toBe(401);
    expect(again.body.error).toBe('invalid_jwt');
  });

  it('a non-Bearer Authorization is 401 (RFC 6750 §3.1), an empty Bearer 400; neither is anonymous', async () => {
    const basic = await p.request('GET', '/capability/list', {
      headers: { authorization: 'Basic dXNlcjpwYXNz' },
    });
    expect(basic.status).toBe(401);
    expect(basic.body.error).toBe('authentication_required');
    expect(basic.headers.get('www-authenticate')).toBe(
      `Bearer, AgentAuth discovery="${p.issuer}/.well-known/agent-configuration"`,
    );
    for (const authorization of ['Bearer', 'Bearer ']) {
      const r = await p.request('GET', '/capability/list', { headers: { authorization } });
      expect(r.status, authorization).toBe(400);
      expect(r.body.error, authorization).toBe('invalid_request');
    }
  });
});

describe('query parameters (§5.2)', () => {
  it('rejects bad limit and foreign cursors with 400 invalid_request, in authenticated mode too', async () => {
    const host = await generateTestKey();
    for (const qs of ['limit=0', 'limit=-1', 'limit=abc', 'cursor=bm9wZQ', 'limit=2&limit=3']) {
      const r = await p.request('GET', `/capability/list?${qs}`, { token: await p.hostToken(host) });
      expect(r.status, qs).toBe(400);
      expect(r.body.error, qs).toBe('invalid_request');
    }
    const noName = await p.request('GET', '/capability/describe', { token: await p.hostToken(host) });
    expect(noName.status).toBe(400);
    expect(noName.body.error).toBe('invalid_request');
  });
});
