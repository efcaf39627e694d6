/**
 * Agent registration (§5.3) and capability requests (§5.4) over real HTTP: dynamic hosts (§2.8),
 * idempotent retries, capability and mode validation, constraints (§2.13), linked hosts and their
 * defaults (§2.9), high-risk capabilities (§8.10) and server-imposed constraints. Each test tries
 * to break one rule and checks the exact status and `error` code, and for refused requests that
 * nothing was created.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

// The built-in policy's capability classes (GET = default, other methods = high-risk), plus a
// blocked capability; the unknown-host registration budget is off because many tests here
// register from fresh hosts.
const POLICY = `
capabilities:
  defaults: [{methods: [GET]}]
  high_risk: [{methods: [POST, PUT, PATCH, DELETE]}]
  blocked: [get_inventory]
  public: ['*']
rate_limits:
  unknown_host_registration: null
`;

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterAll(() => p.close());

async function hostOf(q: TestProtocol, key: TestKey): Promise<any> {
  const hosts = await q.admin('GET', '/admin/hosts');
  return (hosts.body.hosts as any[]).find((h) => h.thumbprint === key.thumbprint);
}

async function agentsOf(q: TestProtocol, hostId: string): Promise<any[]> {
  const reply = await q.admin('GET', `/admin/agents?host_id=${encodeURIComponent(hostId)}`);
  return reply.body.agents as any[];
}

async function allAgents(q: TestProtocol): Promise<any[]> {
  return (await q.admin('GET', '/admin/agents')).body.agents as any[];
}

function grantsByName(body: any): Record<string, any> {
  const grants = body.agent_capability_grants as { capability: string }[];
  return Object.fromEntries(grants.map((g) => [g.capability, g]));
}

function expectError(reply: Reply, status: number, error: string): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error });
  expect(typeof reply.body.message).toBe('string');
}

/** POST /agent/register for a fresh agent key with a raw (possibly malformed) body. */
async function registerRaw(
  q: TestProtocol,
  host: TestKey,
  rawBody: string | undefined,
  contentType = 'application/json',
): Promise<Reply> {
  const agent = await generateTestKey();
  const token = await q.hostToken(host, { agent_public_key: agent.publicJwk });
  return q.request('POST', '/agent/register', {
    token,
    ...(rawBody !== undefined ? { rawBody, headers: { 'content-type': contentType } } : {}),
  });
}

describe('dynamic registration of an unknown host (§5.3, §2.8, §8.10)', () => {
  it('creates a pending host and a pending agent with a device-authorization approval (§7.1)', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, {
      name: 'pet helper',
      host_name: 'laptop',
      capabilities: ['list_pets', 'create_pet'],
    });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({
      name: 'pet helper',
      mode: 'delegated',
      status: 'pending',
      host_name: 'laptop',
      agent_capability_grants: [
        { capability: 'list_pets', status: 'pending' },
        { capability: 'create_pet', status: 'pending' },
      ],
    });
    // §8.10: nothing is granted to a self-signed host before a human approves, not even a GET.
    for (const g of reg.body.agent_capability_grants)
      expect(Object.keys(g).sort()).toEqual(['capability', 'status']);
    expect(reg.body.user_id).toBeUndefined();
    expect(reg.body.agent_id).toMatch(/^agt_/);
    expect(reg.body.host_id).toMatch(/^hst_/);
    const approval = reg.body.approval;
    expect(approval).toEqual({
      method: 'device_authorization',
      verification_uri: `${p.issuer}/device`,
      verification_uri_complete: `${p.issuer}/device?code=${approval.user_code}`,
      user_code: approval.user_code,
      expires_in: 600,
      interval: 5,
      notification_url: expect.stringMatching(new RegExp(`^${p.issuer}/agent/events/apr_[\\w-]{16}$`)),
    });
    // RFC 8628 §6.1: XXXX-XXXX from a vowel-free alphabet.
    expect(approval.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);

    const stored = await hostOf(p, host);
    expect(stored).toMatchObject({
      host_id: reg.body.host_id,
      status: 'pending',
      user_id: null,
      name: 'laptop',
    });
    expect(await agentsOf(p, reg.body.host_id)).toMatchObject([
      { agent_id: reg.body.agent_id, status: 'pending', mode: 'delegated', user_id: null },
    ]);
    const pending = await p.pendingApproval(reg.body.agent_id);
    expect(pending).toMatchObject({
      kind: 'registration',
      user_code: approval.user_code,
      capabilities: [{ name: 'list_pets' }, { name: 'create_pet' }],
    });

    // The pending agent cannot act (§2.3: pending agents cannot authenticate).
    const use = await p.request('GET', '/capability/list', {
      token: await p.agentToken(reg.agent, reg.body.agent_id),
    });
    // The host's own pending state is reported first (§2.11).
    expectError(use, 403, 'host_pending');
  });

  it('treats a retry with the same agent key as idempotent: same agent, same approval (§5.3)', async () => {
    const host = await generateTestKey();
    const first = await p.register(host, { capabilities: ['list_pets'] });
    expect(first.status).toBe(200);
    // A different name and capability list in the retry must not fork a second agent.
    const retry = await p.register(host, { name: 'renamed', capabilities: ['get_pet'] }, first.agent);
    expect(retry.status).toBe(200);
    expect(retry.body.agent_id).toBe(first.body.agent_id);
    expect(retry.body.host_id).toBe(first.body.host_id);
    expect(retry.body.status).toBe('pending');
    expect(retry.body.approval.user_code).toBe(first.body.approval.user_code);
    expect(retry.body.agent_capability_grants).toEqual([{ capability: 'list_pets', status: 'pending' }]);

    expect(await agentsOf(p, first.body.host_id)).toHaveLength(1);
    const approvals = await p.admin('GET', `/admin/approvals?agent_id=${first.body.agent_id}`);
    expect(approvals.body.approvals).toHaveLength(1);
    const hosts = (await p.admin('GET', '/admin/hosts')).body.hosts as any[];
    expect(hosts.filter((h) => h.thumbprint === host.thumbprint)).toHaveLength(1);
  });

  it('a second agent key under the same pending host is a second pending agent', async () => {
    const host = await generateTestKey();
    const a = await p.register(host, { capabilities: ['list_pets'] });
    const b = await p.register(host, { capabilities: ['list_pets'] });
    expect(b.status).toBe(200);
    expect(b.body.agent_id).not.toBe(a.body.agent_id);
    expect(b.body.host_id).toBe(a.body.host_id);
    expect(b.body.approval.user_code).not.toBe(a.body.approval.user_code);
    expect(await agentsOf(p, a.body.host_id)).toHaveLength(2);
  });

  it('refuses the agent key of an active agent with 409 agent_exists (§5.3)', async () => {
    const { key } = await p.linkedHost('alice');
    const first = await p.register(key, { capabilities: ['list_pets'] });
    expect(first.body.status).toBe('active');
    const again = await p.register(key, { capabilities: ['list_pets'] }, first.agent);
    expectError(again, 409, 'agent_exists');
    expect(again.body.agent_id).toBe(first.body.agent_id);
    expect(await agentsOf(p, first.body.host_id)).toHaveLength(1);
  });

  it('refuses an agent key equal to the host key', async () => {
    const host = await generateTestKey();
    const reply = await p.register(host, {}, host);
    expectError(reply, 400, 'invalid_request');
    expect(await hostOf(p, host)).toBeUndefined();
  });
});

describe('host_name is never used for authorization (§3.1, §5.3)', () => {
  it("a stranger's key giving a linked host's name gets nothing of that host: pending, its own host, no user", async () => {
    const { key: linked, hostId } = await p.linkedHost('alice', ['list_pets']);
    const own = await p.register(linked, { host_name: 'Alice laptop', capabilities: ['list_pets'] });
    expect(own.body).toMatchObject({ status: 'active', host_name: 'Alice laptop', user_id: 'alice' });
    const stranger = await generateTestKey();
    const reg = await p.register(stranger, { host_name: 'Alice laptop', capabilities: ['list_pets'] });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({
      status: 'pending',
      agent_capability_grants: [{ capability: 'list_pets', status: 'pending' }],
    });
    expect(reg.body.host_id).not.toBe(hostId);
    expect(reg.body.user_id).toBeUndefined();
    // Nor can it read the linked host's agent.
    expect((await p.status(stranger, own.body.agent_id)).status).toBe(403);
  });
});

describe('capability validation at registration (§5.3, §8.6)', () => {
  it('lists every unknown or blocked name in one invalid_capabilities error and creates nothing', async () => {
    const host = await generateTestKey();
    const before = (await allAgents(p)).length;
    const reply = await p.register(host, {
      capabilities: [
        'nope',
        'list_pets',
        'get_inventory',
        { name: 'also_nope', constraints: { x: 1 } },
        'create_pet',
      ],
    });
    expectError(reply, 400, 'invalid_capabilities');
    expect(reply.body.invalid_capabilities).toEqual(['nope', 'get_inventory', 'also_nope']);
    expect(await hostOf(p, host)).toBeUndefined();
    expect(await allAgents(p)).toHaveLength(before);
  });

  it('refuses a blocked capability even from a linked host', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    const reply = await p.register(key, { capabilities: ['get_inventory'] });
    expectError(reply, 400, 'invalid_capabilities');
    expect(reply.body.invalid_capabilities).toEqual(['get_inventory']);
    expect(await agentsOf(p, hostId)).toEqual([]);
  });

  it('refuses a capability listed twice', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    const reply = await p.register(key, { capabilities: ['list_pets', { name: 'list_pets' }] });
    expectError(reply, 400, 'invalid_request');
    expect(await agentsOf(p, hostId)).toEqual([]);
  });
});

describe('modes (§2.2)', () => {
  it('refuses autonomous when the policy supports only delegated agents', async () => {
    const host = await generateTestKey();
    const reply = await p.register(host, { mode: 'autonomous' });
    expectError(reply, 400, 'unsupported_mode');
    expect(reply.body.supported_modes).toEqual(['delegated']);
    expect(await hostOf(p, host)).toBeUndefined();
  });

  it.each([['root'], ['Delegated'], [''], [7], [['delegated']]])(
    'refuses the unknown mode %j',
    async (mode) => {
      const host = await generateTestKey();
      const reply = await p.register(host, { mode });
      expectError(reply, 400, 'unsupported_mode');
      expect(await hostOf(p, host)).toBeUndefined();
    },
  );
});

describe('malformed registration bodies create nothing (§5.3, §5.13)', () => {
  const raw: [string, string | undefined, string?][] = [
    ['no body', undefined],
    ['not JSON', '{"name": "x",'],
    ['a JSON array', '[{"name": "x"}]'],
    ['a JSON string', '"register me"'],
    ['JSON null', 'null'],
    ['a non-JSON content type', '{"name": "x"}', 'text/plain'],
  ];
  it.each(raw)('%s → 400 invalid_request', async (_label, body, type) => {
    const host = await generateTestKey();
    const before = (await allAgents(p)).length;
    const reply = await registerRaw(p, host, body, type);
    expectError(reply, 400, 'invalid_request');
    expect(await hostOf(p, host)).toBeUndefined();
    expect(await allAgents(p)).toHaveLength(before);
  });

  const fields: [string, Record<string, unknown>][] = [
    ['missing name', { name: undefined }],
    ['empty name', { name: '' }],
    ['blank name', { name: ' \n\t ' }],
    ['numeric name', { name: 42 }],
    ['object name', { name: { first: 'x' } }],
    ['over-long name', { name: 'x'.repeat(201) }],
    ['numeric host_name', { host_name: 7 }],
    ['capabilities as a string', { capabilities: 'list_pets' }],
    ['capabilities as an object', { capabilities: { list_pets: true } }],
    ['a numeric capability', { capabilities: [5] }],
    ['a null capability', { capabilities: [null] }],
    ['a capability object without name', { capabilities: [{ constraints: {} }] }],
    ['a capability object with an extra key', { capabilities: [{ name: 'list_pets', scope: 'all' }] }],
    ['a nested array capability', { capabilities: [['list_pets']] }],
    ['numeric reason', { reason: 1 }],
    ['array login_hint', { login_hint: ['alice'] }],
    ['numeric binding_message', { binding_message: 3 }],
    ['numeric preferred_method', { preferred_method: 1 }],
  ];
  it.each(fields)('%s → 400 invalid_request', async (_label, body) => {
    const host = await generateTestKey();
    const before = (await allAgents(p)).length;
    const reply = await p.register(host, body);
    expectError(reply, 400, 'invalid_request');
    expect(await hostOf(p, host)).toBeUndefined();
    expect(await allAgents(p)).toHaveLength(before);
  });

  it('a host JWT without agent_public_key cannot register (§4.2)', async () => {
    const host = await generateTestKey();
    const reply = await p.request('POST', '/agent/register', {
      token: await p.hostToken(host),
      body: { name: 'x' },
    });
    expectError(reply, 400, 'invalid_request');
    expect(await hostOf(p, host)).toBeUndefined();
  });
});

describe('constraints at registration (§2.13)', () => {
  it('echoes the proposed constraints on an auto-granted grant of a linked host', async () => {
    const { key } = await p.linkedHost('alice');
    const reg = await p.register(key, {
      capabilities: [
        { name: 'list_pets', constraints: { limit: { max: 10, min: 1 }, status: 'available' } },
        'get_pet',
      ],
    });
    expect(reg.status).toBe(200);
    const grants = grantsByName(reg.body);
    expect(grants.list_pets).toMatchObject({
      status: 'active',
      constraints: { limit: { min: 1, max: 10 }, status: 'available' },
    });
    expect(grants.list_pets.input.properties.limit).toBeDefined();
    // §2.13: an unconstrained grant has no constraints field.
    expect(grants.get_pet.status).toBe('active');
    expect('constraints' in grants.get_pet).toBe(false);
  });

  it('keeps the proposed constraints on a pending grant and shows them to the approver', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, {
      capabilities: [{ name: 'create_pet', constraints: { species: { in: ['cat', 'dog'] } } }],
    });
    expect(reg.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
    const approval = await p.pendingApproval(reg.body.agent_id);
    expect(approval.capabilities).toEqual([
      { name: 'create_pet', constraints: { species: { in: ['cat', 'dog'] } } },
    ]);
  });

  it('rejects unknown operators with 400 unknown_constraint_operator listing all of them', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    const reply = await p.register(key, {
      capabilities: [
        {
          name: 'list_pets',
          constraints: { limit: { max: 10, lte: 5 }, status: { regex: '^a', in: ['sold'] } },
        },
      ],
    });
    expectError(reply, 400, 'unknown_constraint_operator');
    expect(reply.body.unknown_operators).toEqual(['lte', 'regex']);
    expect(await agentsOf(p, hostId)).toEqual([]);
  });

  it('rejects an operator mixed with an exact-value key on one field (§2.13)', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    const reply = await p.register(key, {
      capabilities: [{ name: 'list_pets', constraints: { limit: { max: 10, value: 5 } } }],
    });
    expectError(reply, 400, 'unknown_constraint_operator');
    expect(reply.body.unknown_operators).toEqual(['value']);
    expect(await agentsOf(p, hostId)).toEqual([]);
  });

  const confused: [string, unknown][] = [
    ['max as a string', { limit: { max: '10' } }],
    ['min as a boolean', { limit: { min: true } }],
    ['max as null', { limit: { max: null } }],
    ['min above max', { limit: { min: 20, max: 10 } }],
    ['in as a string', { status: { in: 'available' } }],
    ['an empty in list', { status: { in: [] } }],
    ['not_in as an object', { status: { not_in: { sold: true } } }],
    ['an empty operator object', { limit: {} }],
    ['constraints as an array', [{ limit: 5 }]],
    ['constraints as a string', 'limit<=5'],
    ['constraints as null', null],
  ];
  it.each(confused)('rejects %s with 400 invalid_request', async (_label, constraints) => {
    const { key, hostId } = await p.linkedHost('alice');
    const reply = await p.register(key, { capabilities: [{ name: 'list_pets', constraints }] });
    expectError(reply, 400, 'invalid_request');
    expect(await agentsOf(p, hostId)).toEqual([]);
  });

  const fieldsOutside: [string, string, Record<string, unknown>][] = [
    ['a nested path', 'list_pets', { 'owner.name': 'bob' }],
    ['a bracketed path', 'list_pets', { 'tags[0]': 'x' }],
    ['a field of another capability', 'list_pets', { petId: 1 }],
    ['a field the capability does not have', 'get_pet', { limit: 5 }],
    ['an empty field name', 'get_pet', { '': 1 }],
    ['a prototype key', 'get_pet', JSON.parse('{"__proto__": {"max": 1}}') as Record<string, unknown>],
  ];
  it.each(fieldsOutside)(
    'rejects a constraint on %s (top-level input fields only)',
    async (_l, name, constraints) => {
      const { key, hostId } = await p.linkedHost('alice');
      const reply = await p.register(key, { capabilities: [{ name, constraints }] });
      expectError(reply, 400, 'invalid_request');
      expect(await agentsOf(p, hostId)).toEqual([]);
    },
  );
});

describe('linked hosts under the built-in policy (§2.9, §8.10)', () => {
  let q: TestProtocol;
  beforeAll(async () => {
    q = await startProtocol();
  });
  afterAll(() => q.close());

  it('auto-grants defaults but keeps high-risk host defaults pending approval', async () => {
    const { key, hostId } = await q.linkedHost('alice', ['get_pet', 'create_pet']);
    const reg = await q.register(key, { capabilities: ['list_pets', 'get_pet', 'create_pet', 'delete_pet'] });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({ status: 'active', user_id: 'alice', host_id: hostId });
    const grants = grantsByName(reg.body);
    expect(grants.list_pets).toMatchObject({ status: 'active', description: expect.any(String) });
    expect(grants.get_pet).toMatchObject({ status: 'active', description: expect.any(String) });
    // create_pet is a host default, but POST is high-risk: a human still decides (§8.10).
    expect(grants.create_pet).toEqual({ capability: 'create_pet', status: 'pending' });
    expect(grants.delete_pet).toEqual({ capability: 'delete_pet', status: 'pending' });
    expect(reg.body.approval.method).toBe('device_authorization');
    const approval = await q.pendingApproval(reg.body.agent_id);
    expect(approval.capabilities).toEqual([{ name: 'create_pet' }, { name: 'delete_pet' }]);

    const status = await q.status(key, reg.body.agent_id);
    expect(grantsByName(status.body).get_pet.granted_by).toBe('policy');

    const token = await q.agentToken(reg.agent, reg.body.agent_id);
    const list = await q.request('GET', '/capability/list', { token });
    const byName = Object.fromEntries((list.body.capabilities as any[]).map((c) => [c.name, c.grant_status]));
    expect(byName).toMatchObject({ list_pets: 'granted', get_pet: 'granted', create_pet: 'not_granted' });
  });

  it('needs no approval when everything requested is a default', async () => {
    const { key } = await q.linkedHost('alice');
    const reg = await q.register(key, { capabilities: ['list_pets', 'get_pet'] });
    expect(reg.body.status).toBe('active');
    expect(reg.body.approval).toBeUndefined();
    expect(await q.pendingApproval(reg.body.agent_id)).toBeUndefined();
    const none = await q.register(key, {});
    expect(none.body).toMatchObject({ status: 'active', agent_capability_grants: [] });
    expect(none.body.approval).toBeUndefined();
  });

  it('a pre-registered host without a user gets nothing automatically for a delegated agent', async () => {
    const key = await generateTestKey();
    const made = await q.admin('POST', '/admin/hosts', {
      public_key: key.publicJwk,
      default_capabilities: ['list_pets'],
    });
    expect(made.status).toBe(201);
    const reg = await q.register(key, { capabilities: ['list_pets'] });
    expect(reg.body).toMatchObject({
      status: 'pending',
      agent_capability_grants: [{ capability: 'list_pets', status: 'pending' }],
    });
  });
});

describe('policy capability classes and constraints (§2.13, §8.10)', () => {
  let q: TestProtocol;
  beforeAll(async () => {
    q = await startProtocol({
      policy: `
capabilities:
  defaults: ['*']
  high_risk: [{methods: [DELETE]}, get_pet]
  constraints:
    list_pets:
      limit: {max: 50}
      status: {in: [available, pending]}
    place_order:
      quantity: {min: 1, max: 5}
`,
    });
  });
  afterAll(() => q.close());

  it('high_risk selectors override defaults: POST auto-granted, get_pet and DELETE pending', async () => {
    const { key } = await q.linkedHost('alice', ['get_pet', 'delete_pet']);
    const reg = await q.register(key, { capabilities: ['create_pet', 'get_pet', 'delete_pet'] });
    const grants = grantsByName(reg.body);
    expect(reg.body.status).toBe('active');
    expect(grants.create_pet.status).toBe('active');
    expect(grants.get_pet).toEqual({ capability: 'get_pet', status: 'pending' });
    expect(grants.delete_pet).toEqual({ capability: 'delete_pet', status: 'pending' });
  });

  it('imposes the policy constraints when the agent proposes none', async () => {
    const { key } = await q.linkedHost('alice');
    const reg = await q.register(key, { capabilities: ['list_pets'] });
    expect(grantsByName(reg.body).list_pets).toMatchObject({
      status: 'active',
      constraints: { limit: { max: 50 }, status: { in: ['available', 'pending'] } },
    });
  });

  it('never widens: a looser proposal is cut to the policy, a tighter one is kept', async () => {
    const { key } = await q.linkedHost('alice');
    const loose = await q.register(key, {
      capabilities: [
        {
          name: 'list_pets',
          constraints: { limit: { max: 80, min: 2 }, status: { in: ['available', 'sold', 'pending'] } },
        },
      ],
    });
    expect(loose.status).toBe(200);
    expect(grantsByName(loose.body).list_pets.constraints).toEqual({
      limit: { min: 2, max: 50 },
      status: { in: ['available', 'pending'] },
    });
    const tight = await q.register(key, {
      capabilities: [{ name: 'list_pets', constraints: { limit: { max: 10 }, status: 'available' } }],
    });
    expect(grantsByName(tight.body).list_pets.constraints).toEqual({
      limit: { max: 10 },
      status: 'available',
    });
  });

  it('refuses a proposal that the policy leaves nothing of, and creates nothing', async () => {
    const { key, hostId } = await q.linkedHost('alice');
    for (const constraints of [{ status: 'sold' }, { limit: { min: 60 } }, { status: { in: ['sold'] } }]) {
      const reply = await q.register(key, { capabilities: [{ name: 'list_pets', constraints }] });
      expectError(reply, 400, 'invalid_request');
    }
    expect(await agentsOf(q, hostId)).toEqual([]);
  });

  it('shows the effective constraints of a pending grant to the approver', async () => {
    const { key } = await q.linkedHost('alice');
    const reg = await q.register(key, {
      capabilities: [{ name: 'get_pet', constraints: { petId: { in: [1, 2, 3] } } }, 'place_order'],
    });
    const approval = await q.pendingApproval(reg.body.agent_id);
    // place_order is POST, so a default here ('*'), and not high-risk: it is granted at once.
    expect(grantsByName(reg.body).place_order).toMatchObject({
      status: 'active',
      constraints: { quantity: { min: 1, max: 5 } },
    });
    expect(approval.capabilities).toEqual([{ name: 'get_pet', constraints: { petId: { in: [1, 2, 3] } } }]);
  });
});

describe('POST /agent/request-capability (§5.4)', () => {
  async function activeAgent(): Promise<{ host: TestKey; hostId: string; agent: TestKey; agentId: string }> {
    const { key, hostId } = await p.linkedHost('alice');
    const reg = await p.register(key, {});
    expect(reg.body.status).toBe('active');
    return { host: key, hostId, agent: reg.agent, agentId: reg.body.agent_id };
  }

  async function requestCaps(a: { agent: TestKey; agentId: string }, body: unknown): Promise<Reply> {
    return p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body,
    });
  }

  it('auto-grants a linked host default and returns only the new grants', async () => {
    const a = await activeAgent();
    const first = await requestCaps(a, { capabilities: ['list_pets'] });
    expect(first.status).toBe(200);
    expect(first.body.agent_id).toBe(a.agentId);
    expect(first.body.approval).toBeUndefined();
    expect(first.body.agent_capability_grants).toMatchObject([{ capability: 'list_pets', status: 'active' }]);
    const second = await requestCaps(a, { capabilities: ['get_pet'] });
    expect(second.body.agent_capability_grants).toMatchObject([{ capability: 'get_pet', status: 'active' }]);
    expect(second.body.agent_capability_grants).toHaveLength(1);
  });

  it('a high-risk capability is pending with an approval, and the agent stays active', async () => {
    const a = await activeAgent();
    const reply = await requestCaps(a, {
      capabilities: [{ name: 'create_pet', constraints: { species: 'cat' } }],
      reason: 'user wants a cat',
    });
    expect(reply.status).toBe(200);
    expect(reply.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
    expect(reply.body.approval).toMatchObject({
      method: 'device_authorization',
      expires_in: 600,
      interval: 5,
    });
    const approval = await p.pendingApproval(a.agentId);
    expect(approval).toMatchObject({
      kind: 'capability_request',
      user_code: reply.body.approval.user_code,
      reason: 'user wants a cat',
      capabilities: [{ name: 'create_pet', constraints: { species: 'cat' } }],
    });
    const status = await p.status(a.host, a.agentId);
    expect(status.body.status).toBe('active');
    expect(grantsByName(status.body).create_pet.status).toBe('pending');

    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
    expect(ok.status).toBe(200);
    const after = await p.status(a.host, a.agentId);
    expect(grantsByName(after.body).create_pet).toMatchObject({
      status: 'active',
      constraints: { species: 'cat' },
    });
  });

  it('409 already_granted when every capability is already active, or active and pending', async () => {
    const a = await activeAgent();
    await requestCaps(a, { capabilities: ['list_pets'] });
    const pendingOne = await requestCaps(a, { capabilities: ['create_pet'] });
    for (const capabilities of [['list_pets'], ['list_pets', 'create_pet']]) {
      const reply = await requestCaps(a, { capabilities });
      expectError(reply, 409, 'already_granted');
    }
    // The pending one asked again alone is a repeat: the same approval (issue 16 §3).
    const repeat = await requestCaps(a, { capabilities: ['create_pet'] });
    expect(repeat.status).toBe(200);
    expect(repeat.body.approval.user_code).toBe(pendingOne.body.approval.user_code);
    // One new name among held ones is a valid request for that one only.
    const mixed = await requestCaps(a, { capabilities: ['list_pets', 'get_pet'] });
    expect(mixed.status).toBe(200);
    expect(mixed.body.agent_capability_grants).toMatchObject([{ capability: 'get_pet', status: 'active' }]);
  });

  it('a second request while one is pending leaves no grant without an open approval', async () => {
    const a = await activeAgent();
    const first = await requestCaps(a, { capabilities: ['create_pet'] });
    expect(first.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
    const second = await requestCaps(a, { capabilities: ['delete_pet'] });
    expect(second.status).toBe(200);
    // Approving every open approval must settle every pending grant: none may be stranded
    // (pending forever, yet refused as already_granted when asked again).
    const open = await p.admin('GET', `/admin/approvals?agent_id=${a.agentId}`);
    expect(open.body.approvals.length).toBeGreaterThan(0);
    for (const approval of open.body.approvals) {
      const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
      expect(ok.status).toBe(200);
    }
    const status = await p.status(a.host, a.agentId);
    const grants = grantsByName(status.body);
    expect(grants.create_pet.status).toBe('active');
    expect(grants.delete_pet.status).toBe('active');
  });

  it('refuses blocked and unknown names with invalid_capabilities, granting nothing', async () => {
    const a = await activeAgent();
    const reply = await requestCaps(a, { capabilities: ['list_pets', 'get_inventory', 'launch_rocket'] });
    expectError(reply, 400, 'invalid_capabilities');
    expect(reply.body.invalid_capabilities).toEqual(['get_inventory', 'launch_rocket']);
    const status = await p.status(a.host, a.agentId);
    expect(status.body.agent_capability_grants).toEqual([]);
  });

  it.each([
    ['no capabilities', {}],
    ['an empty list', { capabilities: [] }],
    ['a string', { capabilities: 'list_pets' }],
    ['a bad entry', { capabilities: [{ name: 'list_pets', constraints: { limit: { max: 'ten' } } }] }],
  ])('refuses %s with 400 invalid_request', async (_label, body) => {
    const a = await activeAgent();
    const reply = await requestCaps(a, body);
    expectError(reply, 400, 'invalid_request');
    expect((await p.status(a.host, a.agentId)).body.agent_capability_grants).toEqual([]);
  });

  it('refuses unknown constraint operators with unknown_operators', async () => {
    const a = await activeAgent();
    const reply = await requestCaps(a, {
      capabilities: [{ name: 'list_pets', constraints: { limit: { lt: 3 } } }],
    });
    expectError(reply, 400, 'unknown_constraint_operator');
    expect(reply.body.unknown_operators).toEqual(['lt']);
  });

  it('a pending agent cannot request capabilities', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, {});
    const reply = await requestCaps(
      { agent: reg.agent, agentId: reg.body.agent_id },
      { capabilities: ['list_pets'] },
    );
    expectError(reply, 403, 'host_pending');
  });

  it('an agent JWT naming another host as iss, or signed by another agent, is refused (§4.5)', async () => {
    const a = await activeAgent();
    const b = await activeAgent();
    const foreignIss = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId, { iss: b.host.thumbprint }),
      body: { capabilities: ['list_pets'] },
    });
    expectError(foreignIss, 401, 'invalid_jwt');
    const forged = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(b.agent, a.agentId),
      body: { capabilities: ['list_pets'] },
    });
    expectError(forged, 401, 'invalid_jwt');
    expect((await p.status(a.host, a.agentId)).body.agent_capability_grants).toEqual([]);
    // Nor may a host read or act on another host's agent.
    const peek = await p.status(b.host, a.agentId);
    expectError(peek, 403, 'unauthorized');
  });

  it('a denied capability may be requested again', async () => {
    const a = await activeAgent();
    await requestCaps(a, { capabilities: ['create_pet'] });
    const approval = await p.pendingApproval(a.agentId);
    const no = await p.admin('POST', `/admin/approvals/${approval.id}/deny`, { reason: 'not now' });
    expect(no.status).toBe(200);
    const status = await p.status(a.host, a.agentId);
    expect(status.body.status).toBe('active');
    expect(grantsByName(status.body).create_pet).toEqual({
      capability: 'create_pet',
      status: 'denied',
      reason: 'not now',
    });
    const again = await requestCaps(a, { capabilities: ['create_pet'] });
    expect(again.status).toBe(200);
    expect(again.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
  });
});
