/**
 * The request pipeline's order, tried over real HTTP: the token is verified before the body is
 * read; a request that fails verification or a limit records nothing (no jti, no activity, no
 * use); every 401 carries a challenge; each request leaves one decision record naming the step
 * that decided.
 */
import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';

const POLICY = `
capabilities:
  defaults: [list_pets]
rate_limits:
  unknown_host_registration: null
`;

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

/** A POST whose body starts but never ends: the answer must come without waiting for the rest. */
function answerBeforeBody(url: string, path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const target = new URL(path, url);
    const req = httpRequest(
      target,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'transfer-encoding': 'chunked',
        },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
        req.destroy();
      },
    );
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.write('{"capability": "list_pets", "arguments": {');
    // Deliberately never ended: a server that read the body first would wait until its timeout.
  });
}

describe('the token is verified before the body is read', () => {
  it('a forged agent JWT on execute is refused while its body is still arriving', async () => {
    p = await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const stranger = await generateTestKey();
    const forged = await p.agentToken(stranger, agentId, {}, p.executeLocation);
    expect(await answerBeforeBody(p.proxy.url, '/capability/execute', forged)).toBe(401);
    // The control: the same agent's real token is accepted by the same route.
    expect((await p.execute(agent, agentId, 'list_pets')).status).toBe(200);
  });

  it('a forged host JWT on registration is refused while its body is still arriving', async () => {
    p = await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
    const { key } = await p.linkedHost();
    const stranger = await generateTestKey();
    const forged = await p.hostToken(stranger, { iss: key.thumbprint, host_public_key: undefined });
    expect(await answerBeforeBody(p.proxy.url, '/agent/register', forged)).toBe(401);
  });
});

describe('a request refused by verification or a limit records nothing', () => {
  it('a token refused at the agent limit is not used up: the same token is accepted later', async () => {
    const clock = new TestClock();
    p = await startProtocol({
      clock,
      policy: `${POLICY}  per_agent: 1/30s\n`,
      overrides: { mockUpstream: true },
    });
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    expect((await p.execute(agent, agentId, 'list_pets')).status).toBe(200);
    const token = await p.agentToken(agent, agentId, {}, p.executeLocation);
    const send = () =>
      p!.request('POST', '/capability/execute', { token, body: { capability: 'list_pets' } });
    expect((await send()).status).toBe(429);
    clock.advance(30_000);
    // Still within the token's lifetime, and now within the limit: had the 429 recorded its jti,
    // this would be refused as a replay.
    expect((await send()).status).toBe(200);
    clock.advance(30_000);
    // Now it is used up (and still unexpired with the 30 s skew): a replay.
    const again = await send();
    expect(again.body.error).toBe('invalid_jwt');
    expect(again.body.message).toMatch(/already used/);
  });

  it('forged tokens leave the replay cache, the activity log and last-used untouched', async () => {
    p = await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
    const { agentId } = await p.activeAgent(['list_pets']);
    await p.proxy.flushActivity();
    const before = {
      jtis: p.proxy.protocol.replay.size,
      activity: (await p.proxy.protocol.store.activity({ agentId, limit: 1000 })).length,
    };
    const stranger = await generateTestKey();
    for (let i = 0; i < 20; i++) {
      const forged = await p.agentToken(stranger, agentId, {}, p.executeLocation);
      const r = await p.request('POST', '/capability/execute', {
        token: forged,
        body: { capability: 'list_pets' },
      });
      expect(r.status).toBe(401);
    }
    await p.proxy.flushActivity();
    expect(p.proxy.protocol.replay.size).toBe(before.jtis);
    expect((await p.proxy.protocol.store.activity({ agentId, limit: 1000 })).length).toBe(before.activity);
  });
});

describe('one step answers every 401 with a challenge', () => {
  const protocolRoutes: [string, string][] = [
    ['POST', '/agent/register'],
    ['POST', '/agent/request-capability'],
    ['GET', '/agent/status?agent_id=x'],
    ['POST', '/agent/reactivate'],
    ['POST', '/agent/revoke'],
    ['POST', '/agent/rotate-key'],
    ['POST', '/host/rotate-key'],
    ['POST', '/host/revoke'],
    ['POST', '/capability/execute'],
    ['GET', '/capability/status/job_x'],
  ];

  it.each(protocolRoutes)(
    '%s %s: Bearer plus the §5.14 AgentAuth discovery challenge',
    async (method, path) => {
      p ??= await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
      const discovery = `AgentAuth discovery="${p.issuer}/.well-known/agent-configuration"`;
      const missing = await p.request(method, path);
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toBe(`Bearer, ${discovery}`);
      const garbage = await p.request(method, path, { token: 'a.b.c' });
      expect(garbage.status).toBe(401);
      expect(garbage.headers.get('www-authenticate')).toBe(`Bearer error="invalid_token", ${discovery}`);
    },
  );

  it.each([
    ['GET', '/admin/agents'],
    ['POST', '/agent/introspect'],
  ])('%s %s (operator secrets): Bearer only', async (method, path) => {
    p = await startProtocol({ policy: POLICY, overrides: { mockUpstream: true } });
    expect((await p.request(method, path)).headers.get('www-authenticate')).toBe('Bearer');
    const wrong = await p.request(method, path, { token: 'not-the-secret' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
  });
});

describe('each request leaves one decision record', () => {
  it('names the route, the step that decided, the outcome, the code and the principal', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    p = await startProtocol({ policy: POLICY, logger, overrides: { mockUpstream: true } });
    const { agent, agentId, hostId } = await p.activeAgent(['list_pets']);
    const ok = await p.execute(agent, agentId, 'list_pets');
    const refused = await p.execute(agent, agentId, 'delete_pet', { petId: 1 });
    const forged = await p.request('POST', '/capability/execute', { token: 'x.y.z', body: {} });
    const record = (r: { headers: Headers }) =>
      lines.find((l) => l.msg === 'request' && l.request_id === r.headers.get('x-request-id'));
    expect(record(ok)).toMatchObject({
      route: 'POST /capability/execute',
      step: 'respond',
      outcome: 'allow',
      code: null,
      agent_id: agentId,
      host_id: hostId,
      status: 200,
    });
    expect(record(refused)).toMatchObject({
      step: 'authorize',
      outcome: 'deny',
      code: 'capability_not_granted',
      agent_id: agentId,
      status: 403,
    });
    expect(record(forged)).toMatchObject({
      step: 'agent-token',
      outcome: 'deny',
      code: 'invalid_jwt',
      agent_id: null,
      status: 401,
    });
  });
});
