/**
 * Terminal agent states (§2.3) stay what they are: claimed and rejected are not turned into
 * revoked, and an agent past its absolute lifetime (§2.4) is revoked even while pending.
 */
import { request as httpRequest } from 'node:http';
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

/**
 * A POST whose body is held back after its first byte: the JWT is checked when the headers arrive,
 * the action runs once `finish` sends the rest (a client may take server.request_timeout).
 */
function slowPost(
  path: string,
  token: string,
  body: unknown,
): { finish(): Promise<{ status: number; body: any }> } {
  const text = JSON.stringify(body);
  let answered!: (reply: { status: number; body: any }) => void;
  const reply = new Promise<{ status: number; body: any }>((resolve) => (answered = resolve));
  const req = httpRequest(
    new URL(path, p.proxy.url),
    {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(text)),
      },
    },
    (res) => {
      let data = '';
      res.on('data', (chunk: Buffer) => (data += chunk.toString('utf8')));
      res.on('end', () =>
        answered({ status: res.statusCode ?? 0, body: data ? JSON.parse(data) : undefined }),
      );
    },
  );
  req.write(text.slice(0, 1));
  return {
    finish: () => {
      req.end(text.slice(1));
      return reply;
    },
  };
}

describe('a capability request whose body arrives after its agent ended', () => {
  it('an unlink while the body is read: refused, no approval opened, the host stays unlinked', async () => {
    const a = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const slow = slowPost('/agent/request-capability', await p.agentToken(a.agent, a.agentId), {
      capabilities: ['get_pet'],
    });
    // The headers (and the JWT with them) are taken before the unlink is written.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await p.admin('POST', `/admin/hosts/${a.hostId}/unlink`)).body.agents_revoked).toBe(1);
    const reply = await slow.finish();
    expect({ status: reply.status, error: reply.body.error }).toEqual({
      status: 403,
      error: 'agent_revoked',
    });
    expect(await p.pendingApproval(a.agentId)).toBeUndefined();
    expect((await p.admin('GET', `/admin/hosts/${a.hostId}`)).body.user_id).toBeNull();
  });

  it('an approval left open for an agent revoked since is closed to approval, and links nothing', async () => {
    const a = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const asked = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['get_pet'] },
    });
    expect(asked.status).toBe(200);
    const approval = await p.pendingApproval(a.agentId);
    // What crossing writes can leave: the agent revoked and its host unlinked, the request still open.
    await p.proxy.protocol.write(async (tx) => {
      await tx.updateAgent(a.agentId, { status: 'revoked', updatedAt: p.clock.now() });
      await tx.updateHost(a.hostId, { userId: null, updatedAt: p.clock.now() });
    });
    const decided = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
    expect({ status: decided.status, error: decided.body.error }).toEqual({
      status: 409,
      error: 'approval_closed',
    });
    expect((await p.admin('GET', `/admin/hosts/${a.hostId}`)).body.user_id).toBeNull();
  });
});
