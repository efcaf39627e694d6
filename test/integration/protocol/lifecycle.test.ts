/**
 * Agent and host lifecycles over real HTTP with a controlled clock: the three lifetime clocks
 * (§2.3, §2.4), reactivation (§2.5, §5.6), revocation (§2.6, §5.7) and its immediacy despite the
 * hot cache (§10.2), agent and host key rotation (§5.8, §5.9), host revocation with its cascade
 * (§5.10, §8.5), unlinking (§2.9), stale pending cleanup (§10.9) and coalesced `last_used_at`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateTestKey, signJwt, type TestKey } from '../../helpers/keys.js';
import { lifetimesPolicy } from '../../helpers/lifetimes-policy.js';
import { INTROSPECTION_TOKEN, startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const SESSION_TTL = 10 * MIN;
const MAX_LIFETIME = HOUR;
const ABSOLUTE_LIFETIME = 3 * HOUR;
const PENDING_CLEANUP = HOUR;

// Short clocks so a test can walk through them; list_pets is a policy default, delete_pet is
// high-risk (never auto-approved, §8.10). Rate limits are off: they are not what is tested.
const POLICY = lifetimesPolicy('1h');

let p: TestProtocol;
beforeEach(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterEach(() => p.close());

interface Agent {
  host: TestKey;
  hostId: string;
  agent: TestKey;
  agentId: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** A delegated agent of a host linked to alice with `defaults`; anything not auto-granted is approved. */
async function linkedAgent(capabilities: string[], defaults: string[] = []): Promise<Agent> {
  const { key: host, hostId } = await p.linkedHost('alice', defaults);
  return agentOf(host, hostId, capabilities);
}

async function agentOf(host: TestKey, hostId: string, capabilities: string[]): Promise<Agent> {
  const reg = await p.register(host, { capabilities });
  expect(reg.status, JSON.stringify(reg.body)).toBe(200);
  const agentId: string = reg.body.agent_id;
  const approval = await p.pendingApproval(agentId);
  if (approval) {
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  }
  return { host, hostId, agent: reg.agent, agentId };
}

/** One authenticated agent request (the capability listing). */
async function use(a: Pick<Agent, 'agent' | 'agentId'>, key: TestKey = a.agent): Promise<Reply> {
  return p.request('GET', '/capability/list', { token: await p.agentToken(key, a.agentId) });
}

function expectError(reply: Reply, status: number, error: string, message?: RegExp): void {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body.error).toBe(error);
  if (message) expect(reply.body.message).toMatch(message);
}

function names(grants: { capability: string; status: string }[]): string[] {
  return grants.map((g) => `${g.capability}:${g.status}`).sort();
}

describe('session TTL (§2.4): sliding, measured from the last request', () => {
  it('keeps an agent active while it makes requests, and expires it after session_ttl of silence', async () => {
    const a = await linkedAgent(['list_pets']);
    // Activity at 9 minutes, then again at 18: 18 minutes after activation but never 10 idle.
    p.clock.advance(9 * MIN);
    expect((await use(a)).status).toBe(200);
    p.clock.advance(9 * MIN);
    expect((await use(a)).status).toBe(200);
    const lastUse = p.clock.now();

    // Host polling is not agent activity: it must not extend the session.
    p.clock.advance(SESSION_TTL - 1);
    const before = await p.status(a.host, a.agentId);
    expect(before.body).toMatchObject({ status: 'active', expires_at: iso(lastUse + SESSION_TTL) });

    p.clock.advance(1);
    const after = await p.status(a.host, a.agentId);
    expect(after.status).toBe(200);
    expect(after.body.status).toBe('expired');
    expect(after.body.expires_at).toBeUndefined();
    expect(after.body.activated_at).toBeUndefined();
    expectError(await use(a), 403, 'agent_expired');
  });

  it('an agent that is never used expires session_ttl after activation, on first use too', async () => {
    const a = await linkedAgent(['list_pets']);
    p.clock.advance(SESSION_TTL);
    // No status call first: the agent's own request finds the clock run out.
    expectError(await use(a), 403, 'agent_expired');
    expect((await p.status(a.host, a.agentId)).body.status).toBe('expired');
  });
});

describe('max lifetime (§2.4): from activation, regardless of activity', () => {
  it('expires an agent that never stopped making requests', async () => {
    const a = await linkedAgent(['list_pets']);
    const activated = p.clock.now();
    for (let t = 9 * MIN; t < MAX_LIFETIME; t += 9 * MIN) {
      p.clock.advance(9 * MIN);
      expect((await use(a)).status).toBe(200);
    }
    p.clock.advance(activated + MAX_LIFETIME - 1 - p.clock.now());
    expect((await use(a)).status).toBe(200);
    const status = await p.status(a.host, a.agentId);
    // The session clock would run for 10 more minutes; the max lifetime ends first.
    expect(status.body).toMatchObject({ status: 'active', expires_at: iso(activated + MAX_LIFETIME) });

    p.clock.advance(1);
    expectError(await use(a), 403, 'agent_expired');
    expect((await p.status(a.host, a.agentId)).body.status).toBe('expired');
  });
});

describe('absolute lifetime (§2.4, §2.5): from creation, to revoked', () => {
  it('revokes an agent at its absolute lifetime even right after a reactivation, for good', async () => {
    const a = await linkedAgent(['list_pets']);
    const created = p.clock.now();
    p.clock.advance(ABSOLUTE_LIFETIME - 5 * MIN);
    expect((await p.status(a.host, a.agentId)).body.status).toBe('expired');
    const re = await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId });
    expect(re.status, JSON.stringify(re.body)).toBe(200);
    expect(re.body.status).toBe('active');
    // The expiry it is told is when it stops working: the absolute lifetime, 5 minutes away, not
    // the 10-minute session. Observed before: created + absolute lifetime + 5 minutes, everywhere.
    const end = new Date(created + ABSOLUTE_LIFETIME).toISOString();
    expect(re.body.expires_at).toBe(end);
    expect((await p.status(a.host, a.agentId)).body.expires_at).toBe(end);
    expect((await p.admin('GET', `/admin/agents/${a.agentId}`)).body.expires_at).toBe(end);
    const introspected = await p.request('POST', '/agent/introspect', {
      token: INTROSPECTION_TOKEN,
      body: { token: await p.agentToken(a.agent, a.agentId) },
    });
    expect(introspected.body).toMatchObject({ active: true, expires_at: end });

    // Reactivation does not reset the absolute clock: the fresh session is cut short.
    p.clock.advance(5 * MIN - 1);
    expect((await use(a)).status).toBe(200);
    p.clock.advance(1);
    expect(p.clock.now()).toBe(created + ABSOLUTE_LIFETIME);
    expectError(await use(a), 403, 'agent_revoked');
    const revoked = await p.status(a.host, a.agentId);
    expect(revoked.body.status).toBe('revoked');
    // Revoked by the clock exactly as by a call: no grant stays active.
    const stored = await p.proxy.protocol.store.grants(a.agentId);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.every((g) => g.status === 'revoked')).toBe(true);
    expectError(await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId }), 403, 'agent_revoked');
  });

  it('the operator API shows lifetime clocks applied (an idle agent is expired there too)', async () => {
    const a = await linkedAgent(['list_pets']);
    p.clock.advance(SESSION_TTL);
    const one = await p.admin('GET', `/admin/agents/${a.agentId}`);
    expect(one.body.status).toBe('expired');
    const listed = await p.admin('GET', '/admin/agents?status=expired');
    expect(listed.body.agents.map((x: { agent_id: string }) => x.agent_id)).toContain(a.agentId);
  });

  it('reactivating an expired agent past its absolute lifetime fails with absolute_lifetime_exceeded (§5.6 step 2)', async () => {
    const a = await linkedAgent(['list_pets']);
    p.clock.advance(SESSION_TTL);
    expect((await p.status(a.host, a.agentId)).body.status).toBe('expired');
    p.clock.advance(ABSOLUTE_LIFETIME);
    // No request in between: the reactivation itself finds the absolute clock run out.
    expectError(
      await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId }),
      403,
      'absolute_lifetime_exceeded',
    );
    const status = await p.status(a.host, a.agentId);
    expect(status.body.status).toBe('revoked');
    expectError(await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId }), 403, 'agent_revoked');
  });
});

describe('POST /agent/reactivate (§5.6)', () => {
  it('step 1: only an expired agent reactivates; other states answer as the spec lists', async () => {
    const a = await linkedAgent(['list_pets']);
    const activated = p.clock.now();
    p.clock.advance(MIN);
    // active → the current status, a no-op: the activation time does not move.
    const noop = await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId });
    expect(noop.status).toBe(200);
    expect(noop.body).toMatchObject({ agent_id: a.agentId, status: 'active', activated_at: iso(activated) });
    expect((await p.status(a.host, a.agentId)).body.activated_at).toBe(iso(activated));

    // revoked → 403 agent_revoked
    expect((await p.hostPost(a.host, '/agent/revoke', { agent_id: a.agentId })).status).toBe(200);
    expectError(await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId }), 403, 'agent_revoked');

    // pending → 403 agent_pending (a pre-registered, unlinked host: delegated agents wait for a human)
    const unlinkedHost = await generateTestKey();
    const pre = await p.admin('POST', '/admin/hosts', { public_key: unlinkedHost.publicJwk });
    expect(pre.status).toBe(201);
    const pending = await p.register(unlinkedHost, { capabilities: ['list_pets'] });
    expect(pending.body.status).toBe('pending');
    expectError(
      await p.hostPost(unlinkedHost, '/agent/reactivate', { agent_id: pending.body.agent_id }),
      403,
      'agent_pending',
    );

    // rejected → 403 agent_rejected
    const denied = await p.register(unlinkedHost, { capabilities: ['list_pets'] });
    const approval = await p.pendingApproval(denied.body.agent_id);
    expect((await p.admin('POST', `/admin/approvals/${approval.id}/deny`, {})).status).toBe(200);
    expectError(
      await p.hostPost(unlinkedHost, '/agent/reactivate', { agent_id: denied.body.agent_id }),
      403,
      'agent_rejected',
    );

    // claimed → 403 agent_claimed (§2.10: linking the host claims its autonomous agents)
    const auto = await p.register(unlinkedHost, { mode: 'autonomous' });
    expect(auto.body.status).toBe('active');
    const link = await p.admin('POST', `/admin/hosts/${pre.body.host_id}/link`, { user_id: 'bob' });
    expect(link.body.agents_claimed).toBe(1);
    expectError(
      await p.hostPost(unlinkedHost, '/agent/reactivate', { agent_id: auto.body.agent_id }),
      403,
      'agent_claimed',
    );

    // Another host's agent: the server MUST verify the agent is registered under the caller.
    const other = await linkedAgent(['list_pets']);
    p.clock.advance(SESSION_TTL);
    expectError(
      await p.hostPost(a.host, '/agent/reactivate', { agent_id: other.agentId }),
      403,
      'unauthorized',
    );
    expectError(
      await p.hostPost(a.host, '/agent/reactivate', { agent_id: 'agt_doesnotexist' }),
      404,
      'agent_not_found',
    );
    expectError(await p.hostPost(a.host, '/agent/reactivate', {}), 400, 'invalid_request');
  });

  it('steps 3–6: grants decay to the host’s current defaults and the session clocks restart', async () => {
    const a = await linkedAgent(
      ['list_pets', 'get_pet', 'create_pet', 'delete_pet'],
      ['get_pet', 'create_pet'],
    );
    const before = await p.status(a.host, a.agentId);
    expect(names(before.body.agent_capability_grants)).toEqual([
      'create_pet:active',
      'delete_pet:active',
      'get_pet:active',
      'list_pets:active',
    ]);

    // The operator narrows the host's defaults while the agent is idle: reactivation uses the
    // defaults as they are now (§5.6 step 4), not as they were at registration.
    const narrowed = await p.admin('POST', '/admin/hosts', {
      public_key: a.host.publicJwk,
      user_id: 'alice',
      default_capabilities: ['get_pet'],
    });
    expect(narrowed.status).toBe(200);

    p.clock.advance(SESSION_TTL);
    expectError(await use(a), 403, 'agent_expired');
    p.clock.advance(30 * MIN);
    const now = p.clock.now();
    const re = await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId });
    expect(re.status, JSON.stringify(re.body)).toBe(200);
    expect(re.body).toMatchObject({
      agent_id: a.agentId,
      host_id: a.hostId,
      status: 'active',
      mode: 'delegated',
      user_id: 'alice',
      activated_at: iso(now),
      expires_at: iso(now + SESSION_TTL),
    });
    expect(re.body.approval).toBeUndefined();
    // Escalations (create_pet, delete_pet) are gone; the host default and the policy default remain.
    expect(names(re.body.agent_capability_grants)).toEqual(['get_pet:active', 'list_pets:active']);
    const status = await p.status(a.host, a.agentId);
    expect(names(status.body.agent_capability_grants)).toEqual(['get_pet:active', 'list_pets:active']);
    expect(status.body.activated_at).toBe(iso(now));

    const listing = await use(a);
    expect(listing.status).toBe(200);
    const granted = (listing.body.capabilities as { name: string; grant_status: string }[])
      .filter((c) => c.grant_status === 'granted')
      .map((c) => c.name)
      .sort();
    expect(granted).toEqual(['get_pet', 'list_pets']);

    // A lost escalation must be requested again (and, being high-risk, approved again).
    const again = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['delete_pet'] },
    });
    expect(again.status).toBe(200);
    expect(again.body.agent_capability_grants).toEqual([{ capability: 'delete_pet', status: 'pending' }]);
    expect(again.body.approval).toMatchObject({ method: 'device_authorization' });
    const held = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['get_pet'] },
    });
    expectError(held, 409, 'already_granted');

    // Both clocks restarted at the reactivation: the max lifetime now runs from `now`.
    for (let t = 9 * MIN; t < MAX_LIFETIME; t += 9 * MIN) {
      p.clock.advance(9 * MIN);
      expect((await use(a)).status).toBe(200);
    }
    p.clock.advance(now + MAX_LIFETIME - 1 - p.clock.now());
    expect((await use(a)).status).toBe(200);
    p.clock.advance(1);
    expectError(await use(a), 403, 'agent_expired');
  });

  it('a high-risk host default is not auto-approved on reactivation: a reactivation approval asks for it (§8.10)', async () => {
    const a = await linkedAgent(['list_pets'], ['delete_pet']);
    p.clock.advance(SESSION_TTL);
    const re = await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId });
    expect(re.status).toBe(200);
    expect(re.body.status).toBe('active');
    expect(names(re.body.agent_capability_grants)).toEqual(['delete_pet:pending', 'list_pets:active']);
    expect(re.body.approval).toMatchObject({ method: 'device_authorization' });
    const approval = await p.pendingApproval(a.agentId);
    expect(approval).toMatchObject({
      kind: 'reactivation',
      agent_id: a.agentId,
      capabilities: [{ name: 'delete_pet' }],
      user_code: re.body.approval.user_code,
    });
  });

  it('an agent whose host is not linked needs a human: pending, kind reactivation, then active', async () => {
    const a = await linkedAgent(['list_pets', 'create_pet'], ['get_pet']);
    p.clock.advance(2 * HOUR);
    expect((await p.status(a.host, a.agentId)).body.status).toBe('expired');
    // Over HTTP an unlinked host has no expired delegated agents (unlinking revokes them, §2.9),
    // so the host's link is removed in the store directly to reach this branch of §5.6 step 4.
    await p.proxy.protocol.write((tx) => tx.updateHost(a.hostId, { userId: null, updatedAt: p.clock.now() }));

    const re = await p.hostPost(a.host, '/agent/reactivate', { agent_id: a.agentId });
    expect(re.status, JSON.stringify(re.body)).toBe(200);
    expect(re.body).toMatchObject({
      agent_id: a.agentId,
      status: 'pending',
      approval: { method: 'device_authorization', expires_in: 600 },
    });
    expect(re.body.activated_at).toBeUndefined();
    expect(re.body.expires_at).toBeUndefined();
    expect(names(re.body.agent_capability_grants)).toEqual(['get_pet:pending', 'list_pets:pending']);
    const approval = await p.pendingApproval(a.agentId);
    expect(approval).toMatchObject({ kind: 'reactivation', user_code: re.body.approval.user_code });
    expect(approval.capabilities.map((c: { name: string }) => c.name).sort()).toEqual([
      'get_pet',
      'list_pets',
    ]);
    expectError(await use(a), 403, 'agent_pending');

    // The agent became active once: stale-pending cleanup (§10.9) is for agents that never did.
    p.clock.advance(MIN);
    await p.proxy.maintain();
    expect((await p.status(a.host, a.agentId)).body.status).toBe('pending');

    const approvedAt = p.clock.now();
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const status = await p.status(a.host, a.agentId);
    expect(status.body).toMatchObject({ status: 'active', user_id: 'alice', activated_at: iso(approvedAt) });
    expect(names(status.body.agent_capability_grants)).toEqual(['get_pet:active', 'list_pets:active']);
    expect((await p.admin('GET', `/admin/hosts/${a.hostId}`)).body.user_id).toBe('alice');
    expect((await use(a)).status).toBe(200);
  });
});

describe('POST /agent/revoke (§5.7)', () => {
  it('by its host: permanent and immediate, even with the agent in the hot cache (§10.2)', async () => {
    const a = await linkedAgent(['list_pets']);
    // The first request loads the agent into the in-memory cache.
    expect((await use(a)).status).toBe(200);
    expect((await use(a)).status).toBe(200);
    const revoke = await p.hostPost(a.host, '/agent/revoke', { agent_id: a.agentId });
    expect(revoke.status).toBe(200);
    expect(revoke.body).toEqual({ agent_id: a.agentId, status: 'revoked' });
    // Same instant: no cache TTL has passed, yet the revocation holds.
    expectError(await use(a), 403, 'agent_revoked');
    const status = await p.status(a.host, a.agentId);
    expect(status.body.status).toBe('revoked');
    expect(status.body.agent_capability_grants).toEqual([]);
    expectError(
      await p.request('POST', '/agent/request-capability', {
        token: await p.agentToken(a.agent, a.agentId),
        body: { capabilities: ['get_pet'] },
      }),
      403,
      'agent_revoked',
    );
  });

  it('by the operator: immediate too', async () => {
    const a = await linkedAgent(['list_pets']);
    expect((await use(a)).status).toBe(200);
    const revoke = await p.admin('POST', `/admin/agents/${a.agentId}/revoke`, {});
    expect(revoke.body).toEqual({ agent_id: a.agentId, status: 'revoked' });
    expectError(await use(a), 403, 'agent_revoked');
  });

  it('by another host: rejected, and the agent keeps working', async () => {
    const a = await linkedAgent(['list_pets']);
    const other = await p.linkedHost('alice');
    expectError(await p.hostPost(other.key, '/agent/revoke', { agent_id: a.agentId }), 403, 'unauthorized');
    expect((await use(a)).status).toBe(200);
    expect((await p.status(a.host, a.agentId)).body.status).toBe('active');
    expectError(await p.hostPost(a.host, '/agent/revoke', { agent_id: 'agt_nope' }), 404, 'agent_not_found');
    expectError(await p.hostPost(a.host, '/agent/revoke', {}), 400, 'invalid_request');
  });

  it('closes the agent’s open approvals', async () => {
    const a = await linkedAgent(['list_pets']);
    const req = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['delete_pet'] },
    });
    const approval = await p.pendingApproval(a.agentId);
    expect(approval.user_code).toBe(req.body.approval.user_code);
    await p.hostPost(a.host, '/agent/revoke', { agent_id: a.agentId });
    expect(await p.pendingApproval(a.agentId)).toBeUndefined();
    expectError(await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {}), 409, 'approval_closed');
  });
});

describe('POST /agent/rotate-key (§5.8)', () => {
  it('the new key works and the old one stops working at once', async () => {
    const a = await linkedAgent(['list_pets']);
    expect((await use(a)).status).toBe(200); // cached with the old key
    const fresh = await generateTestKey();
    const rotated = await p.hostPost(a.host, '/agent/rotate-key', {
      agent_id: a.agentId,
      public_key: fresh.publicJwk,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({ agent_id: a.agentId, status: 'active' });
    expectError(await use(a), 401, 'invalid_jwt');
    expect((await use(a, fresh)).status).toBe(200);
    // Grants and status are untouched by the rotation.
    const status = await p.status(a.host, a.agentId);
    expect(names(status.body.agent_capability_grants)).toEqual(['list_pets:active']);
  });

  it('refuses a key another agent of the host uses, the host’s own key, and others’ agents', async () => {
    const a = await linkedAgent(['list_pets']);
    const b = await agentOf(a.host, a.hostId, ['list_pets']);
    expectError(
      await p.hostPost(a.host, '/agent/rotate-key', { agent_id: a.agentId, public_key: b.agent.publicJwk }),
      409,
      'agent_exists',
    );
    expectError(
      await p.hostPost(a.host, '/agent/rotate-key', { agent_id: a.agentId, public_key: a.host.publicJwk }),
      400,
      'invalid_request',
    );
    const other = await linkedAgent(['list_pets']);
    const fresh = await generateTestKey();
    expectError(
      await p.hostPost(a.host, '/agent/rotate-key', { agent_id: other.agentId, public_key: fresh.publicJwk }),
      403,
      'unauthorized',
    );
    // Nothing changed: both agents still sign with their own keys.
    expect((await use(a)).status).toBe(200);
    expect((await use(b)).status).toBe(200);
    expect((await use(other)).status).toBe(200);

    await p.hostPost(a.host, '/agent/revoke', { agent_id: b.agentId });
    expectError(
      await p.hostPost(a.host, '/agent/rotate-key', { agent_id: b.agentId, public_key: fresh.publicJwk }),
      403,
      'agent_revoked',
    );
  });
});

describe('POST /host/rotate-key (§5.9)', () => {
  it('the new host key authenticates, the old one does not, and agents keep working', async () => {
    const a = await linkedAgent(['list_pets']);
    const fresh = await generateTestKey();
    const rotated = await p.hostPost(a.host, '/host/rotate-key', {
      public_key: fresh.publicJwk,
      proof: await p.hostToken(fresh),
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({ host_id: a.hostId, status: 'active' });
    expectError(await p.status(a.host, a.agentId), 401, 'invalid_jwt');
    const status = await p.status(fresh, a.agentId);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ host_id: a.hostId, status: 'active', user_id: 'alice' });
    expect((await use(a)).status).toBe(200);
    // Same host record: the link and defaults stay, a new agent registers active under the new key.
    const reg = await p.register(fresh, { capabilities: ['list_pets'] });
    expect(reg.body).toMatchObject({ host_id: a.hostId, status: 'active' });
  });

  it('the rotated-away key does not come back as a new host (beyond §5.9)', async () => {
    const a = await linkedAgent(['list_pets']);
    const fresh = await generateTestKey();
    await p.hostPost(a.host, '/host/rotate-key', {
      public_key: fresh.publicJwk,
      proof: await p.hostToken(fresh),
    });
    const hostsBefore = (await p.admin('GET', '/admin/hosts')).body.hosts.length;
    expectError(await p.register(a.host, { capabilities: ['list_pets'] }), 401, 'invalid_jwt');
    expect((await p.admin('GET', '/admin/hosts')).body.hosts.length).toBe(hostsBefore);
  });

  it('refuses a key that already identifies another host', async () => {
    const a = await linkedAgent(['list_pets']);
    const other = await p.linkedHost('bob');
    expectError(
      await p.hostPost(a.host, '/host/rotate-key', {
        public_key: other.key.publicJwk,
        proof: await p.hostToken(other.key),
      }),
      400,
      'invalid_request',
    );
    expect((await p.status(a.host, a.agentId)).status).toBe(200);
  });
});

describe('POST /host/rotate-key needs proof of the new key (beyond §5.9)', () => {
  it("a host cannot take another's public key: without proof nothing changes, and that key's owner registers as a new host", async () => {
    const mallory = await p.linkedHost('mallory');
    const victim = await generateTestKey();
    expectError(
      await p.hostPost(mallory.key, '/host/rotate-key', { public_key: victim.publicJwk }),
      400,
      'invalid_request',
      /proof is required/,
    );
    // Signed by a key that is not the new one (Mallory's own): refused too.
    expectError(
      await p.hostPost(mallory.key, '/host/rotate-key', {
        public_key: victim.publicJwk,
        proof: await p.hostToken(mallory.key),
      }),
      400,
      'invalid_request',
      /^proof: /,
    );
    const reg = await p.register(victim, { capabilities: ['list_pets'] });
    expect(reg.status).toBe(200);
    expect(reg.body.host_id).not.toBe(mallory.hostId);
    expect(reg.body.status).toBe('pending');
    expect(reg.body.user_id).toBeUndefined();
  });

  it('a proof for another server, one whose iss is not the new key, or one already used is refused; the host keeps its key', async () => {
    const a = await linkedAgent(['list_pets']);
    const next = await generateTestKey();
    const elsewhere = await signJwt(
      next,
      'host+jwt',
      { iss: next.thumbprint, aud: 'https://other.example', jti: 'proof-elsewhere' },
      { nowMs: p.clock.now() },
    );
    expectError(
      await p.hostPost(a.host, '/host/rotate-key', { public_key: next.publicJwk, proof: elsewhere }),
      400,
      'invalid_request',
      /^proof: .*aud/,
    );
    // Signed by the new key, for this server, but its iss names the host's current key.
    const otherIss = await signJwt(
      next,
      'host+jwt',
      { iss: a.host.thumbprint, aud: p.issuer, jti: 'proof-other-iss' },
      { nowMs: p.clock.now() },
    );
    expectError(
      await p.hostPost(a.host, '/host/rotate-key', { public_key: next.publicJwk, proof: otherIss }),
      400,
      'invalid_request',
      /^proof: .*iss/,
    );
    expect((await p.status(a.host, a.agentId)).status).toBe(200);
    const proof = await p.hostToken(next);
    const first = await p.hostPost(a.host, '/host/rotate-key', { public_key: next.publicJwk, proof });
    expect(first.status).toBe(200);
    // The same proof again (its iss still the key named): used up.
    expectError(
      await p.hostPost(next, '/host/rotate-key', { public_key: next.publicJwk, proof }),
      400,
      'invalid_request',
      /^proof: .*(replay|already)/i,
    );
    expect((await p.status(next, a.agentId)).status).toBe(200);
  });
});

describe('POST /host/revoke (§5.10, §8.5)', () => {
  it('revokes the host and cascades to every agent under it, in one step', async () => {
    const a = await linkedAgent(['list_pets']);
    const b = await agentOf(a.host, a.hostId, ['list_pets']);
    const expired = await agentOf(a.host, a.hostId, ['list_pets']);
    const gone = await agentOf(a.host, a.hostId, ['list_pets']);
    await p.hostPost(a.host, '/agent/revoke', { agent_id: gone.agentId });
    // b keeps using; `expired` falls silent past its session TTL.
    p.clock.advance(SESSION_TTL / 2);
    expect((await use(a)).status).toBe(200);
    expect((await use(b)).status).toBe(200);
    const req = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(b.agent, b.agentId),
      body: { capabilities: ['delete_pet'] },
    });
    expect(req.body.approval).toBeDefined();
    p.clock.advance(SESSION_TTL / 2);
    expect((await p.status(a.host, expired.agentId)).body.status).toBe('expired');

    const revoke = await p.hostPost(a.host, '/host/revoke');
    expect(revoke.status).toBe(200);
    // The one already revoked is not counted again.
    expect(revoke.body).toEqual({ host_id: a.hostId, status: 'revoked', agents_revoked: 3 });

    for (const agent of [a, b, expired]) {
      expectError(await use(agent), 403, 'host_revoked');
      const view = await p.admin('GET', `/admin/agents/${agent.agentId}`);
      expect(view.body.status).toBe('revoked');
      expect(view.body.agent_capability_grants).toEqual([]);
    }
    expect(await p.pendingApproval(b.agentId)).toBeUndefined();
    const host = await p.admin('GET', `/admin/hosts/${a.hostId}`);
    expect(host.body.status).toBe('revoked');
    expect(
      (host.body.agents as { status: string }[]).every((x) => x.status === 'revoked'),
      JSON.stringify(host.body.agents),
    ).toBe(true);

    // A revoked host can do nothing more, including registering again with its key (§2.11).
    expectError(await p.status(a.host, a.agentId), 403, 'host_revoked');
    expectError(await p.hostPost(a.host, '/host/revoke'), 403, 'host_revoked');
    const again = await p.register(a.host, { capabilities: ['list_pets'] });
    expectError(again, 403, 'host_revoked');
    expect((await p.admin('GET', `/admin/agents?host_id=${a.hostId}`)).body.agents).toHaveLength(4);
  });
});

describe('unlinking a host (§2.9)', () => {
  it('revokes its delegated agents, leaves claimed ones, and the host may then run autonomous agents', async () => {
    const host = await generateTestKey();
    const pre = await p.admin('POST', '/admin/hosts', { public_key: host.publicJwk });
    const hostId: string = pre.body.host_id;
    const auto = await p.register(host, { mode: 'autonomous' });
    expect(auto.body.status).toBe('active');
    const link = await p.admin('POST', `/admin/hosts/${hostId}/link`, { user_id: 'alice' });
    expect(link.body).toMatchObject({ user_id: 'alice', agents_claimed: 1 });
    const d1 = await agentOf(host, hostId, ['list_pets']);
    const d2 = await agentOf(host, hostId, ['list_pets']);
    // d1 stays active by using it; d2 falls silent and expires. Both derive from the link.
    p.clock.advance(SESSION_TTL / 2);
    expect((await use(d1)).status).toBe(200);
    p.clock.advance(SESSION_TTL / 2);
    expect((await p.status(host, d1.agentId)).body.status).toBe('active');
    expect((await p.status(host, d2.agentId)).body.status).toBe('expired');

    const unlink = await p.admin('POST', `/admin/hosts/${hostId}/unlink`, {});
    expect(unlink.status).toBe(200);
    expect(unlink.body).toMatchObject({
      host_id: hostId,
      status: 'active',
      user_id: null,
      agents_revoked: 2,
    });

    expectError(await use(d1), 403, 'agent_revoked');
    expect((await p.status(host, d2.agentId)).body.status).toBe('revoked');
    expect((await p.status(host, auto.body.agent_id)).body.status).toBe('claimed');
    expectError(await p.hostPost(host, '/agent/reactivate', { agent_id: d2.agentId }), 403, 'agent_revoked');

    // The host is unlinked, not revoked: an autonomous agent gets the policy's grants again, and
    // a delegated one waits for a user.
    const next = await p.register(host, { mode: 'autonomous', capabilities: ['list_pets'] });
    expect(next.body).toMatchObject({
      status: 'active',
      agent_capability_grants: [{ capability: 'list_pets', status: 'active' }],
    });
    const delegated = await p.register(host, { capabilities: ['list_pets'] });
    expect(delegated.body.status).toBe('pending');

    expectError(await p.admin('POST', `/admin/hosts/${hostId}/unlink`, {}), 400, 'invalid_request');
    expectError(await p.admin('POST', '/admin/hosts/hst_nope/unlink', {}), 404, 'host_not_found');
  });
  it('closes the revoked agents’ open approvals: approving one later cannot re-link the host', async () => {
    const a = await linkedAgent(['list_pets']);
    const req = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['delete_pet'] },
    });
    expect(req.body.approval).toBeDefined();
    const approval = await p.pendingApproval(a.agentId);
    expect((await p.admin('POST', `/admin/hosts/${a.hostId}/unlink`, {})).body.agents_revoked).toBe(1);
    expect(await p.pendingApproval(a.agentId)).toBeUndefined();
    expectError(await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {}), 409, 'approval_closed');
    expect((await p.admin('GET', `/admin/hosts/${a.hostId}`)).body.user_id).toBeNull();
  });
});

describe('stale pending cleanup (§10.9)', () => {
  it('deletes pending agents and hosts past the threshold, and nothing else', async () => {
    const stale = await generateTestKey();
    const staleReg = await p.register(stale, { capabilities: ['list_pets'] });
    expect(staleReg.body.status).toBe('pending');
    const staleHostId: string = staleReg.body.host_id;
    const active = await linkedAgent(['list_pets']);
    // An active agent with a capability request still pending is not a pending agent.
    await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(active.agent, active.agentId),
      body: { capabilities: ['delete_pet'] },
    });
    const expired = await linkedAgent(['list_pets']);

    p.clock.advance(PENDING_CLEANUP / 2);
    const young = await generateTestKey();
    const youngReg = await p.register(young, { capabilities: ['list_pets'] });
    expect(youngReg.body.status).toBe('pending');

    // At exactly the threshold nothing is stale yet.
    p.clock.advance(PENDING_CLEANUP / 2);
    await p.proxy.maintain();
    expect((await p.admin('GET', `/admin/agents/${staleReg.body.agent_id}`)).status).toBe(200);

    p.clock.advance(1);
    await p.proxy.maintain();
    expectError(await p.admin('GET', `/admin/agents/${staleReg.body.agent_id}`), 404, 'agent_not_found');
    expectError(await p.admin('GET', `/admin/hosts/${staleHostId}`), 404, 'host_not_found');
    // Deleted, not revoked: the host may start over, as a new pending host.
    const retry = await p.register(stale, { capabilities: ['list_pets'] });
    expect(retry.status).toBe(200);
    expect(retry.body.host_id).not.toBe(staleHostId);

    expect((await p.admin('GET', `/admin/agents/${youngReg.body.agent_id}`)).body.status).toBe('pending');
    expect((await p.admin('GET', `/admin/hosts/${youngReg.body.host_id}`)).body.status).toBe('pending');
    // Agents that were ever active stay, whatever their clocks say now.
    expect((await p.admin('GET', `/admin/agents/${active.agentId}`)).status).toBe(200);
    expect((await p.admin('GET', `/admin/agents/${expired.agentId}`)).status).toBe(200);
    expect((await p.admin('GET', `/admin/hosts/${active.hostId}`)).body.status).toBe('active');
  });
});

describe('last_used_at is coalesced (§10.2: no database write per request)', () => {
  it('many requests write nothing until the usage flush, which persists the latest time', async () => {
    const a = await linkedAgent(['list_pets']);
    const b = await agentOf(a.host, a.hostId, ['list_pets']);
    const { usage, store } = p.proxy.protocol;
    // Stop the periodic (real-time) flush so only the explicit one below writes.
    await usage.stop();
    const agentBefore = await store.agent(a.agentId);
    const hostBefore = await store.host(a.hostId);
    expect(agentBefore?.lastUsedAt).toBeNull();

    let last = 0;
    for (let i = 0; i < 20; i++) {
      p.clock.advance(1_000);
      expect((await use(i % 4 === 0 ? b : a)).status).toBe(200);
      if (i % 4 !== 0) last = p.clock.now();
    }
    // The stored rows are byte-for-byte what they were: twenty requests, no write.
    expect(await store.agent(a.agentId)).toEqual(agentBefore);
    expect((await store.host(a.hostId))?.lastUsedAt).toBe(hostBefore?.lastUsedAt);
    // The live view already knows (the sliding TTL is exact in this process).
    expect((await p.status(a.host, a.agentId)).body.last_used_at).toBe(iso(last));

    await usage.flush();
    expect((await store.agent(a.agentId))?.lastUsedAt).toBe(last);
    expect((await store.agent(b.agentId))?.lastUsedAt).toBe(last - 3_000);
    expect((await store.host(a.hostId))?.lastUsedAt).toBe(p.clock.now());
    const admin = await p.admin('GET', `/admin/hosts/${a.hostId}`);
    expect(admin.body.last_used_at).toBe(iso(p.clock.now()));
  });
});
