/**
 * Per-call approvals (README "Per-call approval") at their edges: a per-call capability is never
 * run as another call's status URL or result; an approved call reaches the upstream once, with
 * no transport retry; revoking the agent closes its pending calls; an approved call counts as a
 * use of its grant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callIdOf,
  PageClient,
  softPasskey,
  startPerCallProxy,
  type PerCallProxy,
  perCallPolicy,
} from '../../helpers/per-call.js';
import { dpopHeaders, dpopProof } from '../../helpers/dpop.js';
import { generateTestKey } from '../../helpers/keys.js';

const ALICE = 'alice@example.com';
// get_report (GET /reports/{id}) waits for a person's approval of each call; send_transfer does not.
const POLICY = perCallPolicy('get_report');

let s: PerCallProxy;
beforeAll(async () => {
  s = await startPerCallProxy({
    policy: POLICY,
    users: [ALICE],
    config: 'execution:\n  retry_backoff: 10ms\n',
  });
});
afterAll(() => s?.close());

async function approved(callStatusUrl: string): Promise<number> {
  const alice = await PageClient.signIn(s.p.issuer, ALICE);
  return (await alice.approve(callIdOf(callStatusUrl), await softPasskey(s.p, ALICE))).status;
}

describe('a per-call capability behind another call’s status URL', () => {
  it('is not followed: nothing of it reaches the upstream without an approval', async () => {
    const { p } = s;
    const a = await p.activeAgent(['send_transfer', 'get_report'], { userId: ALICE });
    s.upstream.reset();
    s.upstream.on('POST /transfers', (_req, res) => {
      res.writeHead(202, { location: '/reports/secret', 'content-type': 'application/json' });
      res.end('{}');
    });
    s.upstream.on('GET /reports/secret', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"report":"only for approved calls"}');
    });
    const job = await p.execute(a.agent, a.agentId, 'send_transfer', { to: 'acct-1', amount: 1 });
    expect(job.status).toBe(202);
    const polled = await p.request('GET', new URL(job.body.status_url as string).pathname, {
      token: await p.agentToken(a.agent, a.agentId),
    });
    // Observed before: the poll sent GET /reports/secret and returned its data, no one asked.
    expect(s.upstream.received('/reports')).toHaveLength(0);
    expect(polled.status).toBe(403);
    expect(polled.body).toMatchObject({
      error: 'capability_not_granted',
      message: expect.stringMatching(/execute get_report itself/),
    });
  });
});

describe('an approved per-call execution', () => {
  it('reaches the upstream once: a 503 is not retried, though GET is idempotent', async () => {
    const { p } = s;
    const a = await p.activeAgent(['get_report'], { userId: ALICE });
    s.upstream.reset();
    s.upstream.on('GET /reports/busy', (_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":"busy"}');
    });
    const reply = await p.execute(a.agent, a.agentId, 'get_report', { id: 'busy' });
    expect(reply.status).toBe(202);
    expect(await approved(reply.body.status_url as string)).toBe(200);
    // Observed before: 3 (execution.retries is 2 by default).
    expect(s.upstream.received('/reports/busy')).toHaveLength(1);
  });

  it('counts as a use of its grant (account page)', async () => {
    const { p } = s;
    const ctx = p.proxy.protocol;
    const a = await p.activeAgent(['get_report'], { userId: ALICE });
    s.upstream.reset();
    const reply = await p.execute(a.agent, a.agentId, 'get_report', { id: 'r1' });
    expect(await approved(reply.body.status_url as string)).toBe(200);
    expect(s.upstream.received('/reports/r1')).toHaveLength(1);
    const grant = (await ctx.store.grants(a.agentId)).find((g) => g.capability === 'get_report');
    await ctx.usage.flush();
    const stored = (await ctx.store.grantUses(a.agentId)).get(grant!.id);
    // Observed before: 0, only the execute route counted uses.
    expect(ctx.usage.grantUse(grant!.id, stored).uses).toBe(1);
  });
});

describe('polling a per-call execution', () => {
  it('§4.3: with a JWT whose capabilities claim leaves out its capability → 403, and the outcome stays to be fetched', async () => {
    const { p } = s;
    const a = await p.activeAgent(['get_report', 'send_transfer'], { userId: ALICE });
    s.upstream.reset();
    s.upstream.on('GET /reports/scoped', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"report":"scoped"}');
    });
    const reply = await p.execute(a.agent, a.agentId, 'get_report', { id: 'scoped' });
    const statusUrl = reply.body.status_url as string;
    expect(await approved(statusUrl)).toBe(200);
    const path = new URL(statusUrl).pathname;
    const poll = async (capabilities: string[]) =>
      p.request('GET', path, { token: await p.agentToken(a.agent, a.agentId, { capabilities }, statusUrl) });

    const refused = await poll(['send_transfer']);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'capability_not_granted' });
    expect(JSON.stringify(refused.body)).not.toContain('scoped');
    // Observed before: 200 with the report, and the outcome, delivered once, was gone.
    const fetched = await poll(['get_report']);
    expect(fetched.body).toEqual({ status: 'completed', result: { report: 'scoped' } });
  });
});

describe('a per-call capability the policy also lists in capabilities.dpop (§4.4)', () => {
  it('needs a DPoP-proven JWT to fetch its outcome; a bearer poll is refused and uses nothing up', async () => {
    const d = await startPerCallProxy({
      policy: `capabilities:\n  per_call: [get_report]\n  dpop: [get_report]\nrate_limits:\n  unknown_host_registration: null\n`,
      users: [ALICE],
    });
    try {
      const { p } = d;
      const a = await p.activeAgent(['get_report'], { userId: ALICE });
      const proofKey = await generateTestKey();
      d.upstream.on('GET /reports/bound', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"report":"bound"}');
      });
      const proven = async (method: string, url: string) => {
        const token = await p.agentToken(a.agent, a.agentId, { cnf: { jkt: proofKey.thumbprint } }, url);
        return dpopHeaders(token, await dpopProof(proofKey, { method, url, token, nowMs: p.clock.now() }));
      };
      const started = await p.request('POST', '/capability/execute', {
        headers: { ...(await proven('POST', p.executeLocation)), 'content-type': 'application/json' },
        rawBody: JSON.stringify({ capability: 'get_report', arguments: { id: 'bound' } }),
      });
      expect(started.status).toBe(202);
      const statusUrl = started.body.status_url as string;
      const alice = await PageClient.signIn(p.issuer, ALICE);
      expect((await alice.approve(callIdOf(statusUrl), await softPasskey(p, ALICE))).status).toBe(200);
      const path = new URL(statusUrl).pathname;

      const bearer = await p.request('GET', path, {
        token: await p.agentToken(a.agent, a.agentId, {}, statusUrl),
      });
      expect(bearer.status).toBe(401);
      expect(bearer.body).toMatchObject({
        error: 'invalid_jwt',
        message: expect.stringContaining('get_report'),
      });
      const fetched = await p.request('GET', path, { headers: await proven('GET', statusUrl) });
      expect(fetched.body).toEqual({ status: 'completed', result: { report: 'bound' } });
    } finally {
      await d.close();
    }
  });
});

describe('revoking an agent with pending per-call approvals', () => {
  it('closes them: failed with agent_revoked, gone from the inbox, their page 404, recorded', async () => {
    const { p } = s;
    const a = await p.activeAgent(['get_report'], { userId: ALICE });
    const reply = await p.execute(a.agent, a.agentId, 'get_report', { id: 'r2' });
    const id = callIdOf(reply.body.status_url as string);
    const alice = await PageClient.signIn(p.issuer, ALICE);
    expect((await alice.get('/approvals')).html).toContain(id);
    expect((await p.admin('POST', `/admin/agents/${a.agentId}/revoke`, {})).status).toBe(200);

    const row = await p.proxy.protocol.store.perCall(id);
    expect(row).toMatchObject({ status: 'failed', error: { error: 'agent_revoked' } });
    expect((await alice.get('/approvals')).html).not.toContain(id);
    expect((await alice.callForm(id)).status).toBe(404);
    const events = await p.proxy.protocol.store.activity({ agentId: a.agentId, limit: 10 });
    expect(events.map((e) => e.type)).toContain('per_call.closed');
  });
});
