/**
 * JWT checks at their edges (§4.2, §4.3, §4.5, §4.6): typ's case, aud's spellings, the skew and
 * lifetime bounds, replays across an agent key rotation and re-spelled signatures, revocation
 * through the hot cache. Real proxy, real signatures.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey, signJwt } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({
    policy:
      'lifetimes:\n  max_jwt_lifetime: 60s\n  clock_skew: 30s\nrate_limits:\n  per_ip: null\n  unknown_host_registration: null\n  failed_auth_per_ip: null\n',
  });
});
afterAll(() => p.close());

const list = (token: string) => p.request('GET', '/capability/list', { token });

describe('JWT checks at their edges', () => {
  it('§4.2: host JWT with agent key claims is accepted on a non-registration endpoint', async () => {
    const a = await p.activeAgent(['list_pets']);
    const other = await generateTestKey();
    const token = await p.hostToken(a.host, { agent_public_key: other.publicJwk });
    const reply = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, { token });
    expect(reply.status).toBe(200);
  });

  it('typ in another case ("Agent+JWT") → 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const token = await signJwt(
      a.agent,
      'Agent+JWT',
      { sub: a.agentId, aud: p.issuer },
      { nowMs: p.clock.now() },
    );
    expect((await list(token)).status).toBe(401);
  });

  it('execute with aud = issuer (not the execute location) → 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const reply = await p.execute(a.agent, a.agentId, 'list_pets', {}, { aud: p.issuer });
    expect(reply.status).toBe(401);
  });

  it('agent jti reused after the agent key rotation is still a replay (partition by agent id)', async () => {
    const a = await p.activeAgent(['list_pets']);
    const jti = randomUUID();
    expect((await list(await p.agentToken(a.agent, a.agentId, { jti }))).status).toBe(200);
    const fresh = await generateTestKey();
    const rot = await p.request('POST', '/agent/rotate-key', {
      token: await p.hostToken(a.host),
      body: { agent_id: a.agentId, public_key: fresh.publicJwk },
    });
    expect(rot.status).toBe(200);
    expect((await list(await p.agentToken(fresh, a.agentId, { jti }))).status).toBe(401);
  });

  it('signature with a flipped trailing bit spelling is the same jti → replay 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const token = await p.agentToken(a.agent, a.agentId);
    expect((await list(token)).status).toBe(200);
    const last = token.at(-1) as string;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const i = alphabet.indexOf(last);
    const twin = `${token.slice(0, -1)}${alphabet.charAt((i & ~3) | ((i + 1) & 3))}`;
    expect(twin).not.toBe(token);
    expect((await list(twin)).status).toBe(401);
  });

  it('aud array with the issuer twice → 401 (strict), aud with trailing slash → 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    expect((await list(await p.agentToken(a.agent, a.agentId, { aud: [p.issuer, p.issuer] }))).status).toBe(
      401,
    );
    expect((await list(await p.agentToken(a.agent, a.agentId, {}, `${p.issuer}/`))).status).toBe(401);
  });

  it('iat 31 s in the future with a short lifetime → 401; lifetime 61 s → 401', async () => {
    const a = await p.activeAgent(['list_pets']);
    const now = Math.floor(p.clock.now() / 1000);
    expect(
      (await list(await p.agentToken(a.agent, a.agentId, { iat: now + 31, exp: now + 40 }))).status,
    ).toBe(401);
    expect((await list(await p.agentToken(a.agent, a.agentId, { iat: now, exp: now + 61 }))).status).toBe(
      401,
    );
  });

  it('revoked agent with cached records → 403 at once; revoked host → its agents 403 at once', async () => {
    const a = await p.activeAgent(['list_pets']);
    expect((await list(await p.agentToken(a.agent, a.agentId))).status).toBe(200);
    const rev = await p.request('POST', '/host/revoke', { token: await p.hostToken(a.host) });
    expect(rev.status).toBe(200);
    expect((await list(await p.agentToken(a.agent, a.agentId))).status).toBe(403);
    expect((await p.status(a.host, a.agentId)).status).toBe(403);
  });
});
