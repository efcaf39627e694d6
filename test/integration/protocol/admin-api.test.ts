/**
 * The operator API under /admin/ (README "Operator API"): mounted only with an admin token,
 * guarded by it; approvals (§7), hosts (§2.8 pre-registration, §2.9 linking, §5.10 revocation),
 * agents (§5.5, §5.7) and the activity log (§11).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import {
  ADMIN_TOKEN,
  INTROSPECTION_TOKEN,
  startProtocol,
  TestClock,
  type Reply,
  type TestProtocol,
} from '../../helpers/protocol.js';

// The built-in policy's classes (GET granted by default, other methods high-risk, all public),
// with room for the many dynamic registrations this file makes from one IP (§8.13).
const POLICY = `
capabilities:
  defaults: [{methods: [GET]}]
  high_risk: [{methods: [POST, DELETE]}]
  public: ['*']
rate_limits:
  unknown_host_registration: 1000/1h
`;

const clock = new TestClock();
let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ clock, policy: POLICY });
});
afterAll(() => p.close());

// Every reply this file receives, to check at the end that none carries a secret.
const replies: string[] = [];
function record<T extends Reply>(reply: T): T {
  replies.push(JSON.stringify(reply.body), JSON.stringify([...reply.headers.entries()]));
  return reply;
}
async function admin(method: string, path: string, body?: unknown): Promise<Reply> {
  return record(await p.admin(method, path, body));
}
async function call(
  method: string,
  path: string,
  options: Parameters<TestProtocol['request']>[2] = {},
): Promise<Reply> {
  return record(await p.request(method, path, options));
}

/** An agent of a brand-new (unknown, so pending) host, waiting for its registration approval. */
async function pendingRegistration(
  capabilities: unknown[] = ['list_pets', 'create_pet'],
): Promise<{ host: TestKey; agent: TestKey; agentId: string; hostId: string; userCode: string }> {
  const host = await generateTestKey();
  const reg = record(await p.register(host, { name: 'helper', capabilities }));
  expect(reg.status).toBe(200);
  expect(reg.body.status).toBe('pending');
  return {
    host,
    agent: reg.agent,
    agentId: reg.body.agent_id,
    hostId: reg.body.host_id,
    userCode: reg.body.approval.user_code,
  };
}

/** One field of each element of a reply's array. */
function field(items: unknown, key: string): unknown[] {
  return (items as Record<string, unknown>[]).map((item) => item[key]);
}

async function approvalsOf(agentId: string): Promise<Record<string, any>[]> {
  const r = await admin('GET', `/admin/approvals?agent_id=${agentId}`);
  expect(r.status).toBe(200);
  return r.body.approvals as Record<string, any>[];
}

/** The one pending approval of an agent. */
async function approvalOf(agentId: string): Promise<Record<string, any>> {
  const list = await approvalsOf(agentId);
  expect(list).toHaveLength(1);
  return list[0] ?? {};
}

describe('without an admin token the operator API does not exist', () => {
  it('every /admin/ path is 404 not_found, with or without a bearer token', async () => {
    const q = await startProtocol({ overrides: { adminToken: undefined } });
    try {
      for (const [method, path] of [
        ['GET', '/admin/approvals'],
        ['GET', '/admin/hosts'],
        ['POST', '/admin/hosts'],
        ['GET', '/admin/agents'],
        ['GET', '/admin/activity'],
      ] as const) {
        for (const token of [undefined, ADMIN_TOKEN, INTROSPECTION_TOKEN]) {
          const r = await q.request(method, path, token ? { token } : {});
          expect(r.status, `${method} ${path}`).toBe(404);
          expect(r.body.error).toBe('not_found');
        }
      }
    } finally {
      await q.close();
    }
  });
});

describe('authentication of the operator API', () => {
  it('no Authorization → 401 authentication_required with a Bearer challenge', async () => {
    const r = await call('GET', '/admin/hosts');
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('authentication_required');
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('wrong, last-char-off, prefix, extended, or the introspection token → 401 invalid_token', async () => {
    const last = ADMIN_TOKEN.at(-1) === 'f' ? 'e' : 'f';
    const wrong = [
      'completely-wrong-token-0123456789',
      `${ADMIN_TOKEN.slice(0, -1)}${last}`,
      ADMIN_TOKEN.slice(0, -1),
      ADMIN_TOKEN.slice(0, 8),
      `${ADMIN_TOKEN}0`,
      ADMIN_TOKEN.toUpperCase(),
      INTROSPECTION_TOKEN,
    ];
    for (const token of wrong) {
      for (const [method, path] of [
        ['GET', '/admin/hosts'],
        ['POST', '/admin/agents/agt_x/revoke'],
      ] as const) {
        const r = await call(method, path, { token });
        expect(r.status, token).toBe(401);
        expect(r.body.error, token).toBe('invalid_token');
        expect(r.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
      }
    }
  });

  it('a host JWT is not an admin credential', async () => {
    const host = await generateTestKey();
    const r = await call('GET', '/admin/hosts', { token: await p.hostToken(host) });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_token');
  });

  it('a rejected request changes nothing: revoke with a wrong token leaves the agent active', async () => {
    const a = await p.activeAgent(['list_pets']);
    const r = await call('POST', `/admin/agents/${a.agentId}/revoke`, { token: `${ADMIN_TOKEN}x` });
    expect(r.status).toBe(401);
    expect((await admin('GET', `/admin/agents/${a.agentId}`)).body.status).toBe('active');
  });
});

describe('approvals (§7)', () => {
  it('GET /admin/approvals lists pending requests with their fields and filters by agent_id', async () => {
    const one = await pendingRegistration([
      'list_pets',
      { name: 'create_pet', constraints: { name: { in: ['rex', 'fido'] } } },
    ]);
    const two = await pendingRegistration(['get_pet']);
    const all = await admin('GET', '/admin/approvals');
    expect(all.status).toBe(200);
    const ids = field(all.body.approvals, 'agent_id');
    expect(ids).toEqual(expect.arrayContaining([one.agentId, two.agentId]));

    const approval = await approvalOf(one.agentId);
    expect(approval).toEqual({
      id: expect.stringMatching(/^apr_/),
      kind: 'registration',
      agent_id: one.agentId,
      agent_name: 'helper',
      host_id: one.hostId,
      user_code: one.userCode,
      method: 'device_authorization',
      capabilities: [
        { name: 'list_pets' },
        { name: 'create_pet', constraints: { name: { in: ['rex', 'fido'] } } },
      ],
      created_at: new Date(clock.now()).toISOString(),
      // approval.expires_in defaults to 10 minutes.
      expires_at: new Date(clock.now() + 10 * 60_000).toISOString(),
    });
    expect(await approvalsOf(two.agentId)).toEqual([
      expect.objectContaining({ agent_id: two.agentId, capabilities: [{ name: 'get_pet' }] }),
    ]);
    expect(await approvalsOf('agt_nobody')).toEqual([]);
  });

  it('capability_request and reactivation approvals are listed with their kind', async () => {
    // A linked host whose default create_pet is high-risk: it always needs a human (§8.10).
    const { key: host } = await p.linkedHost('alice', ['create_pet']);
    const reg = record(await p.register(host, { capabilities: ['list_pets', 'create_pet'] }));
    expect(reg.body.status).toBe('active');
    const agentId: string = reg.body.agent_id;
    const first = await approvalOf(agentId);
    expect(first).toMatchObject({ kind: 'registration', capabilities: [{ name: 'create_pet' }] });
    expect((await admin('POST', `/admin/approvals/${first.id}/deny`)).status).toBe(200);

    const req = await call('POST', '/agent/request-capability', {
      token: await p.agentToken(reg.agent, agentId),
      body: { capabilities: ['delete_pet'], reason: 'cleanup' },
    });
    expect(req.status).toBe(200);
    const capReq = await approvalOf(agentId);
    expect(capReq).toMatchObject({
      kind: 'capability_request',
      agent_id: agentId,
      reason: 'cleanup',
      capabilities: [{ name: 'delete_pet' }],
    });
    expect((await admin('POST', `/admin/approvals/${capReq.id}/deny`)).status).toBe(200);

    // §2.4 session TTL (30 min) elapses; §5.6 reactivation asks again for the high-risk default.
    clock.advance(31 * 60_000);
    const re = await call('POST', '/agent/reactivate', {
      token: await p.hostToken(host),
      body: { agent_id: agentId },
    });
    expect(re.status).toBe(200);
    const reactivation = await approvalOf(agentId);
    expect(reactivation).toMatchObject({ kind: 'reactivation', capabilities: [{ name: 'create_pet' }] });
  });

  it('approve with {user_id, capabilities, constraints, reason}: partial, narrowed, host linked', async () => {
    const r = await pendingRegistration(['list_pets', 'create_pet', 'delete_pet']);
    const approval = await approvalOf(r.agentId);
    const ok = await admin('POST', `/admin/approvals/${approval.id}/approve`, {
      user_id: 'alice',
      capabilities: ['list_pets', 'create_pet'],
      constraints: { list_pets: { limit: { max: 5 } } },
      reason: 'no deletes',
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      id: approval.id,
      status: 'approved',
      approved: ['list_pets', 'create_pet'],
      denied: ['delete_pet'],
      agent: { agent_id: r.agentId, status: 'active', user_id: 'alice' },
    });
    const grants = Object.fromEntries(
      ok.body.agent.agent_capability_grants.map((g: { capability: string }) => [g.capability, g]),
    );
    expect(grants.list_pets).toMatchObject({
      status: 'active',
      granted_by: 'alice',
      constraints: { limit: { max: 5 } },
    });
    expect(grants.create_pet).toMatchObject({ status: 'active', granted_by: 'alice' });
    expect(grants.delete_pet).toMatchObject({ status: 'denied', reason: 'no deletes' });
    // §2.9: approving a delegated agent of an unlinked host links the host to the approver.
    expect((await admin('GET', `/admin/hosts/${r.hostId}`)).body).toMatchObject({
      status: 'active',
      user_id: 'alice',
    });
    expect(await approvalsOf(r.agentId)).toEqual([]);
    const again = await admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
    expect(again.status).toBe(409);
    expect(again.body.error).toBe('approval_closed');
  });

  it('deny with {reason}: the registration is rejected with the reason on every grant', async () => {
    const r = await pendingRegistration(['list_pets', 'create_pet']);
    const approval = await approvalOf(r.agentId);
    const no = await admin('POST', `/admin/approvals/${approval.id}/deny`, { reason: 'unknown tool' });
    expect(no.status).toBe(200);
    expect(no.body).toMatchObject({
      id: approval.id,
      status: 'denied',
      denied: ['list_pets', 'create_pet'],
      agent: {
        agent_id: r.agentId,
        status: 'rejected',
        agent_capability_grants: [
          { capability: 'list_pets', status: 'denied', reason: 'unknown tool' },
          { capability: 'create_pet', status: 'denied', reason: 'unknown tool' },
        ],
      },
    });
    const closed = await admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'bob' });
    expect(closed.status).toBe(409);
    expect(closed.body.error).toBe('approval_closed');
  });

  it('unknown approval ids → 404 approval_not_found; expired ones → 409 approval_closed', async () => {
    for (const action of ['approve', 'deny']) {
      const r = await admin('POST', `/admin/approvals/apr_nope/${action}`, { user_id: 'alice' });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('approval_not_found');
    }
    const r = await pendingRegistration(['list_pets']);
    const approval = await approvalOf(r.agentId);
    clock.advance(10 * 60_000);
    const late = await admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
    expect(late.status).toBe(409);
    expect(late.body.error).toBe('approval_closed');
    expect((await admin('GET', `/admin/agents/${r.agentId}`)).body.status).toBe('pending');
  });

  it('bad bodies → 400 invalid_request, and the approval, agent and host are unchanged', async () => {
    const r = await pendingRegistration(['list_pets', 'create_pet']);
    const approval = await approvalOf(r.agentId);
    const bad: [string, unknown][] = [
      ['capabilities not an array', { user_id: 'alice', capabilities: 'list_pets' }],
      ['capabilities not names', { user_id: 'alice', capabilities: [1] }],
      ['capability not requested', { user_id: 'alice', capabilities: ['get_pet'] }],
      ['constraints an array', { user_id: 'alice', constraints: [] }],
      ['constraints null', { user_id: 'alice', constraints: null }],
      ['constraints for a capability not requested', { user_id: 'alice', constraints: { get_pet: {} } }],
      ['constraints on an unknown field', { user_id: 'alice', constraints: { list_pets: { nope: 1 } } }],
      ['user_id empty', { user_id: '' }],
      ['user_id a number', { user_id: 7 }],
      ['reason a number', { user_id: 'alice', reason: 7 }],
      ['no user_id for a delegated agent of an unlinked host', {}],
      ['a JSON array', ['list_pets']],
    ];
    for (const [name, body] of bad) {
      const res = await admin('POST', `/admin/approvals/${approval.id}/approve`, body);
      expect(res.status, name).toBe(400);
      expect(res.body.error, name).toBe('invalid_request');
    }
    const op = await admin('POST', `/admin/approvals/${approval.id}/approve`, {
      user_id: 'alice',
      constraints: { list_pets: { limit: { between: [1, 2] } } },
    });
    expect(op.status).toBe(400);
    expect(op.body).toMatchObject({ error: 'unknown_constraint_operator', unknown_operators: ['between'] });
    const notJson = record(
      await p.request('POST', `/admin/approvals/${approval.id}/deny`, {
        token: ADMIN_TOKEN,
        rawBody: '{"reason":',
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toBe('invalid_request');
    const denyBad = await admin('POST', `/admin/approvals/${approval.id}/deny`, { reason: ['x'] });
    expect(denyBad.status).toBe(400);
    expect(denyBad.body.error).toBe('invalid_request');

    expect(await approvalsOf(r.agentId)).toEqual([expect.objectContaining({ id: approval.id })]);
    const agent = await admin('GET', `/admin/agents/${r.agentId}`);
    expect(agent.body.status).toBe('pending');
    expect(field(agent.body.agent_capability_grants, 'status')).toEqual(['pending', 'pending']);
    expect((await admin('GET', `/admin/hosts/${r.hostId}`)).body).toMatchObject({
      status: 'pending',
      user_id: null,
    });
  });
});

describe('hosts', () => {
  it('POST /admin/hosts pre-registers (201), is idempotent on the key (200), and lists', async () => {
    const key = await generateTestKey();
    const created = await admin('POST', '/admin/hosts', {
      name: 'ci',
      public_key: { ...key.publicJwk, kid: 'k1', alg: 'EdDSA', use: 'sig' },
      user_id: 'dora',
      default_capabilities: ['get_pet'],
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      host_id: expect.stringMatching(/^hst_/),
      name: 'ci',
      status: 'active',
      user_id: 'dora',
      thumbprint: key.thumbprint,
      // Only the public members are kept (kid, alg, use dropped).
      public_key: key.publicJwk,
      default_capabilities: ['get_pet'],
      pre_registered: true,
      admitted_by_policy: false,
      activated_at: expect.any(String),
      last_used_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const hostId: string = created.body.host_id;
    const again = await admin('POST', '/admin/hosts', {
      name: 'ci renamed',
      public_key: key.publicJwk,
      default_capabilities: [],
    });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ host_id: hostId, name: 'ci renamed', default_capabilities: [] });

    const byUser = await admin('GET', '/admin/hosts?user_id=dora');
    expect(field(byUser.body.hosts, 'host_id')).toEqual([hostId]);
    const pending = await admin('GET', '/admin/hosts?status=pending');
    expect(pending.body.hosts.length).toBeGreaterThan(0);
    expect(pending.body.hosts.every((h: any) => h.status === 'pending')).toBe(true);
    const shown = await admin('GET', `/admin/hosts/${hostId}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ host_id: hostId, agents: [] });
  });

  it('pre-registering a host linked to one user for another is refused, and changes nothing (§2.9: one user)', async () => {
    const { key, hostId } = await p.linkedHost('alice', ['list_pets']);
    const reg = await p.register(key, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('active');
    const before = (await admin('GET', `/admin/hosts/${hostId}`)).body;
    const taken = await admin('POST', '/admin/hosts', {
      name: 'mallory laptop',
      public_key: key.publicJwk,
      user_id: 'mallory',
      default_capabilities: ['create_pet'],
    });
    expect(taken.status).toBe(400);
    expect(taken.body.error).toBe('invalid_request');
    const after = (await admin('GET', `/admin/hosts/${hostId}`)).body;
    expect(after).toMatchObject({
      user_id: 'alice',
      name: before.name,
      default_capabilities: ['list_pets'],
      updated_at: before.updated_at,
    });
    expect((await p.status(key, reg.body.agent_id)).body).toMatchObject({
      status: 'active',
      user_id: 'alice',
    });
  });

  it('hosts, agents and approvals are listed a page at a time (limit, cursor → next_cursor)', async () => {
    for (const list of ['hosts', 'agents', 'approvals']) {
      const all = await admin('GET', `/admin/${list}?limit=1000`);
      expect(all.body.next_cursor).toBeNull();
      const ids: unknown[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
        const page: Reply = await admin('GET', `/admin/${list}?limit=1${query}`);
        expect(page.status).toBe(200);
        ids.push(...(page.body[list] as unknown[]));
        cursor = page.body.next_cursor as string | null;
      } while (cursor !== null);
      expect(ids).toEqual(all.body[list]);
    }
    for (const bad of ['limit=0', 'limit=1001', 'limit=x', 'cursor=nope', 'cursor=~a', 'cursor=1~']) {
      const r = await admin('GET', `/admin/hosts?${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body.error).toBe('invalid_request');
    }
  });

  it('one host shows its first 100 agents and points to the listing for the rest (issue 17)', async () => {
    const { hostId } = await p.linkedHost('carol');
    const now = clock.now();
    await p.proxy.protocol.store.write(async (tx) => {
      for (let i = 0; i < 101; i++) {
        await tx.insertAgent({
          id: `agt_many_${String(i).padStart(3, '0')}`,
          hostId,
          userId: null,
          name: `many ${i}`,
          publicJwk: { kty: 'OKP', crv: 'Ed25519', x: `x${i}`.padEnd(43, 'A') },
          keyThumbprint: `tp-many-${i}`,
          mode: 'delegated',
          status: 'active',
          lastUsedAt: null,
          activatedAt: now,
          createdAt: now + i,
          updatedAt: now + i,
        });
      }
    });
    const shown = record(await p.admin('GET', `/admin/hosts/${hostId}`));
    expect(shown.status).toBe(200);
    expect(shown.body.agents).toHaveLength(100);
    expect(shown.body.agents[0].agent_id).toBe('agt_many_000');
    expect(shown.body.agents_next).toBe(`/admin/agents?host_id=${hostId}`);
    const rest = record(await p.admin('GET', `${shown.body.agents_next}&limit=1000`));
    expect(rest.body.agents).toHaveLength(101);
  });

  it('invalid keys and capabilities are refused with the catalogue codes, nothing created', async () => {
    const before = (await admin('GET', '/admin/hosts')).body.hosts.length;
    const key = await generateTestKey();
    const cases: [string, unknown, number, string][] = [
      ['no key', { name: 'x' }, 400, 'invalid_request'],
      ['key a string', { public_key: key.publicJwk.x }, 400, 'invalid_request'],
      [
        'private key material',
        { public_key: { ...key.publicJwk, d: key.publicJwk.x } },
        400,
        'invalid_request',
      ],
      ['RSA key', { public_key: { kty: 'RSA', n: 'AQAB', e: 'AQAB' } }, 400, 'unsupported_algorithm'],
      [
        'P-256 key',
        { public_key: { kty: 'EC', crv: 'P-256', x: 'a', y: 'b' } },
        400,
        'unsupported_algorithm',
      ],
      ['short x', { public_key: { kty: 'OKP', crv: 'Ed25519', x: 'AAAA' } }, 400, 'invalid_request'],
      ['padded x', { public_key: { ...key.publicJwk, x: `${key.publicJwk.x}=` } }, 400, 'invalid_request'],
      ['name a number', { public_key: key.publicJwk, name: 5 }, 400, 'invalid_request'],
      ['user_id empty', { public_key: key.publicJwk, user_id: '' }, 400, 'invalid_request'],
      [
        'defaults not a list',
        { public_key: key.publicJwk, default_capabilities: 'get_pet' },
        400,
        'invalid_request',
      ],
    ];
    for (const [name, body, status, error] of cases) {
      const r = await admin('POST', '/admin/hosts', body);
      expect(r.status, name).toBe(status);
      expect(r.body.error, name).toBe(error);
    }
    const unknownCap = await admin('POST', '/admin/hosts', {
      public_key: key.publicJwk,
      default_capabilities: ['get_pet', 'fly_to_moon'],
    });
    expect(unknownCap.status).toBe(400);
    expect(unknownCap.body).toMatchObject({
      error: 'invalid_capabilities',
      invalid_capabilities: ['fly_to_moon'],
    });
    expect((await admin('GET', '/admin/hosts')).body.hosts).toHaveLength(before);
  });

  it('link, unlink (revokes delegated agents), revoke (cascades); 404 and state errors', async () => {
    const key = await generateTestKey();
    const hostId: string = (await admin('POST', '/admin/hosts', { public_key: key.publicJwk })).body.host_id;

    const noUser = await admin('POST', `/admin/hosts/${hostId}/link`, {});
    expect(noUser.status).toBe(400);
    expect(noUser.body.error).toBe('invalid_request');
    const linked = await admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'erin' });
    expect(linked.status).toBe(200);
    expect(linked.body).toMatchObject({ host_id: hostId, user_id: 'erin', agents_claimed: 0 });
    const other = await admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'frank' });
    expect(other.status).toBe(400);
    expect(other.body.error).toBe('invalid_request');

    const reg = record(await p.register(key, { capabilities: ['list_pets'] }));
    expect(reg.body).toMatchObject({ status: 'active', user_id: 'erin' });
    const unlinked = await admin('POST', `/admin/hosts/${hostId}/unlink`);
    expect(unlinked.status).toBe(200);
    expect(unlinked.body).toMatchObject({ host_id: hostId, user_id: null, agents_revoked: 1 });
    expect((await admin('GET', `/admin/agents/${reg.body.agent_id}`)).body.status).toBe('revoked');
    const twice = await admin('POST', `/admin/hosts/${hostId}/unlink`);
    expect(twice.status).toBe(400);
    expect(twice.body.error).toBe('invalid_request');

    // A second agent, then revocation of the whole host (§5.10, §8.5).
    await admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'erin' });
    const reg2 = record(await p.register(key, { capabilities: ['list_pets'] }));
    expect(reg2.body.status).toBe('active');
    const revoked = await admin('POST', `/admin/hosts/${hostId}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ host_id: hostId, status: 'revoked', agents_revoked: 1 });
    expect((await admin('GET', `/admin/agents/${reg2.body.agent_id}`)).body.status).toBe('revoked');
    const hostCall = await call('GET', `/agent/status?agent_id=${reg2.body.agent_id}`, {
      token: await p.hostToken(key),
    });
    expect(hostCall.status).toBe(403);
    expect(hostCall.body.error).toBe('host_revoked');
    const relink = await admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'erin' });
    expect(relink.status).toBe(403);
    expect(relink.body.error).toBe('host_revoked');
    const reuse = await admin('POST', '/admin/hosts', { public_key: key.publicJwk });
    expect(reuse.status).toBe(400);
    expect(reuse.body.error).toBe('invalid_request');

    for (const [method, path] of [
      ['GET', '/admin/hosts/hst_nope'],
      ['POST', '/admin/hosts/hst_nope/link'],
      ['POST', '/admin/hosts/hst_nope/unlink'],
      ['POST', '/admin/hosts/hst_nope/revoke'],
    ] as const) {
      const r = await admin(method, path, method === 'POST' ? { user_id: 'x' } : undefined);
      expect(r.status, path).toBe(404);
      expect(r.body.error, path).toBe('host_not_found');
    }
  });
});

describe('agents', () => {
  it('list with host_id, status and user_id filters; show; revoke; 404s', async () => {
    const a = await p.activeAgent(['list_pets'], { userId: 'gina' });
    const pend = await pendingRegistration(['list_pets']);

    const byHost = await admin('GET', `/admin/agents?host_id=${a.hostId}`);
    expect(byHost.body.agents).toEqual([
      {
        agent_id: a.agentId,
        host_id: a.hostId,
        name: 'test agent',
        status: 'active',
        mode: 'delegated',
        user_id: 'gina',
        created_at: expect.any(String),
      },
    ]);
    const byUser = await admin('GET', '/admin/agents?user_id=gina');
    expect(field(byUser.body.agents, 'agent_id')).toEqual([a.agentId]);
    const pendings = await admin('GET', '/admin/agents?status=pending');
    expect(field(pendings.body.agents, 'agent_id')).toContain(pend.agentId);
    expect(pendings.body.agents.every((x: any) => x.status === 'pending')).toBe(true);

    const shown = await admin('GET', `/admin/agents/${a.agentId}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({
      agent_id: a.agentId,
      host_id: a.hostId,
      status: 'active',
      user_id: 'gina',
      agent_capability_grants: [{ capability: 'list_pets', status: 'active', granted_by: 'policy' }],
    });

    const revoked = await admin('POST', `/admin/agents/${a.agentId}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ agent_id: a.agentId, status: 'revoked' });
    const list = await call('GET', '/capability/list', { token: await p.agentToken(a.agent, a.agentId) });
    expect(list.status).toBe(403);
    expect(list.body.error).toBe('agent_revoked');
    expect((await admin('GET', `/admin/agents?status=revoked&host_id=${a.hostId}`)).body.agents).toHaveLength(
      1,
    );

    // Expiry is applied when listing (§2.4): idle past the 30-minute session TTL.
    const b = await p.activeAgent(['list_pets'], { userId: 'hana' });
    clock.advance(31 * 60_000);
    const expired = await admin('GET', '/admin/agents?user_id=hana&status=expired');
    expect(field(expired.body.agents, 'agent_id')).toEqual([b.agentId]);

    for (const [method, path] of [
      ['GET', '/admin/agents/agt_nope'],
      ['POST', '/admin/agents/agt_nope/revoke'],
    ] as const) {
      const r = await admin(method, path);
      expect(r.status, path).toBe(404);
      expect(r.body.error, path).toBe('agent_not_found');
    }
  });
});

describe('activity (§11)', () => {
  it('records registration, approval and revocation events, filtered by agent, host and time', async () => {
    clock.advance(60 * 60_000);
    const start = clock.now();
    const r = await pendingRegistration(['list_pets']);
    const approval = await approvalOf(r.agentId);
    await admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'ivy' });
    clock.advance(60_000);
    const revokedAt = clock.now();
    await admin('POST', `/admin/agents/${r.agentId}/revoke`);

    const byAgent = await admin('GET', `/admin/activity?agent_id=${r.agentId}`);
    expect(byAgent.status).toBe(200);
    // Newest first.
    expect(field(byAgent.body.activity, 'type')).toEqual([
      'agent.revoked',
      'approval.approved',
      'agent.registered',
    ]);
    expect(byAgent.body.next_cursor).toBeNull();
    const [revoked, approved, registered] = byAgent.body.activity;
    expect(registered).toMatchObject({ agent_id: r.agentId, host_id: r.hostId, outcome: 'pending' });
    expect(approved).toMatchObject({ outcome: 'approved', user_id: 'ivy', detail: { by: 'ivy' } });
    expect(revoked).toMatchObject({ outcome: 'revoked', detail: { by: 'admin' } });
    expect(revoked.at).toBe(new Date(revokedAt).toISOString());

    const byHost = await admin('GET', `/admin/activity?host_id=${r.hostId}`);
    const hostTypes = field(byHost.body.activity, 'type');
    expect(hostTypes).toEqual(expect.arrayContaining(['agent.registered', 'host.linked', 'agent.revoked']));
    expect(byHost.body.activity.every((e: any) => e.host_id === r.hostId)).toBe(true);

    const since = await admin(
      'GET',
      `/admin/activity?agent_id=${r.agentId}&since=${encodeURIComponent(new Date(revokedAt).toISOString())}`,
    );
    expect(field(since.body.activity, 'type')).toEqual(['agent.revoked']);
    const until = await admin(
      'GET',
      `/admin/activity?agent_id=${r.agentId}&until=${encodeURIComponent(new Date(revokedAt).toISOString())}`,
    );
    expect(field(until.body.activity, 'type')).toEqual(['approval.approved', 'agent.registered']);
    const window = await admin(
      'GET',
      `/admin/activity?since=${new Date(start).toISOString()}&until=${new Date(start + 1).toISOString()}`,
    );
    expect(window.body.activity.every((e: any) => e.at === new Date(start).toISOString())).toBe(true);
    expect(field(window.body.activity, 'type')).toContain('agent.registered');
  });

  it('host events: pre-registration and revocation', async () => {
    const key = await generateTestKey();
    const hostId: string = (await admin('POST', '/admin/hosts', { public_key: key.publicJwk })).body.host_id;
    await admin('POST', `/admin/hosts/${hostId}/revoke`);
    const events = await admin('GET', `/admin/activity?host_id=${hostId}`);
    expect(events.body.activity).toMatchObject([
      {
        type: 'host.revoked',
        outcome: 'revoked',
        agent_id: null,
        detail: { agents_revoked: 0, by: 'admin' },
      },
      { type: 'host.pre_registered', outcome: 'pre_registered', detail: { by: 'admin' } },
    ]);
  });

  it('capability filter selects execution records of that capability', async () => {
    // No execute endpoint in this build writes them, so one is appended as execution would.
    const a = await p.activeAgent(['list_pets']);
    await p.proxy.protocol.write((tx) =>
      tx.appendActivity({
        at: clock.now(),
        type: 'capability.executed',
        agentId: a.agentId,
        hostId: a.hostId,
        userId: 'alice',
        capability: 'list_pets',
        outcome: 'success',
        detail: null,
        jti: 'jti-1',
        latencyMs: 12,
        upstreamStatus: 200,
      }),
    );
    const hit = await admin('GET', '/admin/activity?capability=list_pets');
    expect(hit.body.activity).toEqual([
      {
        id: expect.any(Number),
        at: new Date(clock.now()).toISOString(),
        type: 'capability.executed',
        agent_id: a.agentId,
        host_id: a.hostId,
        user_id: 'alice',
        capability: 'list_pets',
        outcome: 'success',
        jti: 'jti-1',
        latency_ms: 12,
        upstream_status: 200,
      },
    ]);
    expect((await admin('GET', '/admin/activity?capability=get_pet')).body.activity).toEqual([]);
  });

  it('pages with limit and cursor; rejects bad limit, time and cursor', async () => {
    const first = await admin('GET', '/admin/activity?limit=2');
    expect(first.body.activity).toHaveLength(2);
    expect(first.body.next_cursor).toEqual(String(first.body.activity[1].id));
    const second = await admin('GET', `/admin/activity?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.activity).toHaveLength(2);
    expect(second.body.activity[0].id).toBeLessThan(first.body.activity[1].id);

    for (const qs of [
      'limit=0',
      'limit=1001',
      'limit=x',
      'since=yesterday',
      'until=',
      'cursor=abc',
      'cursor=-1',
    ]) {
      const r = await admin('GET', `/admin/activity?${qs}`);
      expect(r.status, qs).toBe(400);
      expect(r.body.error, qs).toBe('invalid_request');
    }
  });
});

describe('secrets never leave the server', () => {
  it('no reply in this file contained the admin or introspection token, or private key material', () => {
    expect(replies.length).toBeGreaterThan(50);
    const all = replies.join('\n');
    expect(all).not.toContain(ADMIN_TOKEN.slice(0, 12));
    expect(all).not.toContain(INTROSPECTION_TOKEN.slice(0, 12));
    expect(all).not.toMatch(/"d"\s*:/);
  });
});
