/**
 * §8.13 rate limiting per client IP, per unknown-host registration, per host, per agent and per
 * user, from the policy's `rate_limits`: over a limit → 429 rate_limited with an integer
 * Retry-After; the bucket refills as the (test) clock advances; a limited request changes nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type Reply, type TestProtocol } from '../../helpers/protocol.js';

// Generous limits for the dimensions a test is not about, so only one bucket can run out.
const LOOSE = { per_agent: '1000/1m', per_host: '1000/1m', per_user: '1000/1m', per_ip: '1000/1m' };

let running: TestProtocol | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function start(limits: Record<string, string>): Promise<{ p: TestProtocol; clock: TestClock }> {
  const clock = new TestClock();
  const yaml = Object.entries({ ...LOOSE, ...limits })
    .map(([k, v]) => `  ${k}: ${v}`)
    .join('\n');
  running = await startProtocol({
    clock,
    policy: `capabilities:\n  public: [list_pets]\nrate_limits:\n${yaml}\n`,
  });
  return { p: running, clock };
}

/** §8.13: 429, error rate_limited, and Retry-After in whole seconds (≥ 1). */
function expectLimited(reply: Reply, retryAfter: number, what = ''): void {
  expect(reply.status, what).toBe(429);
  expect(reply.body, what).toEqual({ error: 'rate_limited', message: expect.any(String) });
  const header = reply.headers.get('retry-after');
  expect(header, what).toMatch(/^[1-9]\d*$/);
  expect(Number(header), what).toBe(retryAfter);
}

describe('§8.13 per IP (unauthenticated calls)', () => {
  it('anonymous listing is limited per IP and refills after Retry-After', async () => {
    const { p, clock } = await start({ per_ip: '2/1m' });
    expect((await p.request('GET', '/capability/list')).status).toBe(200);
    expect((await p.request('GET', '/capability/describe?name=list_pets')).status).toBe(200);
    // 2 per minute: one request comes back every 30 s.
    expectLimited(await p.request('GET', '/capability/list'), 30);
    // An unknown (self-signed) host is not authenticated either: same IP bucket.
    const stranger = await generateTestKey();
    expectLimited(await p.request('GET', '/capability/list', { token: await p.hostToken(stranger) }), 30);

    // Authenticated principals have their own buckets, not the IP's.
    const { key } = await p.linkedHost('alice');
    expect((await p.request('GET', '/capability/list', { token: await p.hostToken(key) })).status).toBe(200);
    const a = await p.activeAgent(['list_pets']);
    expect(
      (await p.request('GET', '/capability/list', { token: await p.agentToken(a.agent, a.agentId) })).status,
    ).toBe(200);

    clock.advance(29_999);
    expectLimited(await p.request('GET', '/capability/list'), 1);
    clock.advance(1);
    expect((await p.request('GET', '/capability/list')).status).toBe(200);
    expectLimited(await p.request('GET', '/capability/list'), 30);
  });

  it('Retry-After is at least 1 second even when the wait is shorter', async () => {
    const { p } = await start({ per_ip: '10/1s' });
    for (let i = 0; i < 10; i++) expect((await p.request('GET', '/capability/list')).status).toBe(200);
    expectLimited(await p.request('GET', '/capability/list'), 1);
  });
});

describe('§8.13 registrations of unknown hosts, per IP', () => {
  it('is limited separately; a limited registration creates neither host nor agent', async () => {
    const { p, clock } = await start({ unknown_host_registration: '2/1h' });
    for (let i = 0; i < 2; i++) {
      const reg = await p.register(await generateTestKey(), { capabilities: ['list_pets'] });
      expect(reg.status).toBe(200);
      expect(reg.body.status).toBe('pending');
    }
    const limited = await p.register(await generateTestKey(), { capabilities: ['list_pets'] });
    // 2 per hour: one registration every 30 minutes.
    expectLimited(limited, 1800);
    expect((await p.admin('GET', '/admin/hosts')).body.hosts).toHaveLength(2);
    expect((await p.admin('GET', '/admin/agents')).body.agents).toHaveLength(2);
    expect((await p.admin('GET', '/admin/approvals')).body.approvals).toHaveLength(2);

    // Known hosts are not "unknown host registrations": a pre-registered host still registers.
    const { key } = await p.linkedHost('alice');
    expect((await p.register(key, { capabilities: ['list_pets'] })).status).toBe(200);
    // Anonymous listing has its own (per_ip) bucket.
    expect((await p.request('GET', '/capability/list')).status).toBe(200);

    clock.advance(30 * 60_000);
    expect((await p.register(await generateTestKey(), { capabilities: ['list_pets'] })).status).toBe(200);
    expectLimited(await p.register(await generateTestKey(), { capabilities: ['list_pets'] }), 1800);
    expect((await p.admin('GET', '/admin/hosts')).body.hosts).toHaveLength(4);
  });
});

describe('§8.13 per host', () => {
  it("counts the host's own calls and its agents' calls; other hosts are unaffected", async () => {
    const { p, clock } = await start({ per_host: '4/1m' });
    const { key: host, hostId } = await p.linkedHost('alice');
    const reg = await p.register(host, { capabilities: ['list_pets'] }); // 1
    expect(reg.status).toBe(200);
    expect(reg.body.status).toBe('active');
    const agentId: string = reg.body.agent_id;
    const agentList = async (): Promise<Reply> =>
      p.request('GET', '/capability/list', { token: await p.agentToken(reg.agent, agentId) });
    expect((await agentList()).status).toBe(200); // 2
    expect((await p.status(host, agentId)).status).toBe(200); // 3
    expect((await p.request('GET', '/capability/list', { token: await p.hostToken(host) })).status).toBe(200); // 4

    // 4 per minute: one every 15 s.
    expectLimited(await p.status(host, agentId), 15, 'host status');
    expectLimited(await agentList(), 15, 'agent of the host');
    const again = await p.register(host, { capabilities: ['get_pet'] });
    expectLimited(again, 15, 'registration by the host');
    const revoke = await p.request('POST', '/agent/revoke', {
      token: await p.hostToken(host),
      body: { agent_id: agentId },
    });
    expectLimited(revoke, 15, 'revocation by the host');
    // Nothing changed: still one agent, still active.
    const shown = await p.admin('GET', `/admin/hosts/${hostId}`);
    expect(shown.body.agents).toEqual([expect.objectContaining({ agent_id: agentId, status: 'active' })]);

    const { key: other } = await p.linkedHost('alice');
    expect((await p.request('GET', '/capability/list', { token: await p.hostToken(other) })).status).toBe(
      200,
    );

    clock.advance(15_000);
    expect((await p.status(host, agentId)).status).toBe(200);
    expectLimited(await p.status(host, agentId), 15);
  });
});

describe('§8.13 per agent', () => {
  it('limits one agent by its sub; a limited capability request grants nothing', async () => {
    const { p, clock } = await start({ per_agent: '2/1m' });
    const a = await p.activeAgent(['list_pets']);
    const b = await p.activeAgent(['list_pets']);
    const list = async (who: typeof a): Promise<Reply> =>
      p.request('GET', '/capability/list', { token: await p.agentToken(who.agent, who.agentId) });
    expect((await list(a)).status).toBe(200);
    expect((await list(a)).status).toBe(200);
    expectLimited(await list(a), 30);
    const request = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['get_pet'] },
    });
    expectLimited(request, 30);
    const shown = await p.admin('GET', `/admin/agents/${a.agentId}`);
    expect(shown.body.agent_capability_grants.map((g: { capability: string }) => g.capability)).toEqual([
      'list_pets',
    ]);
    // Another agent, even of the same user, has its own bucket.
    expect((await list(b)).status).toBe(200);

    clock.advance(30_000);
    const retried = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(a.agent, a.agentId),
      body: { capabilities: ['get_pet'] },
    });
    expect(retried.status).toBe(200);
    expectLimited(await list(a), 30);
  });
});

describe('§8.13 per user', () => {
  it("shares one bucket across every agent linked to a user, across hosts; other users' agents pass", async () => {
    const { p, clock } = await start({ per_user: '3/1m' });
    const a = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const b = await p.activeAgent(['list_pets'], { userId: 'alice' });
    const c = await p.activeAgent(['list_pets'], { userId: 'carol' });
    expect(a.hostId).not.toBe(b.hostId);
    const list = async (who: typeof a): Promise<Reply> =>
      p.request('GET', '/capability/list', { token: await p.agentToken(who.agent, who.agentId) });
    expect((await list(a)).status).toBe(200);
    expect((await list(b)).status).toBe(200);
    expect((await list(a)).status).toBe(200);
    // 3 per minute: one every 20 s.
    expectLimited(await list(b), 20, 'second agent of alice');
    expectLimited(await list(a), 20, 'first agent of alice');
    expect((await list(c)).status).toBe(200);

    clock.advance(20_000);
    expect((await list(b)).status).toBe(200);
    expectLimited(await list(a), 20);
  });
});

describe('rate_limits: null disables a dimension', () => {
  it('per_ip: null lets anonymous calls through well past any small budget', async () => {
    const { p } = await start({ per_ip: 'null', unknown_host_registration: '1/1h' });
    for (let i = 0; i < 30; i++) expect((await p.request('GET', '/capability/list')).status).toBe(200);
  });
});
