/**
 * Terminal agent states (§2.3) stay what they are: claimed and rejected are not turned into
 * revoked, and an agent past its absolute lifetime (§2.4) is revoked even while pending.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { lifetimesPolicy } from '../../helpers/lifetimes-policy.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

const MIN = 60_000;

const POLICY = lifetimesPolicy('24h');

let p: TestProtocol;
beforeEach(async () => {
  p = await startProtocol({ policy: POLICY });
});
afterEach(() => p.close());

describe('§2.3 claimed is terminal', () => {
  it('a claimed agent stays claimed when its host (or the operator) "revokes" it', async () => {
    const hostKey = await generateTestKey();
    const pre = await p.admin('POST', '/admin/hosts', { public_key: hostKey.publicJwk });
    expect(pre.status).toBe(201);
    const auto = await p.register(hostKey, { mode: 'autonomous' });
    expect(auto.body.status).toBe('active');
    const link = await p.admin('POST', `/admin/hosts/${pre.body.host_id}/link`, { user_id: 'bob' });
    expect(link.body.agents_claimed).toBe(1);
    expect((await p.status(hostKey, auto.body.agent_id)).body.status).toBe('claimed');

    const revoke = await p.hostPost(hostKey, '/agent/revoke', { agent_id: auto.body.agent_id });
    // Host revocation (§5.10) leaves claimed agents as they are (hosts.ts): so should this.
    const after = await p.status(hostKey, auto.body.agent_id);
    expect({ revoke: revoke.status, status: after.body.status }).toEqual({ revoke: 200, status: 'claimed' });
  });

  it('a rejected agent stays rejected when its host revokes it', async () => {
    const hostKey = await generateTestKey();
    const pre = await p.admin('POST', '/admin/hosts', { public_key: hostKey.publicJwk });
    expect(pre.status).toBe(201);
    const keep = await p.register(hostKey, { capabilities: ['list_pets'] });
    const denied = await p.register(hostKey, { capabilities: ['list_pets'] });
    expect(keep.body.status).toBe('pending');
    const approval = await p.pendingApproval(denied.body.agent_id);
    expect((await p.admin('POST', `/admin/approvals/${approval.id}/deny`, {})).status).toBe(200);
    expect((await p.status(hostKey, denied.body.agent_id)).body.status).toBe('rejected');
    // An active host may revoke its agents; this one is pre-registered (active).
    await p.hostPost(hostKey, '/agent/revoke', { agent_id: denied.body.agent_id });
    expect((await p.status(hostKey, denied.body.agent_id)).body.status).toBe('rejected');
  });
});

describe('§2.4 absolute lifetime of an agent still pending', () => {
  it('a registration still pending past the absolute lifetime is revoked, not approvable into a dead agent', async () => {
    // A dynamically registered host: the agent waits for a human (§8.10); the client retries
    // its registration as each approval request runs out (§5.3 idempotent retry).
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    const agentId: string = reg.body.agent_id;
    for (let t = 0; t < 3 * 60; t += 9) {
      p.clock.advance(9 * MIN);
      const again = await p.register(host, { capabilities: ['list_pets'] }, reg.agent);
      expect(again.status, JSON.stringify(again.body)).toBe(200);
    }
    // Now 3h (absolute_lifetime) after creation: §2.4 "Once elapsed, the agent becomes revoked".
    const approval = await p.pendingApproval(agentId);
    p.clock.advance(9 * MIN);
    // Approved straight away, before anything else looked at the agent: refused, and revoked.
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice' });
    expect({ status: ok.status, error: ok.body.error }).toEqual({ status: 409, error: 'approval_closed' });
    expect((await p.status(host, agentId)).body.status).toBe('revoked');
    const retried = await p.register(host, { capabilities: ['list_pets'] }, reg.agent);
    expect(retried.status).toBe(409);
  });

  it('a pending registration past the absolute lifetime shows revoked, its approval closed', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(await p.pendingApproval(reg.body.agent_id)).toBeDefined();
    p.clock.advance(3 * 60 * MIN);
    expect((await p.status(host, reg.body.agent_id)).body.status).toBe('revoked');
    expect(await p.pendingApproval(reg.body.agent_id)).toBeUndefined();
  });
});
