/**
 * §4.6 / §8.4: the replay cache is partitioned "by identity (agent ID or host ID)": a host whose
 * key changes (§5.9 inline rotation) keeps its partition, and a new host's registration token
 * stays used up once the host it created is known.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, signJwt } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({
    policy: 'rate_limits:\n  per_ip: null\n  unknown_host_registration: null\n  failed_auth_per_ip: null\n',
  });
});
afterAll(() => p.close());

describe('§4.6 / §8.4 host jti partition survives an inline host key rotation', () => {
  it('control: the same jti twice with the same key → second 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const jti = randomUUID();
    const first = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, {
      token: await p.hostToken(a.host, { jti }),
    });
    expect(first.status).toBe(200);
    const again = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, {
      token: await p.hostToken(a.host, { jti }),
    });
    expect(again.status).toBe(401);
  });

  it('the same host (same host_id) reusing a jti within its window after rotating its key → must be 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const jti = randomUUID();
    const first = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, {
      token: await p.hostToken(a.host, { jti }),
    });
    expect(first.status).toBe(200);
    const next = await generateTestKey();
    const rotated = await p.request('POST', '/host/rotate-key', {
      token: await p.hostToken(a.host),
      body: { public_key: next.publicJwk, proof: await p.hostToken(next) },
    });
    expect(rotated.status).toBe(200);
    const reused = await signJwt(
      next,
      'host+jwt',
      { iss: next.thumbprint, aud: p.issuer, jti },
      { nowMs: p.clock.now() },
    );
    const again = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, { token: reused });
    expect(again.body?.host_id ?? a.hostId).toBe(a.hostId);
    expect(again.status, JSON.stringify(again.body)).toBe(401);
  });

  it("a new host's registration token is a replay once the host it created is known by its key", async () => {
    const host = await generateTestKey();
    const agent = await generateTestKey();
    const token = await p.hostToken(host, { agent_public_key: agent.publicJwk });
    const body = { name: 'first', capabilities: ['list_pets'] };
    const first = await p.request('POST', '/agent/register', { token, body });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const again = await p.request('POST', '/agent/register', { token, body });
    expect({ status: again.status, error: again.body?.error }).toEqual({ status: 401, error: 'invalid_jwt' });
    const elsewhere = await p.request('GET', `/agent/status?agent_id=${first.body.agent_id}`, { token });
    expect(elsewhere.status).toBe(401);
  });
});
