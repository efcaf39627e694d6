/**
 * Per-call approval over real HTTP (issue 16 §1, §5.11): a real proxy (SQLite file, issuer
 * http://localhost:PORT), a recording upstream, really signed agent JWTs, approvers working the
 * pages with a software passkey (test/helpers/per-call.ts). The Chromium flow is in
 * test/integration/pages/per-call.browser.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../../../src/cli/admin.js';
import { claimPerCall, finishPerCall, outcomeUnknownAfterMs } from '../../../src/protocol/per-call-decide.js';
import { shownHash } from '../../../src/protocol/per-call.js';
import type { TestKey } from '../../helpers/keys.js';
import { ADMIN_TOKEN, type TestProtocol } from '../../helpers/protocol.js';
import {
  callIdOf,
  PageClient,
  softPasskey,
  startPerCallProxy,
  type PerCallProxy,
} from '../../helpers/per-call.js';
import { TestUpstream } from '../../helpers/upstream.js';
import type { SoftAuthenticator } from '../../helpers/webauthn.js';

const ALICE = 'alice@example.com';
const BOB = 'bob@example.com';
const POLICY = `capabilities:
  per_call: [send_transfer, {paths: ['/reports/*']}]
approval:
  per_call_expires_in: 5m
  per_call_max_result_bytes: 1024
rate_limits:
  unknown_host_registration: null
`;

let s: PerCallProxy;
let p: TestProtocol;
let alice: PageClient;
let alicePasskey: SoftAuthenticator;

beforeAll(async () => {
  s = await startPerCallProxy({ policy: POLICY, users: [ALICE, BOB] });
  p = s.p;
  alice = await PageClient.signIn(p.issuer, ALICE);
  alicePasskey = await softPasskey(p, ALICE);
});
afterAll(() => s?.close());

interface Agent {
  readonly agent: TestKey;
  readonly agentId: string;
}

async function aliceAgent(): Promise<Agent> {
  return p.activeAgent(['send_transfer', 'get_report'], { userId: ALICE });
}

async function poll(a: Agent, statusUrl: string): Promise<{ status: number; body: any }> {
  return p.request('GET', new URL(statusUrl).pathname, { token: await p.agentToken(a.agent, a.agentId) });
}

/** A per-call execute: 202 with a status URL on the proxy (§5.11). */
async function pending(
  a: Agent,
  args: Record<string, unknown>,
  capability = 'send_transfer',
): Promise<string> {
  const reply = await p.execute(a.agent, a.agentId, capability, args);
  expect(reply.status).toBe(202);
  expect(Object.keys(reply.body).sort()).toEqual(['status', 'status_url']);
  expect(reply.body.status).toBe('pending');
  return reply.body.status_url as string;
}

describe('per-call approval (§5.11 async, issue 16 §1)', () => {
  it('waits without calling the upstream, then runs the approved arguments exactly once', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const args = { to: 'acct-42', amount: 1250, memo: 'rent' };
    const statusUrl = await pending(a, args);
    expect(statusUrl).toMatch(new RegExp(`^${p.issuer}/capability/status/call_`));
    expect(s.upstream.requests).toHaveLength(0);
    expect((await poll(a, statusUrl)).body).toEqual({ status: 'pending', status_url: statusUrl });
    // Counted as waiting for a person, not as executed (issue 12 metrics).
    const metrics = await fetch(`${p.proxy.url}/metrics`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(await metrics.text()).toMatch(
      /^agent_auth_proxy_executions_total\{capability="send_transfer",outcome="pending_approval"\} [1-9]/m,
    );

    const approved = await alice.approve(callIdOf(statusUrl), alicePasskey);
    expect(approved.status).toBe(200);
    expect(approved.text).toContain('ran once');
    const sent = s.upstream.received('/transfers');
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]?.body.toString('utf8') ?? '')).toEqual(args);

    const done = await poll(a, statusUrl);
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('completed');
    expect(JSON.parse(done.body.result.body)).toEqual(args);
    expect(Object.keys(done.body).sort()).toEqual(['result', 'status']);
    // Delivered once: the row is gone; a second poll or a re-submitted approval runs nothing.
    expect(await p.proxy.protocol.store.perCall(callIdOf(statusUrl))).toBeUndefined();
    expect((await poll(a, statusUrl)).body.error).toBe('execution_not_found');
    const again = await alice.post(`/approvals/calls/${callIdOf(statusUrl)}/approve`, {
      csrf: 'x',
      shown: 'y',
    });
    expect(again.status).not.toBe(200);
    expect(s.upstream.requests).toHaveLength(1);
    const types = (await p.proxy.protocol.store.activity({ agentId: a.agentId, limit: 50 }))
      .map((r) => r.type)
      .filter((t) => t.startsWith('per_call.'));
    expect(types.sort()).toEqual(['per_call.approved', 'per_call.executed', 'per_call.opened']);
    const approval = (await p.proxy.protocol.store.activity({ agentId: a.agentId, limit: 50 })).find(
      (r) => r.type === 'per_call.approved',
    );
    expect(approval?.detail).toMatchObject({
      by: ALICE,
      auth_method: 'passkey',
      content_hash: expect.any(String),
    });
  });

  it('polling needs a fresh JWT of the same agent: another agent is refused', async () => {
    const a = await aliceAgent();
    const other = await aliceAgent();
    const statusUrl = await pending(a, { to: 'acct-1', amount: 1 });
    const foreign = await poll(other, statusUrl);
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toBe('unauthorized');
    expect((await poll(a, statusUrl)).body.status).toBe('pending');
  });

  it('expires: failed with approval_expired, nothing executed', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-2', amount: 5 });
    const form = await alice.callForm(callIdOf(statusUrl));
    p.clock.advance(5 * 60_000 + 1);
    const late = await alice.post(`/approvals/calls/${callIdOf(statusUrl)}/approve`, {
      csrf: form.csrf,
      shown: form.shown,
      assertion: '{}',
    });
    expect(late.status).toBe(404);
    const done = await poll(a, statusUrl);
    expect(done.body).toEqual({
      status: 'failed',
      error: { error: 'approval_expired', message: expect.any(String) },
    });
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('the maintenance sweep expires an unanswered call, then deletes its undelivered outcome', async () => {
    const a = await aliceAgent();
    const id = callIdOf(await pending(a, { to: 'acct-sweep', amount: 6 }));
    const store = p.proxy.protocol.store;
    p.clock.advance(5 * 60_000);
    await p.proxy.maintain();
    expect(await store.perCall(id)).toMatchObject({ status: 'failed', error: { error: 'approval_expired' } });
    expect((await store.activity({ agentId: a.agentId, limit: 20 })).map((r) => r.type)).toContain(
      'per_call.expired',
    );
    p.clock.advance(15 * 60_000);
    await p.proxy.maintain();
    expect(await store.perCall(id)).toBeUndefined();
  });

  it('a claimed call whose outcome was never stored reads pending, then failed with outcome "unknown" once none could still run', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-lost', amount: 7 });
    const ctx = p.proxy.protocol;
    // What a proxy that died (or lost its database) right after Approve leaves: claimed, no outcome.
    const row = await ctx.store.perCall(callIdOf(statusUrl));
    const unknownAfter = outcomeUnknownAfterMs(30_000); // execution.timeout's default, 30 s
    const claimed = await claimPerCall(
      ctx,
      callIdOf(statusUrl),
      shownHash(row!),
      { actor: ALICE, authMethod: 'passkey' },
      unknownAfter,
    );
    expect(claimed?.id).toBe(callIdOf(statusUrl));
    // Kept past the row's usual end (deadline + 15 min) until the poll can say what happened.
    expect((await ctx.store.perCall(callIdOf(statusUrl)))?.keepUntil).toBeGreaterThanOrEqual(
      p.clock.now() + unknownAfter,
    );

    p.clock.advance(unknownAfter - 1);
    expect((await poll(a, statusUrl)).body).toEqual({ status: 'pending', status_url: statusUrl });
    p.clock.advance(1);
    // §5.11: only the agent that started it may poll; another one changes nothing.
    const foreign = await poll(await aliceAgent(), statusUrl);
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toBe('unauthorized');
    expect((await ctx.store.perCall(callIdOf(statusUrl)))?.status).toBe('executing');
    expect((await poll(a, statusUrl)).body).toEqual({
      status: 'failed',
      error: {
        error: 'internal_error',
        outcome: 'unknown',
        message: expect.stringContaining('may or may not'),
      },
    });
    // Delivered once, recorded, and nothing was sent by this test's proxy.
    expect((await poll(a, statusUrl)).body.error).toBe('execution_not_found');
    // An outcome that turns up after all is not stored over what the agent was told.
    await finishPerCall(ctx, claimed!, { result: { ok: true }, upstreamStatus: 200 });
    expect(await ctx.store.perCall(callIdOf(statusUrl))).toBeUndefined();
    const types = (await ctx.store.activity({ agentId: a.agentId, limit: 20 })).map((r) => r.type);
    expect(types).toContain('per_call.outcome_unknown');
    expect(types).not.toContain('per_call.executed');
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('a claimed call the agent never polls is failed as "unknown" by the sweep: in the operator\'s list and the activity, once', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-silent', amount: 9 });
    const id = callIdOf(statusUrl);
    const ctx = p.proxy.protocol;
    const unknownAfter = outcomeUnknownAfterMs(30_000); // execution.timeout's default, 30 s
    const row = await ctx.store.perCall(id);
    await claimPerCall(ctx, id, shownHash(row!), { actor: ALICE, authMethod: 'passkey' }, unknownAfter);
    const listed = async () =>
      (
        (await p.admin('GET', '/admin/per-call-approvals?limit=200')).body.per_call_approvals as {
          id: string;
          status: string;
          error?: Record<string, unknown>;
        }[]
      ).find((r) => r.id === id);
    const unknownRecords = async () =>
      (await ctx.store.activity({ agentId: a.agentId, limit: 50 })).filter(
        (r) => r.type === 'per_call.outcome_unknown',
      );

    // Until then the call could still be running: the listing and the sweep leave it executing.
    p.clock.advance(unknownAfter - 1);
    await p.proxy.maintain();
    expect((await listed())?.status).toBe('executing');
    p.clock.advance(1);
    // The listing sweeps first (as the periodic maintenance does), with nobody polling.
    expect(await listed()).toMatchObject({
      status: 'failed',
      error: {
        error: 'internal_error',
        outcome: 'unknown',
        message: expect.stringContaining('may or may not'),
      },
    });
    await p.proxy.maintain();
    expect(await unknownRecords()).toHaveLength(1);
    // The agent that polls later is told the same, once.
    expect((await poll(a, statusUrl)).body).toMatchObject({
      status: 'failed',
      error: { outcome: 'unknown' },
    });
    expect((await poll(a, statusUrl)).body.error).toBe('execution_not_found');
    expect(await unknownRecords()).toHaveLength(1);
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('a grant revoked before approval: nothing executed, failed with capability_not_granted', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-3', amount: 7 });
    const store = p.proxy.protocol.store;
    const grant = (await store.grants(a.agentId)).find((g) => g.capability === 'send_transfer');
    await p.proxy.protocol.write((tx) =>
      tx.updateGrant(grant?.id ?? '', { status: 'revoked', updatedAt: p.clock.now() }),
    );
    expect((await alice.approve(callIdOf(statusUrl), alicePasskey)).status).toBe(200);
    expect(s.upstream.requests).toHaveLength(0);
    expect((await poll(a, statusUrl)).body.error.error).toBe('capability_not_granted');
  });

  it('a grant narrowed before approval: the constraints in force are checked again, nothing sent, failed with constraint_violated', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-32', amount: 1250 });
    const store = p.proxy.protocol.store;
    const grant = (await store.grants(a.agentId)).find((g) => g.capability === 'send_transfer');
    // What a re-approval with tighter constraints leaves while the call waits.
    await p.proxy.protocol.write((tx) =>
      tx.updateGrant(grant?.id ?? '', { constraints: { amount: { max: 100 } }, updatedAt: p.clock.now() }),
    );
    expect((await alice.approve(callIdOf(statusUrl), alicePasskey)).status).toBe(200);
    expect(s.upstream.requests).toHaveLength(0);
    expect((await poll(a, statusUrl)).body).toMatchObject({
      status: 'failed',
      error: { error: 'constraint_violated' },
    });
  });

  it('a grant approved at another version of the capability does not run it, even before drift suspended it (§2.12)', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-31', amount: 7 });
    const store = p.proxy.protocol.store;
    const grant = (await store.grants(a.agentId)).find((g) => g.capability === 'send_transfer');
    expect(grant?.capabilityVersion).toBeTruthy();
    // What a reload that changed the capability leaves for the moment before drift's transaction.
    await p.proxy.protocol.write((tx) =>
      tx.updateGrant(grant?.id ?? '', { capabilityVersion: 'sha256:another', updatedAt: p.clock.now() }),
    );
    expect((await alice.approve(callIdOf(statusUrl), alicePasskey)).status).toBe(200);
    expect(s.upstream.requests).toHaveLength(0);
    const outcome = (await poll(a, statusUrl)).body.error;
    expect(outcome.error).toBe('capability_not_granted');
    expect(outcome.message).toMatch(/changed since its grant was approved/);
  });

  it('a result over approval.per_call_max_result_bytes fails with payload_too_large', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    s.upstream.on('GET /reports/big', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ rows: 'x'.repeat(4000) }));
    });
    const statusUrl = await pending(a, { id: 'big' }, 'get_report');
    await alice.approve(callIdOf(statusUrl), alicePasskey);
    expect(s.upstream.received('/reports/big')).toHaveLength(1);
    const done = await poll(a, statusUrl);
    expect(done.body.status).toBe('failed');
    expect(done.body.error.error).toBe('payload_too_large');
    expect(done.body.error.message).toContain('per_call_max_result_bytes');
  });

  it('an upstream that answers with an event stream or an async 202 fails the call with upstream_error', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    s.upstream.on('GET /reports/sse', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"n":1}\n\nevent: done\ndata: {}\n\n');
    });
    s.upstream.on('GET /reports/slow', (_req, res) => {
      res.writeHead(202, { location: '/reports/slow-status', 'content-type': 'application/json' });
      res.end('{}');
    });
    for (const [id, words] of [
      ['sse', 'event stream'],
      ['slow', '202'],
    ] as const) {
      const statusUrl = await pending(a, { id }, 'get_report');
      await alice.approve(callIdOf(statusUrl), alicePasskey);
      expect(s.upstream.received(`/reports/${id}`)).toHaveLength(1);
      const done = await poll(a, statusUrl);
      expect(done.body.error.error).toBe('upstream_error');
      expect(done.body.error.message).toContain(words);
    }
  });

  it('a tampered shown hash is refused and nothing changes', async () => {
    const a = await aliceAgent();
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-4', amount: 9 });
    const id = callIdOf(statusUrl);
    const form = await alice.callForm(id);
    const assertion = await alice.assertion(id, alicePasskey, form);
    const tampered = await alice.post(`/approvals/calls/${id}/approve`, {
      csrf: form.csrf,
      shown: `${form.shown.slice(0, -2)}AA`,
      assertion,
    });
    expect(tampered.status).toBe(409);
    expect((await p.proxy.protocol.store.perCall(id))?.status).toBe('pending');
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('another user gets 404 on the page and on approve/deny, and nothing changes', async () => {
    const a = await aliceAgent();
    const statusUrl = await pending(a, { to: 'acct-5', amount: 11 });
    const id = callIdOf(statusUrl);
    const bob = await PageClient.signIn(p.issuer, BOB);
    const page = await bob.callForm(id);
    expect(page.status).toBe(404);
    expect(page.html).not.toContain('acct-5');
    const bobForm = await bob.callForm('call_nothing');
    const deny = await bob.post(`/approvals/calls/${id}/deny`, { csrf: bobForm.csrf || 'x', shown: 'x' });
    expect([403, 404]).toContain(deny.status);
    expect((await bob.get('/approvals')).html).not.toContain(id);
    expect((await alice.get('/approvals')).html).toContain(`call-${id}`);
    expect((await p.proxy.protocol.store.perCall(id))?.status).toBe('pending');
  });

  it('the operator lists per-call approvals (keyset pages) and can deny one', async () => {
    const a = await aliceAgent();
    const first = callIdOf(await pending(a, { to: 'acct-6', amount: 1 }));
    p.clock.advance(1);
    const statusUrl = await pending(a, { to: 'acct-7', amount: 2 });
    const second = callIdOf(statusUrl);
    const page1 = await p.admin('GET', '/admin/per-call-approvals?status=pending&limit=1');
    expect(page1.status).toBe(200);
    expect(page1.body.per_call_approvals).toHaveLength(1);
    const page2 = await p.admin(
      'GET',
      `/admin/per-call-approvals?status=pending&limit=1&cursor=${encodeURIComponent(page1.body.next_cursor)}`,
    );
    const ids = [page1.body.per_call_approvals[0].id, page2.body.per_call_approvals[0].id];
    expect(new Set(ids).size).toBe(2);
    const listed = await p.admin('GET', '/admin/per-call-approvals?limit=200');
    const mine = listed.body.per_call_approvals.filter((r: { id: string }) => [first, second].includes(r.id));
    expect(mine.map((r: { arguments: unknown }) => r.arguments)).toEqual([
      { to: 'acct-7', amount: 2 },
      { to: 'acct-6', amount: 1 },
    ]);
    const denied = await p.admin('POST', `/admin/per-call-approvals/${second}/deny`, { reason: 'not today' });
    expect(denied.status).toBe(200);
    expect(denied.body.status).toBe('failed');
    expect((await poll(a, statusUrl)).body.error.error).toBe('approval_denied');
    expect((await p.admin('POST', `/admin/per-call-approvals/${second}/deny`, {})).status).toBe(404);
  });
});

describe('admin CLI', () => {
  it('admin calls list / calls deny drive the operator API', async () => {
    const a = await aliceAgent();
    const statusUrl = await pending(a, { to: 'acct-cli', amount: 8 });
    const id = callIdOf(statusUrl);
    const out: string[] = [];
    const io = { out: (t: string) => void out.push(t), err: (t: string) => void out.push(t) };
    const env = { AGENT_AUTH_PROXY_URL: p.proxy.url, AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN };
    expect(await runAdmin(['calls', 'list', '--status', 'pending', '--limit', '200'], env, io)).toBe(0);
    expect(out.join('')).toContain(id);
    expect(out.join('')).toContain('acct-cli');
    expect(await runAdmin(['calls', 'deny', id, '--reason', 'no'], env, io)).toBe(0);
    expect(out.at(-1)).toContain(`denied call ${id}`);
    expect((await poll(a, statusUrl)).body.error.error).toBe('approval_denied');
  });
});

describe('bounds', () => {
  it('an agent has at most 20 calls waiting; the next is 429 and nothing more is stored', async () => {
    const a = await aliceAgent();
    for (let i = 0; i < 20; i++) await pending(a, { to: `acct-b${i}`, amount: 1 + i });
    const over = await p.execute(a.agent, a.agentId, 'send_transfer', { to: 'acct-b20', amount: 21 });
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('rate_limited');
    expect(over.headers.get('retry-after')).toBe('60');
    const open = await p.admin('GET', '/admin/per-call-approvals?status=pending&limit=200');
    expect(
      open.body.per_call_approvals.filter((r: { agent_id: string }) => r.agent_id === a.agentId),
    ).toHaveLength(20);
  });

  it('the inbox shows the 20 newest calls and says when more wait, rather than hide them', async () => {
    const [one, two] = [await aliceAgent(), await aliceAgent()];
    for (let i = 0; i < 11; i++) await pending(one, { to: `acct-m${i}`, amount: 1 });
    for (let i = 0; i < 9; i++) await pending(two, { to: `acct-n${i}`, amount: 1 });
    // The test clock stands still: a later instant makes this one the newest, ahead of any tie.
    p.clock.advance(1);
    const newest = callIdOf(await pending(two, { to: 'acct-newest', amount: 1 }));
    const html = (await alice.get('/approvals')).html;
    expect(html).toContain(`call-${newest}`);
    expect(html.match(/<li class="card" id="call-/g)).toHaveLength(20);
    expect(html).toContain('More calls are waiting than the 20 newest shown here');
  });
});

describe('per-call approval for an agent acting for nobody', () => {
  const AUTONOMOUS = `modes: [delegated, autonomous]
capabilities:
  per_call: [send_transfer]
autonomous:
  bootstrap: policy
  grants: [send_transfer]
rate_limits:
  unknown_host_registration: null
`;

  async function autonomousAgent(q: TestProtocol): Promise<Agent> {
    const { generateTestKey } = await import('../../helpers/keys.js');
    const reg = await q.register(await generateTestKey(), {
      mode: 'autonomous',
      capabilities: ['send_transfer'],
    });
    expect(reg.body.status).toBe('active');
    return { agent: reg.agent, agentId: reg.body.agent_id as string };
  }

  it('without approval.approvers the execute is refused and nothing is stored', async () => {
    const q = await startPerCallProxy({ policy: AUTONOMOUS, users: [ALICE] });
    try {
      const a = await autonomousAgent(q.p);
      const reply = await q.p.execute(a.agent, a.agentId, 'send_transfer', { to: 'acct-8', amount: 3 });
      expect(reply.status).toBe(403);
      expect(reply.body.error).toBe('capability_not_granted');
      expect(reply.body.message).toContain('approval.approvers');
      expect(await q.p.proxy.protocol.store.perCalls({ limit: 10 })).toHaveLength(0);
      expect(q.upstream.requests).toHaveLength(0);
    } finally {
      await q.close();
    }
  });

  it('with approvers it waits in each approver’s inbox, is announced by a webhook with a link only, and any of them may approve', async () => {
    const receiver = await TestUpstream.start();
    const q = await startPerCallProxy({
      policy: `${AUTONOMOUS}approval:\n  approvers: [${ALICE}, ${BOB}]\n`,
      users: [ALICE, BOB],
      config: `notifications:\n  webhook:\n    url: ${receiver.url}/hook\n    secret: webhook-secret-0123456789abcdef\n`,
    });
    try {
      const a = await autonomousAgent(q.p);
      const reply = await q.p.execute(a.agent, a.agentId, 'send_transfer', { to: 'acct-9', amount: 4 });
      expect(reply.status).toBe(202);
      const id = callIdOf(reply.body.status_url as string);
      await q.p.proxy.notifier?.whenIdle();
      const [hook] = receiver.received('/hook');
      const notice = JSON.parse(hook?.body.toString('utf8') ?? '{}');
      expect(notice).toMatchObject({
        type: 'approval.requested',
        event: 'per_call',
        approval: { id, kind: 'per_call', url: `${q.p.issuer}/approvals/calls/${id}` },
        user_id: null,
        capability: { name: 'send_transfer', method: 'POST' },
      });
      expect(JSON.stringify(notice)).not.toContain('acct-9');
      const bob = await PageClient.signIn(q.p.issuer, BOB);
      const aliceInbox = await PageClient.signIn(q.p.issuer, ALICE);
      expect((await aliceInbox.get('/approvals')).html).toContain(`call-${id}`);
      expect((await bob.approve(id, await softPasskey(q.p, BOB))).status).toBe(200);
      expect(q.upstream.received('/transfers')).toHaveLength(1);
    } finally {
      await q.close();
      await receiver.close();
    }
  });

  it('a signed-in user who is not a listed approver can neither see nor approve the call', async () => {
    const q = await startPerCallProxy({
      policy: `${AUTONOMOUS}approval:\n  approvers: [${ALICE}]\n`,
      users: [ALICE, BOB],
    });
    try {
      const a = await autonomousAgent(q.p);
      const reply = await q.p.execute(a.agent, a.agentId, 'send_transfer', { to: 'acct-10', amount: 4 });
      expect(reply.status).toBe(202);
      const id = callIdOf(reply.body.status_url as string);
      const bob = await PageClient.signIn(q.p.issuer, BOB);
      const page = await bob.get(`/approvals/calls/${id}`);
      expect(page.status).toBe(404);
      expect(page.html).not.toContain('acct-10');
      // The helper throws when a step of the page's flow (the passkey challenge) is refused.
      const approved = await bob.approve(id, await softPasskey(q.p, BOB)).then(
        (r) => r.status,
        (e: unknown) => String(e),
      );
      expect(approved).not.toBe(200);
      expect((await q.p.proxy.protocol.store.perCall(id))?.status).toBe('pending');
      expect(q.upstream.requests).toHaveLength(0);
    } finally {
      await q.close();
    }
  });

  it('a host nobody approved holds at most pending_hosts.max_open_approvals calls waiting, over all its agents', async () => {
    const q = await startPerCallProxy({
      policy: `${AUTONOMOUS}approval:\n  approvers: [${ALICE}]\npending_hosts:\n  max_open_approvals: 3\n`,
      users: [ALICE],
    });
    try {
      const { generateTestKey } = await import('../../helpers/keys.js');
      const host = await generateTestKey();
      const agents: Agent[] = [];
      for (const name of ['one', 'two']) {
        const reg = await q.p.register(host, { mode: 'autonomous', capabilities: ['send_transfer'], name });
        expect(reg.body.status).toBe('active');
        agents.push({ agent: reg.agent, agentId: reg.body.agent_id as string });
      }
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const a = agents[i % 2]!;
        statuses.push(
          (await q.p.execute(a.agent, a.agentId, 'send_transfer', { to: `acct-${i}`, amount: 1 })).status,
        );
      }
      expect(statuses).toEqual([202, 202, 202, 403, 403, 403]);
      const refused = await q.p.execute(agents[0]!.agent, agents[0]!.agentId, 'send_transfer', {
        to: 'x',
        amount: 1,
      });
      expect(refused.body.message).toContain('pending_hosts.max_open_approvals');
      expect(await q.p.proxy.protocol.store.perCalls({ status: 'pending', limit: 10 })).toHaveLength(3);
    } finally {
      await q.close();
    }
  });

  it("calls of agents of a host nobody approved take from the client's per_ip budget", async () => {
    const q = await startPerCallProxy({
      policy: `${AUTONOMOUS.replace('rate_limits:\n', 'rate_limits:\n  per_ip: 3/1h\n')}approval:\n  approvers: [${ALICE}]\n`,
      users: [ALICE],
    });
    try {
      const a = await autonomousAgent(q.p);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const reply = await q.p.execute(a.agent, a.agentId, 'send_transfer', { to: `acct-${i}`, amount: 1 });
        statuses.push(reply.status);
      }
      expect(statuses).toEqual([202, 202, 202, 429, 429]);
      expect(await q.p.proxy.protocol.store.perCalls({ status: 'pending', limit: 10 })).toHaveLength(3);
    } finally {
      await q.close();
    }
  });
});
