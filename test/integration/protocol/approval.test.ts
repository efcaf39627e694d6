/**
 * Approvals (§7) through the operator API, over real HTTP: partial approval and denial (§5.3,
 * §7.1), approver narrowing (§2.13), expiry with the test clock, linking a host by approving its
 * registration (§2.9), CIBA selection (§7.2, §7.5), autonomous agents and claiming (§2.2.2,
 * §2.10). Each test tries to break one rule and checks exact statuses and error codes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

const BASE = `
capabilities:
  defaults: [{methods: [GET]}]
  high_risk: [{methods: [POST, PUT, PATCH, DELETE]}]
  public: ['*']
rate_limits:
  unknown_host_registration: null
`;

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ policy: BASE });
});
afterAll(() => p.close());

function expectError(reply: Reply, status: number, error: string): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error });
  expect(typeof reply.body.message).toBe('string');
}

function grantsByName(body: any): Record<string, any> {
  const grants = body.agent_capability_grants as { capability: string }[];
  return Object.fromEntries(grants.map((g) => [g.capability, g]));
}

async function approve(q: TestProtocol, id: string, body: Record<string, unknown> = {}): Promise<Reply> {
  return q.admin('POST', `/admin/approvals/${id}/approve`, body);
}

async function adminHost(q: TestProtocol, hostId: string): Promise<any> {
  return (await q.admin('GET', `/admin/hosts/${hostId}`)).body;
}

/** An active host without a user (§2.8 pre-registration, unlinked). */
async function unlinkedHost(q: TestProtocol): Promise<{ key: TestKey; hostId: string }> {
  const key = await generateTestKey();
  const made = await q.admin('POST', '/admin/hosts', { name: 'worker', public_key: key.publicJwk });
  expect(made.status).toBe(201);
  expect(made.body).toMatchObject({ status: 'active', user_id: null });
  return { key, hostId: made.body.host_id };
}

async function useAgent(q: TestProtocol, agent: TestKey, agentId: string): Promise<Reply> {
  return q.request('GET', '/capability/list', { token: await q.agentToken(agent, agentId) });
}

describe('partial approval (§5.3 "Partial approval")', () => {
  it('activates the listed capabilities, denies the rest with the reason, links the host', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets', 'create_pet', 'delete_pet'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    const ok = await approve(p, approval.id, {
      user_id: 'alice',
      capabilities: ['list_pets', 'create_pet'],
      reason: 'no deleting pets',
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      id: approval.id,
      status: 'approved',
      approved: ['list_pets', 'create_pet'],
      denied: ['delete_pet'],
      agent: { agent_id: reg.body.agent_id, status: 'active', user_id: 'alice' },
    });
    const status = await p.status(host, reg.body.agent_id);
    expect(status.body.status).toBe('active');
    expect(status.body.approval).toBeUndefined();
    const grants = grantsByName(status.body);
    expect(grants.list_pets).toMatchObject({ status: 'active', granted_by: 'alice' });
    expect(grants.create_pet).toMatchObject({ status: 'active', granted_by: 'alice' });
    expect(grants.delete_pet).toEqual({
      capability: 'delete_pet',
      status: 'denied',
      reason: 'no deleting pets',
    });
    expect(await adminHost(p, reg.body.host_id)).toMatchObject({ status: 'active', user_id: 'alice' });
    expect((await useAgent(p, reg.agent, reg.body.agent_id)).status).toBe(200);
    // The decided approval is no longer listed.
    expect(await p.pendingApproval(reg.body.agent_id)).toBeUndefined();
  });

  it('approving none of the capabilities still activates the agent with every grant denied', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['create_pet', 'delete_pet'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    const ok = await approve(p, approval.id, { user_id: 'alice', capabilities: [] });
    expect(ok.body).toMatchObject({ approved: [], denied: ['create_pet', 'delete_pet'] });
    const status = await p.status(host, reg.body.agent_id);
    expect(status.body.status).toBe('active');
    expect(status.body.agent_capability_grants).toEqual([
      { capability: 'create_pet', status: 'denied', reason: 'Not approved.' },
      { capability: 'delete_pet', status: 'denied', reason: 'Not approved.' },
    ]);
  });

  it('refuses to approve a capability that was not requested, and leaves the request open', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    const bad = await approve(p, approval.id, {
      user_id: 'alice',
      capabilities: ['list_pets', 'delete_pet'],
    });
    expectError(bad, 400, 'invalid_request');
    const malformed = await approve(p, approval.id, { user_id: 'alice', capabilities: 'list_pets' });
    expectError(malformed, 400, 'invalid_request');
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('pending');
    expect((await approve(p, approval.id, { user_id: 'alice' })).status).toBe(200);
  });

  it('a delegated agent of an unlinked host needs a user_id to be approved (§2.9)', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    expectError(await approve(p, approval.id, {}), 400, 'invalid_request');
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('pending');
    expect(await adminHost(p, reg.body.host_id)).toMatchObject({ status: 'pending', user_id: null });
  });

  it('a host linked to one user cannot be approved for another (§2.9: at most one user)', async () => {
    const { key, hostId } = await p.linkedHost('alice');
    const reg = await p.register(key, { capabilities: ['create_pet'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    expectError(await approve(p, approval.id, { user_id: 'mallory' }), 400, 'invalid_request');
    expect(await adminHost(p, hostId)).toMatchObject({ user_id: 'alice' });
    const ok = await approve(p, approval.id, { user_id: 'alice' });
    expect(ok.status).toBe(200);
    expect(grantsByName(ok.body.agent).create_pet).toMatchObject({ status: 'active', granted_by: 'alice' });
  });
});

describe('denial (§7.1: denial is terminal for that attempt)', () => {
  it('rejects the agent and its grants; the lone dynamic host is rejected with it (§2.11)', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets', 'create_pet'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    const no = await p.admin('POST', `/admin/approvals/${approval.id}/deny`, { reason: 'unknown laptop' });
    expect(no.status).toBe(200);
    expect(no.body).toMatchObject({
      id: approval.id,
      status: 'denied',
      denied: ['list_pets', 'create_pet'],
      agent: {
        status: 'rejected',
        agent_capability_grants: [
          { capability: 'list_pets', status: 'denied', reason: 'unknown laptop' },
          { capability: 'create_pet', status: 'denied', reason: 'unknown laptop' },
        ],
      },
    });
    expect(await adminHost(p, reg.body.host_id)).toMatchObject({ status: 'rejected' });
    // §7.1: the polling client learns of the denial from the agent's status.
    const polled = await p.status(host, reg.body.agent_id);
    expect(polled.status).toBe(200);
    expect(polled.body.status).toBe('rejected');
    // The host check comes first, so the agent learns of the host's rejection (§2.11).
    expectError(await useAgent(p, reg.agent, reg.body.agent_id), 403, 'host_rejected');
    // §2.11: a rejected host MUST NOT register agents.
    expectError(await p.register(host, { capabilities: ['list_pets'] }), 403, 'host_rejected');
    // Nor may the rejected key retry (§5.3: no automatic retry of a denied registration).
    expectError(await p.register(host, {}, reg.agent), 403, 'host_rejected');
  });

  it('a rejected host may still poll its agent, and nothing else: key rotation and revocations are 403 host_rejected', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    expect((await p.admin('POST', `/admin/approvals/${approval.id}/deny`, {})).status).toBe(200);
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('rejected');
    const fresh = await generateTestKey();
    const proof = await p.hostToken(fresh);
    expectError(
      await p.hostPost(host, '/host/rotate-key', { public_key: fresh.publicJwk, proof }),
      403,
      'host_rejected',
    );
    expectError(
      await p.hostPost(host, '/agent/revoke', { agent_id: reg.body.agent_id }),
      403,
      'host_rejected',
    );
    expectError(await p.hostPost(host, '/host/revoke', {}), 403, 'host_rejected');
    // The denial stands as it was: the same key, still rejected.
    expect(await adminHost(p, reg.body.host_id)).toMatchObject({ status: 'rejected' });
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('rejected');
  });

  it('on an active host: the agent is rejected, answers 403 agent_rejected, and its key gets 409', async () => {
    const { key, hostId } = await unlinkedHost(p);
    const reg = await p.register(key, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    expectError(await useAgent(p, reg.agent, reg.body.agent_id), 403, 'agent_pending');
    const approval = await p.pendingApproval(reg.body.agent_id);
    const no = await p.admin('POST', `/admin/approvals/${approval.id}/deny`, {});
    expect(no.status).toBe(200);
    const status = await p.status(key, reg.body.agent_id);
    expect(status.body).toMatchObject({
      status: 'rejected',
      agent_capability_grants: [
        { capability: 'list_pets', status: 'denied', reason: 'Denied by the approver.' },
      ],
    });
    expect(status.body.approval).toBeUndefined();
    expectError(await useAgent(p, reg.agent, reg.body.agent_id), 403, 'agent_rejected');
    const retry = await p.register(key, { capabilities: ['list_pets'] }, reg.agent);
    expectError(retry, 409, 'agent_exists');
    expect(await adminHost(p, hostId)).toMatchObject({ status: 'active' });
  });

  it('a decided approval cannot be decided again: 409 approval_closed', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    expect((await approve(p, approval.id, { user_id: 'alice' })).status).toBe(200);
    expectError(await approve(p, approval.id, { user_id: 'alice' }), 409, 'approval_closed');
    expectError(await p.admin('POST', `/admin/approvals/${approval.id}/deny`, {}), 409, 'approval_closed');
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('active');

    const other = await p.register(await generateTestKey(), { capabilities: ['list_pets'] });
    const denied = await p.pendingApproval(other.body.agent_id);
    expect((await p.admin('POST', `/admin/approvals/${denied.id}/deny`, {})).status).toBe(200);
    expectError(await approve(p, denied.id, { user_id: 'alice' }), 409, 'approval_closed');
  });

  it('an unknown approval id is 404 approval_not_found', async () => {
    expectError(await approve(p, 'apr_doesnotexist', { user_id: 'alice' }), 404, 'approval_not_found');
    expectError(await p.admin('POST', '/admin/approvals/apr_nope/deny', {}), 404, 'approval_not_found');
  });
});

describe('approver narrowing (§2.13: MAY narrow, never widen)', () => {
  async function pendingWith(
    capabilities: unknown[],
  ): Promise<{ host: TestKey; agentId: string; id: string }> {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities });
    const approval = await p.pendingApproval(reg.body.agent_id);
    return { host, agentId: reg.body.agent_id, id: approval.id };
  }

  it('narrower constraints are applied and echoed in the grants', async () => {
    const r = await pendingWith([{ name: 'list_pets', constraints: { limit: { max: 30 } } }, 'get_pet']);
    const ok = await approve(p, r.id, {
      user_id: 'alice',
      constraints: {
        list_pets: { limit: { max: 10 }, status: 'available' },
        get_pet: { petId: { in: [1, 2] } },
      },
    });
    expect(ok.status).toBe(200);
    const grants = grantsByName((await p.status(r.host, r.agentId)).body);
    expect(grants.list_pets.constraints).toEqual({ limit: { max: 10 }, status: 'available' });
    expect(grants.get_pet.constraints).toEqual({ petId: { in: [1, 2] } });
  });

  it('wider constraints than the proposal do not widen it', async () => {
    const r = await pendingWith([
      { name: 'list_pets', constraints: { limit: { min: 5, max: 30 }, status: 'sold' } },
    ]);
    const ok = await approve(p, r.id, {
      user_id: 'alice',
      constraints: { list_pets: { limit: { min: 1, max: 100 }, status: { in: ['sold', 'available'] } } },
    });
    expect(ok.status).toBe(200);
    const grants = grantsByName((await p.status(r.host, r.agentId)).body);
    expect(grants.list_pets.constraints).toEqual({ limit: { min: 5, max: 30 }, status: 'sold' });
  });

  it.each([
    ['disjoint from the proposal', { list_pets: { limit: { min: 50 } } }, 'invalid_request'],
    ['an unknown operator', { list_pets: { limit: { at_most: 3 } } }, 'unknown_constraint_operator'],
    ['a field outside the input', { list_pets: { owner: 'bob' } }, 'invalid_request'],
    ['a capability not requested', { delete_pet: { petId: 1 } }, 'invalid_request'],
    ['a wrongly typed bound', { list_pets: { limit: { max: '5' } } }, 'invalid_request'],
    ['not an object', ['list_pets'], 'invalid_request'],
  ])('refuses narrowing with %s and leaves the request open', async (_label, constraints, error) => {
    const r = await pendingWith([{ name: 'list_pets', constraints: { limit: { max: 30 } } }]);
    const reply = await approve(p, r.id, { user_id: 'alice', constraints });
    expectError(reply, 400, error);
    if (error === 'unknown_constraint_operator') expect(reply.body.unknown_operators).toEqual(['at_most']);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
    expect((await approve(p, r.id, { user_id: 'alice' })).status).toBe(200);
  });
});

describe('linking by approval (§2.9)', () => {
  it('the approver becomes the host user, so the next registration gets its defaults at once', async () => {
    const host = await generateTestKey();
    const first = await p.register(host, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(first.body.agent_id);
    expect((await approve(p, approval.id, { user_id: 'erin' })).status).toBe(200);
    expect(await adminHost(p, first.body.host_id)).toMatchObject({ status: 'active', user_id: 'erin' });

    const second = await p.register(host, { capabilities: ['list_pets', 'get_pet', 'create_pet'] });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({
      status: 'active',
      user_id: 'erin',
      host_id: first.body.host_id,
      agent_capability_grants: [
        { capability: 'list_pets', status: 'active' },
        { capability: 'get_pet', status: 'active' },
        { capability: 'create_pet', status: 'pending' },
      ],
    });
    expect((await useAgent(p, second.agent, second.body.agent_id)).status).toBe(200);
  });

  it('a second pending agent of the same host is approved under the now-linked user only', async () => {
    const host = await generateTestKey();
    const a = await p.register(host, { capabilities: ['list_pets'] });
    const b = await p.register(host, { capabilities: ['list_pets'] });
    expect(
      (await approve(p, (await p.pendingApproval(a.body.agent_id)).id, { user_id: 'frank' })).status,
    ).toBe(200);
    const bApproval = await p.pendingApproval(b.body.agent_id);
    expectError(await approve(p, bApproval.id, { user_id: 'grace' }), 400, 'invalid_request');
    const ok = await approve(p, bApproval.id, {});
    expect(ok.body.agent).toMatchObject({ status: 'active', user_id: 'frank' });
  });
});

describe('approval expiry (§7.1 expires_in)', () => {
  let q: TestProtocol;
  beforeAll(async () => {
    q = await startProtocol({ policy: `${BASE}approval:\n  expires_in: 2m\n  interval: 3s\n` });
  });
  afterAll(() => q.close());

  it('advertises expires_in and interval from the policy, counting down with the clock', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.approval).toMatchObject({ expires_in: 120, interval: 3 });
    q.clock.advance(30_000);
    const status = await q.status(host, reg.body.agent_id);
    expect(status.body.approval).toMatchObject({ expires_in: 90, user_code: reg.body.approval.user_code });
  });

  it('after maintenance an expired registration approval is closed; a retry opens a fresh one', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, { capabilities: ['list_pets'] });
    const approval = await q.pendingApproval(reg.body.agent_id);
    q.clock.advance(120_000);
    await q.proxy.maintain();
    expect(await q.pendingApproval(reg.body.agent_id)).toBeUndefined();
    expectError(await approve(q, approval.id, { user_id: 'alice' }), 409, 'approval_closed');
    const status = await q.status(host, reg.body.agent_id);
    // A registration that nobody answered stays pending (a retry refreshes it) until cleanup.
    expect(status.body).toMatchObject({
      status: 'pending',
      agent_capability_grants: [{ capability: 'list_pets', status: 'pending' }],
    });
    expect(status.body.approval).toBeUndefined();
    expectError(await useAgent(q, reg.agent, reg.body.agent_id), 403, 'host_pending');

    const retry = await q.register(host, { capabilities: ['list_pets'] }, reg.agent);
    expect(retry.body.agent_id).toBe(reg.body.agent_id);
    expect(retry.body.approval.user_code).not.toBe(reg.body.approval.user_code);
    expect(retry.body.approval.expires_in).toBe(120);
    const fresh = await q.pendingApproval(reg.body.agent_id);
    expect(fresh.id).not.toBe(approval.id);
    expect(fresh.capabilities).toEqual([{ name: 'list_pets' }]);
    expect((await approve(q, fresh.id, { user_id: 'alice' })).status).toBe(200);
    expect(grantsByName((await q.status(host, reg.body.agent_id)).body).list_pets.status).toBe('active');
  });

  it('expires lazily too: no maintenance needed to refuse a late approval', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, { capabilities: ['list_pets'] });
    const approval = await q.pendingApproval(reg.body.agent_id);
    q.clock.advance(119_000);
    expect((await q.status(host, reg.body.agent_id)).body.approval.expires_in).toBe(1);
    q.clock.advance(1_000);
    expectError(await approve(q, approval.id, { user_id: 'alice' }), 409, 'approval_closed');
    expect((await q.status(host, reg.body.agent_id)).body.approval).toBeUndefined();
  });

  it('an expired capability request denies its pending grants; the agent may ask again', async () => {
    const { key } = await q.linkedHost('alice');
    const reg = await q.register(key, { capabilities: ['list_pets'] });
    const token = await q.agentToken(reg.agent, reg.body.agent_id);
    const asked = await q.request('POST', '/agent/request-capability', {
      token,
      body: { capabilities: ['create_pet'] },
    });
    expect(asked.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
    const approval = await q.pendingApproval(reg.body.agent_id);
    q.clock.advance(121_000);
    await q.proxy.maintain();
    expectError(await approve(q, approval.id, {}), 409, 'approval_closed');
    const status = await q.status(key, reg.body.agent_id);
    expect(status.body.status).toBe('active');
    expect(grantsByName(status.body).create_pet).toEqual({
      capability: 'create_pet',
      status: 'denied',
      reason: 'The approval request expired.',
    });
    const again = await q.request('POST', '/agent/request-capability', {
      token: await q.agentToken(reg.agent, reg.body.agent_id),
      body: { capabilities: ['create_pet'] },
    });
    expect(again.status).toBe(200);
    expect(again.body.agent_capability_grants).toEqual([{ capability: 'create_pet', status: 'pending' }]);
  });
});

describe('CIBA (§7.2, §7.5)', () => {
  let q: TestProtocol;
  beforeAll(async () => {
    q = await startProtocol({
      policy: `${BASE}approval:\n  methods: [device_authorization, ciba]\n  approvers: [alice@example.com]\n`,
    });
  });
  afterAll(() => q.close());

  it('a login_hint naming a known approver selects CIBA', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, {
      capabilities: ['list_pets'],
      login_hint: 'alice@example.com',
      binding_message: 'Approve pet helper',
    });
    expect(reg.status).toBe(200);
    const approval = await q.pendingApproval(reg.body.agent_id);
    expect(reg.body.approval).toEqual({
      method: 'ciba',
      expires_in: 600,
      interval: 5,
      binding_message: 'Approve pet helper',
      notification_url: `${q.issuer}/agent/events/${approval.id}`,
    });
    expect(approval).toMatchObject({
      method: 'ciba',
      login_hint: 'alice@example.com',
      binding_message: 'Approve pet helper',
    });
    const status = await q.status(host, reg.body.agent_id);
    expect(status.body.approval.method).toBe('ciba');
    expect((await approve(q, approval.id, { user_id: 'alice@example.com' })).status).toBe(200);
    expect((await q.status(host, reg.body.agent_id)).body).toMatchObject({
      status: 'active',
      user_id: 'alice@example.com',
    });
  });

  it('a host linked to nobody gets the same answer for any login_hint: who is an approver does not leak (§7.2, CIBA Core §14)', async () => {
    const asked = async (hint: string) => {
      const host = await generateTestKey();
      const reg = await q.register(host, { capabilities: ['list_pets'], login_hint: hint });
      expect(reg.status).toBe(200);
      return { host, reg, approval: await q.pendingApproval(reg.body.agent_id) };
    };
    const real = await asked('alice@example.com');
    const madeUp = await asked('mallory@example.com');
    const shape = (body: Record<string, unknown>) => ({ ...body, notification_url: 'x' });
    expect(shape(madeUp.reg.body.approval)).toEqual(shape(real.reg.body.approval));
    expect(madeUp.reg.body.approval.method).toBe('ciba');
    expect(madeUp.reg.body.approval.user_code).toBeUndefined();
    // The made-up hint reaches nobody; the request waits, then expires unanswered.
    expect(madeUp.approval.login_hint).toBe('mallory@example.com');
    expect((await q.status(madeUp.host, madeUp.reg.body.agent_id)).body.status).toBe('pending');
  });

  it('a host linked to a user gets CIBA only for that user as login_hint', async () => {
    const { key } = await q.linkedHost('alice@example.com');
    const reg = await q.register(key, { capabilities: ['create_pet'], login_hint: 'mallory@example.com' });
    expect(reg.body.approval.method).toBe('device_authorization');
  });

  it('§7.5: a linked host preferring CIBA without a login_hint reaches its own user, when an approver', async () => {
    const { key } = await q.linkedHost('alice@example.com');
    const reg = await q.register(key, { capabilities: ['create_pet'], preferred_method: 'ciba' });
    expect(reg.body.approval.method).toBe('ciba');
    const approval = await q.pendingApproval(reg.body.agent_id);
    expect(approval).toMatchObject({ method: 'ciba', login_hint: 'alice@example.com' });
    expect((await approve(q, approval.id, {})).status).toBe(200);
    expect((await q.status(key, reg.body.agent_id)).body.status).toBe('active');

    // Its user not an approver, or no preference, or a host linked to nobody: device authorization.
    const bobs = await q.linkedHost('bob@example.com');
    const notApprover = await q.register(bobs.key, {
      capabilities: ['create_pet'],
      preferred_method: 'ciba',
    });
    expect(notApprover.body.approval.method).toBe('device_authorization');
    const noPreference = await q.register((await q.linkedHost('alice@example.com')).key, {
      capabilities: ['create_pet'],
    });
    expect(noPreference.body.approval.method).toBe('device_authorization');
    const stranger = await q.register(await generateTestKey(), { preferred_method: 'ciba' });
    expect(stranger.body.approval.method).toBe('device_authorization');
  });

  it('preferred_method device_authorization is honoured even for a known approver', async () => {
    const reg = await q.register(await generateTestKey(), {
      login_hint: 'alice@example.com',
      preferred_method: 'device_authorization',
    });
    expect(reg.body.approval.method).toBe('device_authorization');
  });

  it('a capability request with the approver as login_hint is approved through CIBA', async () => {
    const { key } = await q.linkedHost('alice@example.com');
    const reg = await q.register(key, {});
    const asked = await q.request('POST', '/agent/request-capability', {
      token: await q.agentToken(reg.agent, reg.body.agent_id),
      body: { capabilities: ['create_pet'], login_hint: 'alice@example.com' },
    });
    expect(asked.body.approval).toEqual({
      method: 'ciba',
      expires_in: 600,
      interval: 5,
      notification_url: expect.stringMatching(/\/agent\/events\/apr_/),
    });
  });

  it('only the user a CIBA request was sent to can approve it; without user_id it is theirs', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, { capabilities: ['list_pets'], login_hint: 'alice@example.com' });
    expect(reg.body.approval.method).toBe('ciba');
    const approval = await q.pendingApproval(reg.body.agent_id);
    const wrong = await approve(q, approval.id, { user_id: 'bob@example.com' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ error: 'invalid_request' });
    expect(wrong.body.message).toMatch(/sent to alice@example\.com; only that user can approve it/);
    // Nothing changed: still pending, the host not linked to anyone.
    expect((await q.status(host, reg.body.agent_id)).body.status).toBe('pending');
    expect((await q.pendingApproval(reg.body.agent_id)).id).toBe(approval.id);
    expect((await approve(q, approval.id, {})).status).toBe(200);
    expect((await q.status(host, reg.body.agent_id)).body).toMatchObject({
      status: 'active',
      user_id: 'alice@example.com',
    });
  });

  it("a hint naming someone other than a linked host's user gets device authorization", async () => {
    const { key } = await q.linkedHost('bob@example.com');
    const reg = await q.register(key, {});
    const asked = await q.request('POST', '/agent/request-capability', {
      token: await q.agentToken(reg.agent, reg.body.agent_id),
      body: { capabilities: ['create_pet'], login_hint: 'alice@example.com' },
    });
    expect(asked.body.approval.method).toBe('device_authorization');
  });

  it('without ciba in the policy a known hint still gets device authorization', async () => {
    const reg = await p.register(await generateTestKey(), {
      login_hint: 'alice@example.com',
      preferred_method: 'ciba',
    });
    expect(reg.body.approval.method).toBe('device_authorization');
  });
});

describe('autonomous agents (§2.2.2) and claiming (§2.10)', () => {
  let q: TestProtocol;
  beforeAll(async () => {
    q = await startProtocol({
      policy: `${BASE}modes: [delegated, autonomous]\nautonomous:\n  grants: [list_pets, get_pet, create_pet]\n`,
    });
  });
  afterAll(() => q.close());

  it('an unlinked active host gets the policy grants at once, with no user', async () => {
    const { key } = await unlinkedHost(q);
    const reg = await q.register(key, {
      mode: 'autonomous',
      capabilities: ['list_pets', 'get_pet', 'create_pet', 'delete_pet'],
    });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({ mode: 'autonomous', status: 'active' });
    expect(reg.body.user_id).toBeUndefined();
    const grants = grantsByName(reg.body);
    expect(grants.list_pets.status).toBe('active');
    expect(grants.get_pet.status).toBe('active');
    // create_pet is listed in autonomous.grants, but POST is high-risk: high_risk wins.
    expect(grants.create_pet).toEqual({ capability: 'create_pet', status: 'pending' });
    expect(grants.delete_pet).toEqual({ capability: 'delete_pet', status: 'pending' });
    const approval = await q.pendingApproval(reg.body.agent_id);
    expect(approval.capabilities).toEqual([{ name: 'create_pet' }, { name: 'delete_pet' }]);
    // An administrator approves without linking anyone (§2.2.2).
    const ok = await approve(q, approval.id, { capabilities: ['create_pet'] });
    expect(ok.body.agent).toMatchObject({ status: 'active', mode: 'autonomous' });
    expect(ok.body.agent.user_id).toBeUndefined();
    expect((await useAgent(q, reg.agent, reg.body.agent_id)).status).toBe(200);
  });

  it('an unknown host still gets nothing before approval (§8.10), and approval links no user', async () => {
    const host = await generateTestKey();
    const reg = await q.register(host, { mode: 'autonomous', capabilities: ['list_pets'] });
    expect(reg.body).toMatchObject({
      status: 'pending',
      agent_capability_grants: [{ capability: 'list_pets', status: 'pending' }],
    });
    const ok = await approve(q, (await q.pendingApproval(reg.body.agent_id)).id, {});
    expect(ok.status).toBe(200);
    expect(await adminHost(q, reg.body.host_id)).toMatchObject({ status: 'active', user_id: null });
    // The host is now active and unlinked: its next autonomous agent is auto-granted.
    const next = await q.register(host, { mode: 'autonomous', capabilities: ['get_pet'] });
    expect(next.body).toMatchObject({
      status: 'active',
      agent_capability_grants: [{ capability: 'get_pet', status: 'active' }],
    });
  });

  it('linking the host claims its active autonomous agents: grants revoked, status claimed', async () => {
    const { key, hostId } = await unlinkedHost(q);
    const a = await q.register(key, { mode: 'autonomous', capabilities: ['list_pets'] });
    const b = await q.register(key, { mode: 'autonomous', capabilities: ['get_pet'] });
    expect([a.body.status, b.body.status]).toEqual(['active', 'active']);

    const linked = await q.admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'carol' });
    expect(linked.status).toBe(200);
    expect(linked.body).toMatchObject({ user_id: 'carol', agents_claimed: 2 });

    for (const r of [a, b]) {
      const status = await q.status(key, r.body.agent_id);
      expect(status.body).toMatchObject({ status: 'claimed', user_id: 'carol', agent_capability_grants: [] });
      expectError(await useAgent(q, r.agent, r.body.agent_id), 403, 'agent_claimed');
      // Claimed is terminal: no reactivation (§2.10).
      const react = await q.request('POST', '/agent/reactivate', {
        token: await q.hostToken(key),
        body: { agent_id: r.body.agent_id },
      });
      expectError(react, 403, 'agent_claimed');
    }
    // Activity history is attributed to the user.
    const owned = await q.admin('GET', '/admin/agents?user_id=carol');
    expect((owned.body.agents as { agent_id: string }[]).map((x) => x.agent_id).sort()).toEqual(
      [a.body.agent_id, b.body.agent_id].sort(),
    );
    const activity = await q.admin('GET', `/admin/activity?agent_id=${a.body.agent_id}`);
    expect(activity.body.activity).toContainEqual(
      expect.objectContaining({ type: 'agent.claimed', user_id: 'carol' }),
    );

    // From now on the host runs delegated agents of carol; autonomous ones are refused.
    expectError(await q.register(key, { mode: 'autonomous' }), 400, 'unsupported_mode');
    const delegated = await q.register(key, { capabilities: ['list_pets'] });
    expect(delegated.body).toMatchObject({ status: 'active', user_id: 'carol' });
  });

  it('approving a delegated registration from the host links it and claims its autonomous agents', async () => {
    const { key, hostId } = await unlinkedHost(q);
    const auto = await q.register(key, { mode: 'autonomous', capabilities: ['list_pets'] });
    expect(auto.body.status).toBe('active');
    const delegated = await q.register(key, { capabilities: ['list_pets'] });
    expect(delegated.body.status).toBe('pending');
    const ok = await approve(q, (await q.pendingApproval(delegated.body.agent_id)).id, { user_id: 'dave' });
    expect(ok.status).toBe(200);
    expect(await adminHost(q, hostId)).toMatchObject({ user_id: 'dave' });
    expect((await q.status(key, auto.body.agent_id)).body).toMatchObject({
      status: 'claimed',
      user_id: 'dave',
    });
    expectError(await useAgent(q, auto.agent, auto.body.agent_id), 403, 'agent_claimed');
    expect((await useAgent(q, delegated.agent, delegated.body.agent_id)).status).toBe(200);
  });

  it('linking also claims pending autonomous agents and closes their open approvals (§2.10)', async () => {
    const host = await generateTestKey();
    const auto = await q.register(host, { mode: 'autonomous', capabilities: ['list_pets'] });
    expect(auto.body.status).toBe('pending');
    const autoApproval = await q.pendingApproval(auto.body.agent_id);
    const delegated = await q.register(host, { capabilities: ['list_pets'] });
    const ok = await approve(q, (await q.pendingApproval(delegated.body.agent_id)).id, { user_id: 'frank' });
    expect(ok.status).toBe(200);
    expect((await q.status(host, auto.body.agent_id)).body).toMatchObject({
      status: 'claimed',
      user_id: 'frank',
      agent_capability_grants: [],
    });
    // Approving it now would give a linked host an autonomous agent without a user.
    expectError(await approve(q, autoApproval.id, {}), 409, 'approval_closed');
    expectError(await useAgent(q, auto.agent, auto.body.agent_id), 403, 'agent_claimed');
    expect((await useAgent(q, delegated.agent, delegated.body.agent_id)).status).toBe(200);
  });

  it('the autonomous agent of an unlinked host may request a policy grant without approval', async () => {
    const { key } = await unlinkedHost(q);
    const reg = await q.register(key, { mode: 'autonomous' });
    const asked = await q.request('POST', '/agent/request-capability', {
      token: await q.agentToken(reg.agent, reg.body.agent_id),
      body: { capabilities: ['get_pet', 'delete_pet'] },
    });
    expect(asked.status).toBe(200);
    expect(asked.body.agent_capability_grants).toMatchObject([
      { capability: 'get_pet', status: 'active' },
      { capability: 'delete_pet', status: 'pending' },
    ]);
    expect(asked.body.approval.method).toBe('device_authorization');
  });
});
