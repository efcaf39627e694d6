/**
 * Approvals left behind by lifecycle transitions (§2.5, §5.3, §5.4, §5.6): an expired registration
 * approval of an active agent, a capability request open across a reactivation, and what
 * already_granted (§5.13) means.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TestKey } from '../../helpers/keys.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';

const MIN = 60_000;

const POLICY = `
modes: [delegated, autonomous]
approval:
  expires_in: 10m
lifetimes:
  session_ttl: 2m
  max_lifetime: 24h
  absolute_lifetime: 30d
  pending_cleanup: 24h
capabilities:
  defaults: [list_pets]
  high_risk: [delete_pet, place_order]
rate_limits:
  per_ip: null
  unknown_host_registration: null
`;

let p: TestProtocol;
beforeEach(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterEach(() => p.close());

async function requestCaps(agent: TestKey, agentId: string, capabilities: unknown[]): Promise<Reply> {
  return p.request('POST', '/agent/request-capability', {
    token: await p.agentToken(agent, agentId),
    body: { capabilities },
  });
}

function names(grants: { capability: string; status: string }[]): string[] {
  return grants.map((g) => `${g.capability}:${g.status}`).sort();
}

describe('§5.4 after an expired registration approval of an active agent', () => {
  it('a high-risk capability left pending by an expired registration approval can be requested again', async () => {
    const { key: host } = await p.linkedHost('alice');
    const reg = await p.register(host, { capabilities: ['list_pets', 'delete_pet'] });
    expect(reg.status).toBe(200);
    expect(reg.body.status).toBe('active');
    expect(names(reg.body.agent_capability_grants)).toEqual(['delete_pet:pending', 'list_pets:active']);
    const agentId: string = reg.body.agent_id;

    // Keep the agent alive (session TTL 2m) while the registration approval (10m) runs out.
    for (let i = 0; i < 6; i++) {
      p.clock.advance(2 * MIN - 1000);
      const r = await p.request('GET', '/capability/list', { token: await p.agentToken(reg.agent, agentId) });
      expect(r.status).toBe(200);
    }
    // Approval expiry is swept on the status path and in maintenance.
    await p.proxy.maintain();
    const status = await p.status(host, agentId);
    expect(status.body.status).toBe('active');
    // No open approval any more.
    expect(status.body.approval).toBeUndefined();
    const held = names(status.body.agent_capability_grants);

    const again = await requestCaps(reg.agent, agentId, ['delete_pet']);
    // §5.4 / §5.13: already_granted means "All requested capabilities are already granted".
    // delete_pet was never granted and nobody can approve it any more: it must be askable again.
    expect(
      { status: again.status, body: again.body, held },
      'delete_pet is stuck: pending with an expired approval, and a new request is refused',
    ).toMatchObject({
      status: 200,
      body: { agent_capability_grants: [{ capability: 'delete_pet', status: 'pending' }] },
    });
  });
});

describe('§2.5/§5.6 reactivation and a capability request still open from before', () => {
  /** An active agent with a capability request for delete_pet still open when it expires and is reactivated. */
  async function reactivatedWithStaleRequest(): Promise<{ host: TestKey; agent: TestKey; agentId: string }> {
    const { key: host } = await p.linkedHost('alice');
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('active');
    const agentId: string = reg.body.agent_id;
    const first = await requestCaps(reg.agent, agentId, ['delete_pet']);
    expect(first.status).toBe(200);
    expect(first.body.agent_capability_grants).toEqual([{ capability: 'delete_pet', status: 'pending' }]);
    p.clock.advance(2 * MIN);
    expect((await p.status(host, agentId)).body.status).toBe('expired');
    const re = await p.hostPost(host, '/agent/reactivate', { agent_id: agentId });
    expect(re.status, JSON.stringify(re.body)).toBe(200);
    expect(re.body.status).toBe('active');
    expect(names(re.body.agent_capability_grants)).toEqual(['list_pets:active']);
    return { host, agent: reg.agent, agentId };
  }

  it('the re-request (§2.5 "MUST be requested again") answers the requested grant (§5.4)', async () => {
    const { agent, agentId } = await reactivatedWithStaleRequest();
    const again = await requestCaps(agent, agentId, ['delete_pet']);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    // §5.4: agent_capability_grants is the array of grant objects for the requested capabilities.
    expect(again.body.agent_capability_grants).toEqual([{ capability: 'delete_pet', status: 'pending' }]);
  });

  it('approving the approval the re-request answered with grants the capability', async () => {
    const { host, agent, agentId } = await reactivatedWithStaleRequest();
    const again = await requestCaps(agent, agentId, ['delete_pet']);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    const approval = await p.pendingApproval(agentId);
    expect(approval.user_code).toBe(again.body.approval.user_code);
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const status = await p.status(host, agentId);
    expect(names(status.body.agent_capability_grants)).toEqual(['delete_pet:active', 'list_pets:active']);
    expect((await p.execute(agent, agentId, 'delete_pet', { petId: 1 })).body.error).not.toBe(
      'capability_not_granted',
    );
  });
});

describe('§5.13 already_granted is for granted capabilities', () => {
  it('a capability pending under the registration approval of an active agent is not "already granted"', async () => {
    const { key: host } = await p.linkedHost('alice');
    const reg = await p.register(host, { capabilities: ['list_pets', 'delete_pet'] });
    expect(reg.body.status).toBe('active');
    expect(reg.body.approval).toBeDefined();
    const again = await requestCaps(reg.agent, reg.body.agent_id, ['delete_pet']);
    // Not granted: either the open request is answered again (as §5.3 does for a retried
    // registration, and request-capability does for a repeat of its own kind), or a new one.
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  });
});
