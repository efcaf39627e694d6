/**
 * §5.12 POST /agent/introspect: server-to-server authentication with the introspection (or admin)
 * token, the full §4.5 verification, `{active: false}` and nothing else for any failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';
import {
  ADMIN_TOKEN,
  INTROSPECTION_TOKEN,
  startProtocol,
  TestClock,
  type Reply,
  type TestProtocol,
} from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol();
});
afterAll(() => p.close());

function introspect(q: TestProtocol, token: unknown, secret: string = INTROSPECTION_TOKEN): Promise<Reply> {
  return q.request('POST', '/agent/introspect', { token: secret, body: { token } });
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('§5.12 an active agent', () => {
  let a: { host: TestKey; hostId: string; agent: TestKey; agentId: string };
  beforeAll(async () => {
    a = await p.activeAgent(['list_pets', { name: 'get_pet', constraints: { petId: { in: [1, 2] } } }], {
      userId: 'alice',
    });
  });

  it('with the introspection token: active with exactly the spec fields and compact grants', async () => {
    const reply = await introspect(p, await p.agentToken(a.agent, a.agentId));
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      active: true,
      agent_id: a.agentId,
      host_id: a.hostId,
      user_id: 'alice',
      // Compact: capability and status only, no constraints or schemas (§5.12).
      agent_capability_grants: [
        { capability: 'list_pets', status: 'active' },
        { capability: 'get_pet', status: 'active' },
      ],
      mode: 'delegated',
      expires_at: expect.stringMatching(ISO),
    });
    // Default session TTL is 30 min (§2.4): expiry lies ahead, within that window.
    const expires = Date.parse(reply.body.expires_at);
    expect(expires).toBeGreaterThan(p.clock.now());
    expect(expires).toBeLessThanOrEqual(p.clock.now() + 30 * 60_000);
  });

  it('with the admin token: the same answer', async () => {
    const reply = await introspect(p, await p.agentToken(a.agent, a.agentId), ADMIN_TOKEN);
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ active: true, agent_id: a.agentId, host_id: a.hostId });
  });

  it('§4.3 a token addressed to the execute location (a resource server) is accepted', async () => {
    const token = await p.agentToken(a.agent, a.agentId, {}, p.executeLocation);
    const reply = await introspect(p, token);
    expect(reply.body).toMatchObject({ active: true, agent_id: a.agentId });
  });

  it('a capabilities claim narrows the grants returned to that claim', async () => {
    const reply = await introspect(p, await p.agentToken(a.agent, a.agentId, { capabilities: ['get_pet'] }));
    expect(reply.body.active).toBe(true);
    expect(reply.body.agent_capability_grants).toEqual([{ capability: 'get_pet', status: 'active' }]);
  });

  it('pending and denied grants are reported with their status', async () => {
    // Linked host, default policy: list_pets (GET) granted at once, create_pet (high-risk) waits
    // and is denied; then delete_pet is requested and left pending.
    const { key: host, hostId } = await p.linkedHost('bob');
    const reg = await p.register(host, { capabilities: ['list_pets', 'create_pet'] });
    const approval = await p.pendingApproval(reg.body.agent_id);
    expect(approval.capabilities).toEqual([{ name: 'create_pet' }]);
    const denied = await p.admin('POST', `/admin/approvals/${approval.id}/deny`, { reason: 'no' });
    expect(denied.status).toBe(200);
    const req = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(reg.agent, reg.body.agent_id),
      body: { capabilities: ['delete_pet'] },
    });
    expect(req.status).toBe(200);
    const reply = await introspect(p, await p.agentToken(reg.agent, reg.body.agent_id));
    expect(reply.body).toMatchObject({ active: true, host_id: hostId, user_id: 'bob' });
    expect(reply.body.agent_capability_grants).toEqual(
      expect.arrayContaining([
        { capability: 'list_pets', status: 'active' },
        { capability: 'create_pet', status: 'denied' },
        { capability: 'delete_pet', status: 'pending' },
      ]),
    );
    expect(reply.body.agent_capability_grants).toHaveLength(3);
  });
});

describe('§5.12 endpoint protection', () => {
  it('no Authorization → 401 authentication_required with a Bearer challenge', async () => {
    const reply = await p.request('POST', '/agent/introspect', { body: { token: 'x' } });
    expect(reply.status).toBe(401);
    expect(reply.body.error).toBe('authentication_required');
    expect(reply.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('a wrong, truncated, extended or near-miss secret → 401 invalid_token', async () => {
    const a = await p.activeAgent(['list_pets']);
    const wrong = [
      'wrong-token-0123456789abcdef',
      INTROSPECTION_TOKEN.slice(0, -1),
      `${INTROSPECTION_TOKEN}x`,
      `${INTROSPECTION_TOKEN.slice(0, -1)}${INTROSPECTION_TOKEN.endsWith('9') ? '8' : '9'}`,
      ADMIN_TOKEN.slice(0, -1),
    ];
    for (const secret of wrong) {
      const reply = await introspect(p, await p.agentToken(a.agent, a.agentId), secret);
      expect(reply.status, secret).toBe(401);
      expect(reply.body.error, secret).toBe('invalid_token');
      expect(reply.body).not.toHaveProperty('active');
      expect(reply.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    }
  });

  it("an agent's own JWT is not a credential for introspection", async () => {
    const a = await p.activeAgent(['list_pets']);
    const reply = await p.request('POST', '/agent/introspect', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { token: await p.agentToken(a.agent, a.agentId) },
    });
    expect(reply.status).toBe(401);
    expect(reply.body.error).toBe('invalid_token');
  });

  it('bad bodies → 400 invalid_request', async () => {
    for (const body of [{}, { token: 42 }, { token: '' }, { token: null }]) {
      const reply = await p.request('POST', '/agent/introspect', { token: INTROSPECTION_TOKEN, body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
    }
    const notJson = await p.request('POST', '/agent/introspect', {
      token: INTROSPECTION_TOKEN,
      rawBody: '{"token":',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toBe('invalid_request');
  });
});

describe('§5.12 inactive tokens are exactly {active: false}', () => {
  it('a host JWT, garbage, a bad signature, an unknown agent, a foreign audience, an expired JWT', async () => {
    const a = await p.activeAgent(['list_pets']);
    const forger = await generateTestKey();
    const nowSec = Math.floor(p.clock.now() / 1000);
    const tokens: [string, string][] = [
      ['host JWT', await p.hostToken(a.host)],
      ['garbage', 'not.a.jwt'],
      ['bad signature', await agentJwt(forger, a.agentId, p.issuer, {}, { nowMs: p.clock.now() })],
      ['unknown agent', await p.agentToken(a.agent, 'agt_unknown')],
      ['foreign audience', await p.agentToken(a.agent, a.agentId, {}, 'https://elsewhere.example')],
      ['expired', await p.agentToken(a.agent, a.agentId, { iat: nowSec - 300, exp: nowSec - 120 })],
      ['lifetime too long', await p.agentToken(a.agent, a.agentId, { exp: nowSec + 3600 })],
      [
        'host-typed token signed by the agent key',
        await hostJwt(a.agent, p.issuer, { sub: a.agentId }, { nowMs: p.clock.now() }),
      ],
    ];
    for (const [name, token] of tokens) {
      const reply = await introspect(p, token);
      expect(reply.status, name).toBe(200);
      expect(reply.body, name).toEqual({ active: false });
    }
    // The agent itself is fine: a proper token is still active.
    expect((await introspect(p, await p.agentToken(a.agent, a.agentId))).body.active).toBe(true);
  });

  it('a revoked agent', async () => {
    const a = await p.activeAgent(['list_pets']);
    await p.request('POST', '/agent/revoke', {
      token: await p.hostToken(a.host),
      body: { agent_id: a.agentId },
    });
    expect((await introspect(p, await p.agentToken(a.agent, a.agentId))).body).toEqual({ active: false });
  });

  it('an agent of a revoked host', async () => {
    const a = await p.activeAgent(['list_pets']);
    expect((await p.admin('POST', `/admin/hosts/${a.hostId}/revoke`)).status).toBe(200);
    expect((await introspect(p, await p.agentToken(a.agent, a.agentId))).body).toEqual({ active: false });
  });

  it('a pending agent', async () => {
    const host = await generateTestKey();
    await p.admin('POST', '/admin/hosts', { public_key: host.publicJwk });
    const reg = await p.register(host, { capabilities: ['list_pets'] });
    expect(reg.body.status).toBe('pending');
    expect((await introspect(p, await p.agentToken(reg.agent, reg.body.agent_id))).body).toEqual({
      active: false,
    });
  });

  it('§2.4 an agent whose session TTL elapsed (clock advanced past 30 min idle)', async () => {
    const clock = new TestClock();
    const q = await startProtocol({ clock });
    try {
      const a = await q.activeAgent(['list_pets']);
      expect((await introspect(q, await q.agentToken(a.agent, a.agentId))).body.active).toBe(true);
      clock.advance(31 * 60_000);
      expect((await introspect(q, await q.agentToken(a.agent, a.agentId))).body).toEqual({ active: false });
    } finally {
      await q.close();
    }
  });

  it('§4.5/§4.6 full verification includes replay: a used jti is inactive, and introspection uses it', async () => {
    const a = await p.activeAgent(['list_pets']);
    const used = await p.agentToken(a.agent, a.agentId);
    expect((await p.request('GET', '/capability/list', { token: used })).status).toBe(200);
    expect((await introspect(p, used)).body).toEqual({ active: false });

    const fresh = await p.agentToken(a.agent, a.agentId);
    expect((await introspect(p, fresh)).body.active).toBe(true);
    expect((await introspect(p, fresh)).body).toEqual({ active: false });
  });
});

describe('§5.12 configuration', () => {
  it('without an introspection token only the admin token may introspect', async () => {
    const q = await startProtocol({ overrides: { introspectionToken: undefined } });
    try {
      const a = await q.activeAgent(['list_pets']);
      const bad = await introspect(q, await q.agentToken(a.agent, a.agentId), INTROSPECTION_TOKEN);
      expect(bad.status).toBe(401);
      expect(bad.body.error).toBe('invalid_token');
      const ok = await introspect(q, await q.agentToken(a.agent, a.agentId), ADMIN_TOKEN);
      expect(ok.body).toMatchObject({ active: true, agent_id: a.agentId });
    } finally {
      await q.close();
    }
  });

  it('with neither token configured every caller is refused (401 invalid_token), the endpoint stays', async () => {
    const q = await startProtocol({ overrides: { introspectionToken: undefined, adminToken: undefined } });
    try {
      for (const secret of [INTROSPECTION_TOKEN, ADMIN_TOKEN, 'anything-at-all-0123456789']) {
        const reply = await introspect(q, 'x.y.z', secret);
        expect(reply.status, secret).toBe(401);
        expect(reply.body.error).toBe('invalid_token');
      }
    } finally {
      await q.close();
    }
  });

  it('§5.12/§8.13 is rate-limited per client IP: 429 rate_limited with Retry-After, refills with time', async () => {
    const clock = new TestClock();
    const q = await startProtocol({ clock, policy: 'rate_limits:\n  per_ip: 3/1m\n' });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await introspect(q, 'not.a.jwt');
        expect(r.status, `request ${i + 1}`).toBe(200);
        expect(r.body).toEqual({ active: false });
      }
      const limited = await introspect(q, 'not.a.jwt');
      expect(limited.status).toBe(429);
      expect(limited.body.error).toBe('rate_limited');
      // 3 per minute refills one request every 20 s.
      expect(limited.headers.get('retry-after')).toBe('20');
      // A wrong secret is counted too: guessing secrets is what the limit is for.
      const guess = await introspect(q, 'not.a.jwt', 'guess-guess-guess-guess');
      expect(guess.status).toBe(429);
      clock.advance(19_999);
      expect((await introspect(q, 'not.a.jwt')).status).toBe(429);
      clock.advance(1);
      expect((await introspect(q, 'not.a.jwt')).status).toBe(200);
    } finally {
      await q.close();
    }
  });
});
