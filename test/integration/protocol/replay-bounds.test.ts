/**
 * The replay cache's memory bounds over real HTTP (§4.6, §8.4; issue 10 class 2): a flooding
 * identity hits its own cap first, a full cache refuses identities it does not know yet instead
 * of forgetting anyone's live jti, and identities already remembered keep working up to their own
 * cap. Tiny bounds in the policy make the edges reachable with a handful of real signed JWTs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';
import type { TestKey } from '../../helpers/keys.js';

// 20 entries in total (new identities admitted below 18), 5 per identity. Rate limits are off so
// that only the replay cache decides; sessions outlive the minutes the clock is moved.
const POLICY = `
lifetimes:
  session_ttl: 2h
replay:
  max_entries: 20
  max_entries_per_identity: 5
rate_limits:
  per_ip: null
  per_agent: null
  per_host: null
  per_user: null
  unknown_host_registration: null
`;

/** Longer than any token's effective window (60 s lifetime + 2 × 30 s skew). */
const PAST_EVERY_WINDOW_MS = 130_000;

interface Agent {
  key: TestKey;
  id: string;
}

let p: TestProtocol;
const agents: Agent[] = [];

beforeAll(async () => {
  p = await startProtocol({ policy: POLICY });
  for (let i = 0; i < 6; i++) {
    const a = await p.activeAgent(['list_pets'], { userId: `user-${i}` });
    agents.push({ key: a.agent, id: a.agentId });
    // The set-up's own host JWTs are remembered too: let them expire before the next agent.
    p.clock.advance(PAST_EVERY_WINDOW_MS);
  }
});
afterAll(() => p.close());

function agent(i: number): Agent {
  return agents[i] as Agent;
}

async function list(a: Agent, token?: string): Promise<Reply & { token: string }> {
  const t = token ?? (await p.agentToken(a.key, a.id));
  return { ...(await p.request('GET', '/capability/list', { token: t })), token: t };
}

function expectError(reply: Reply, status: number, code: string, message: RegExp): void {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error: code });
  expect(reply.body.message).toMatch(message);
}

describe('replay cache bounds (policy replay.*)', () => {
  it('a flooding agent hits its own cap → 429 rate_limited naming the bound; another agent is unaffected', async () => {
    p.clock.advance(PAST_EVERY_WINDOW_MS);
    const flooder = agent(0);
    for (let i = 0; i < 5; i++) expect((await list(flooder)).status).toBe(200);
    for (let i = 0; i < 20; i++) {
      const reply = await list(flooder);
      expectError(reply, 429, 'rate_limited', /replay\.max_entries_per_identity/);
      expect(Number(reply.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect((await list(agent(1))).status).toBe(200);
    expect(p.proxy.protocol.replay.entriesOf(`agent:${flooder.id}`)).toBe(5);
    // Once its tokens' windows close, the flooder is served again.
    p.clock.advance(PAST_EVERY_WINDOW_MS);
    expect((await list(flooder)).status).toBe(200);
  });

  it('when full, a new identity gets 503 naming the bound, nobody is evicted, and a known identity keeps working up to its own cap', async () => {
    p.clock.advance(PAST_EVERY_WINDOW_MS);
    const accepted: { a: Agent; token: string }[] = [];
    // Agents 0-2 at their cap (15), agent 3 with 3: 18, the share open to new identities.
    for (let i = 0; i < 4; i++) {
      for (let n = 0; n < (i < 3 ? 5 : 3); n++) {
        const reply = await list(agent(i));
        expect(reply.status).toBe(200);
        accepted.push({ a: agent(i), token: reply.token });
      }
    }
    expect(p.proxy.protocol.replay.size).toBe(18);

    const newcomer = await list(agent(4));
    expectError(newcomer, 503, 'temporarily_unavailable', /replay\.max_entries/);
    expect(Number(newcomer.headers.get('retry-after'))).toBeGreaterThan(0);

    // Agent 3 already has entries: it goes on in the headroom up to its own cap of 5.
    expect((await list(agent(3))).status).toBe(200);
    expect((await list(agent(3))).status).toBe(200);
    expectError(await list(agent(3)), 429, 'rate_limited', /replay\.max_entries_per_identity/);
    expect(p.proxy.protocol.replay.size).toBe(20);

    // Every accepted token is still caught: the refusals above evicted nothing.
    for (const { a, token } of accepted) {
      expectError(await list(a, token), 401, 'invalid_jwt', /already used/);
    }
    expect(p.proxy.protocol.replay.size).toBe(20);

    // When the windows close, new identities are admitted again.
    p.clock.advance(PAST_EVERY_WINDOW_MS);
    expect((await list(agent(5))).status).toBe(200);
  });

  it('a refused request stores nothing: the token refused for capacity is accepted once there is room', async () => {
    p.clock.advance(PAST_EVERY_WINDOW_MS);
    const flooder = agent(2);
    for (let i = 0; i < 5; i++) expect((await list(flooder)).status).toBe(200);
    // Signed 10 s later, so its window outlasts those of the five (90 s after signing each).
    p.clock.advance(10_000);
    const refused = await list(flooder);
    expect(refused.status).toBe(429);
    p.clock.advance(50_000);
    expect((await list(flooder, refused.token)).status).toBe(429);
    p.clock.advance(30_000);
    expect((await list(flooder, refused.token)).status).toBe(200);
    expectError(await list(flooder, refused.token), 401, 'invalid_jwt', /already used/);
  });
});
