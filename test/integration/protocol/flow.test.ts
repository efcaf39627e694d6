/** The quick-start flow end to end: register → approve via the operator API → status → revoke. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol();
});
afterAll(() => p.close());

describe('delegated agent of a new host', () => {
  it('is pending until a human approves, then active with the approved grants', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { name: 'pet helper', capabilities: ['list_pets', 'create_pet'] });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({
      status: 'pending',
      mode: 'delegated',
      agent_capability_grants: [
        { capability: 'list_pets', status: 'pending' },
        { capability: 'create_pet', status: 'pending' },
      ],
      approval: { method: 'device_authorization', verification_uri: `${p.issuer}/device` },
    });
    expect(reg.body.approval.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);

    const pending = await p.status(host, reg.body.agent_id);
    expect(pending.status).toBe(200);
    expect(pending.body.status).toBe('pending');

    const approval = await p.pendingApproval(reg.body.agent_id);
    expect(approval).toMatchObject({ kind: 'registration', user_code: reg.body.approval.user_code });
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
      user_id: 'alice',
      capabilities: ['list_pets'],
      reason: 'no writes',
    });
    expect(ok.status).toBe(200);

    const active = await p.status(host, reg.body.agent_id);
    expect(active.body).toMatchObject({
      status: 'active',
      user_id: 'alice',
      agent_capability_grants: [
        { capability: 'list_pets', status: 'active', granted_by: 'alice' },
        { capability: 'create_pet', status: 'denied', reason: 'no writes' },
      ],
    });

    const token = await p.agentToken(reg.agent, reg.body.agent_id);
    const list = await p.request('GET', '/capability/list', { token });
    expect(list.status).toBe(200);
    const byName = Object.fromEntries(
      (list.body.capabilities as { name: string; grant_status: string }[]).map((c) => [
        c.name,
        c.grant_status,
      ]),
    );
    expect(byName.list_pets).toBe('granted');
    expect(byName.create_pet).toBe('not_granted');

    const revoke = await p.request('POST', '/agent/revoke', {
      token: await p.hostToken(host),
      body: { agent_id: reg.body.agent_id },
    });
    expect(revoke.body).toEqual({ agent_id: reg.body.agent_id, status: 'revoked' });
    const after = await p.request('GET', '/capability/list', {
      token: await p.agentToken(reg.agent, reg.body.agent_id),
    });
    expect(after.status).toBe(403);
    expect(after.body.error).toBe('agent_revoked');
  });
});

describe('policy hosts (§2.8 pre-registration)', () => {
  it('are created at start-up, linked to their user, with their default capabilities', async () => {
    const host = await generateTestKey();
    const q = await startProtocol({
      policy: `hosts:\n  - name: ci\n    user_id: bob\n    public_key: {kty: OKP, crv: Ed25519, x: ${host.publicJwk.x}}\n    default_capabilities: [get_pet]\n`,
    });
    try {
      const reg = await q.register(host, { capabilities: ['get_pet', 'create_pet'] });
      expect(reg.status).toBe(200);
      // Linked host: the GET default is granted at once, the high-risk POST waits for a human.
      expect(reg.body).toMatchObject({
        status: 'active',
        user_id: 'bob',
        agent_capability_grants: [
          { capability: 'get_pet', status: 'active' },
          { capability: 'create_pet', status: 'pending' },
        ],
        approval: { method: 'device_authorization' },
      });
      const hosts = await q.admin('GET', '/admin/hosts');
      expect(hosts.body.hosts).toMatchObject([{ name: 'ci', user_id: 'bob', pre_registered: true }]);
    } finally {
      await q.close();
    }
  });
});
