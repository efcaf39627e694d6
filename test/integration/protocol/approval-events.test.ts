/**
 * §10.10.2 real-time approval notification over real HTTP: the approval object's
 * notification_url is an SSE stream that sends one `event: approval` when the approval is
 * approved, denied or expires, then closes; it is the agent's (or, for a registration, the
 * host's) alone, and bounded. Expiry runs on timers driven by the test clock: no sleeping.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extendApproval } from '../../../src/protocol/approval-expiry.js';
import { expireApprovals } from '../../../src/protocol/approvals.js';
import { describeApproval, type DeviceRequest } from '../../../src/protocol/device.js';
import type { ApprovalRecord } from '../../../src/storage/types.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { ClockTimers, startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';

interface Stream {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
  /** Everything the stream sent until it closed. */
  readonly text: () => Promise<string>;
  readonly abort: () => void;
}

let p: TestProtocol;
let timers: ClockTimers;

beforeAll(async () => {
  const clock = new TestClock();
  timers = new ClockTimers(clock);
  p = await startProtocol({ clock, timers });
});
afterAll(() => p.close());

async function open(url: string, token: string | undefined): Promise<Stream> {
  const controller = new AbortController();
  const res = await fetch(url, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    signal: controller.signal,
  });
  const isStream = res.headers.get('content-type')?.startsWith('text/event-stream') ?? false;
  return {
    status: res.status,
    headers: res.headers,
    body: isStream ? undefined : await res.json(),
    text: () => res.text(),
    abort: () => controller.abort(),
  };
}

/** The one `approval` event of a finished stream, parsed. */
function approvalEvent(text: string): Record<string, unknown> {
  const blocks = text.split('\n\n').filter((b) => b.startsWith('event: approval'));
  expect(blocks).toHaveLength(1);
  const data = (blocks[0] as string).split('\n').find((l) => l.startsWith('data: ')) ?? '';
  return JSON.parse(data.slice('data: '.length)) as Record<string, unknown>;
}

/** A registration waiting for approval: a new host asks for list_pets. */
async function pendingRegistration(): Promise<{ host: TestKey; agentId: string; url: string; id: string }> {
  const host = await generateTestKey();
  const reg = await p.register(host, { capabilities: ['list_pets'] });
  expect(reg.status).toBe(200);
  const approval = await p.pendingApproval(reg.body.agent_id);
  return { host, agentId: reg.body.agent_id, url: reg.body.approval.notification_url, id: approval.id };
}

describe('GET notification_url (§10.10.2)', () => {
  it('is in every approval object, absolute on the issuer origin; polling §5.5 still works', async () => {
    const { host, agentId, url, id } = await pendingRegistration();
    expect(url).toBe(`${p.issuer}/agent/events/${id}`);
    const status = await p.status(host, agentId);
    expect(status.status).toBe(200);
    expect(status.body.approval.notification_url).toBe(url);
    const discovery = await p.request('GET', '/.well-known/agent-configuration');
    expect(discovery.body.extension_profiles).toContain('real-time-approval-notification');
  });

  it('sends one "approved" event to the host of a registration, then closes', async () => {
    const { host, agentId, url, id } = await pendingRegistration();
    const stream = await open(url, await p.hostToken(host));
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(stream.headers.get('cache-control')).toBe('no-store');
    const text = stream.text();
    expect((await p.admin('POST', `/admin/approvals/${id}/approve`, { user_id: 'alice' })).status).toBe(200);
    expect(approvalEvent(await text)).toEqual({
      approval_id: id,
      status: 'approved',
      kind: 'registration',
      agent_id: agentId,
      agent_status: 'active',
      agent_capability_grants: [{ capability: 'list_pets', status: 'active' }],
    });
    expect(p.proxy.approvalStreams.open).toBe(0);
  });

  it('sends "denied" to the agent of a capability request (agent JWT)', async () => {
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const asked = await p.request('POST', '/agent/request-capability', {
      token: await p.agentToken(agent, agentId),
      body: { capabilities: ['create_pet'] },
    });
    expect(asked.status).toBe(200);
    const url: string = asked.body.approval.notification_url;
    const stream = await open(url, await p.agentToken(agent, agentId, {}, url));
    expect(stream.status).toBe(200);
    const text = stream.text();
    const id = url.split('/').at(-1) as string;
    const denied = await p.admin('POST', `/admin/approvals/${id}/deny`, { reason: 'Not today' });
    expect(denied.status).toBe(200);
    expect(approvalEvent(await text)).toMatchObject({
      status: 'denied',
      kind: 'capability_request',
      agent_status: 'active',
      agent_capability_grants: [{ capability: 'create_pet', status: 'denied', reason: 'Not today' }],
    });
  });

  it('sends "expired" when the approval expires, though nobody sweeps (timer on the test clock)', async () => {
    const { host, agentId, url } = await pendingRegistration();
    const stream = await open(url, await p.hostToken(host));
    const text = stream.text();
    timers.advance(600_000);
    expect(approvalEvent(await text)).toMatchObject({ status: 'expired', agent_status: 'pending' });
    // The stream and a poll agree: the approval is gone from the status answer.
    expect((await p.status(host, agentId)).body.approval).toBeUndefined();
  });

  it('an extended approval keeps its stream open until the new expiry', async () => {
    const { host, url, id } = await pendingRegistration();
    const stream = await open(url, await p.hostToken(host));
    const text = stream.text();
    timers.advance(9 * 60_000);
    const ctx = p.proxy.protocol;
    const request = (await describeApproval(
      ctx,
      (await ctx.store.approval(id)) as ApprovalRecord,
    )) as DeviceRequest;
    await extendApproval(ctx, request, 'alice');
    timers.advance(2 * 60_000);
    expect(p.proxy.approvalStreams.open).toBe(1);
    timers.advance(9 * 60_000);
    expect(approvalEvent(await text)).toMatchObject({ approval_id: id, status: 'expired' });
  });

  it('an approval extended between the read and the write of an expiry sweep stays open (replicas whose clocks differ)', async () => {
    const { id } = await pendingRegistration();
    const ctx = p.proxy.protocol;
    const approval = (await ctx.store.approval(id)) as ApprovalRecord;
    const request = (await describeApproval(ctx, approval)) as DeviceRequest;
    // This replica's clock reaches the expiry; the other replica's is a second behind it.
    timers.clock.advance(approval.expiresAt - timers.clock.now());
    const store = ctx.store;
    const read = store.overdueApprovals.bind(store);
    store.overdueApprovals = async (now, limit) => {
      const due = await read(now, limit);
      expect(due.map((a) => a.id)).toContain(id);
      timers.clock.advance(-1000);
      await extendApproval(ctx, request, 'alice');
      timers.clock.advance(1000);
      return due;
    };
    try {
      await expireApprovals(ctx);
    } finally {
      store.overdueApprovals = read;
    }
    const after = (await ctx.store.approval(id)) as ApprovalRecord;
    expect(after.status).toBe('pending');
    expect(after.expiresAt).toBeGreaterThan(timers.clock.now());
    expect((await ctx.store.grants(approval.agentId)).map((g) => g.status)).toEqual(['pending']);
  });

  it('sends "expired" with the agent revoked when the agent is revoked meanwhile', async () => {
    const { host, agentId, url } = await pendingRegistration();
    const stream = await open(url, await p.hostToken(host));
    const text = stream.text();
    expect((await p.admin('POST', `/admin/agents/${agentId}/revoke`, {})).status).toBe(200);
    expect(approvalEvent(await text)).toMatchObject({ status: 'expired', agent_status: 'revoked' });
  });

  it('sends the event at once when the approval was already decided', async () => {
    const { host, url, id } = await pendingRegistration();
    await p.admin('POST', `/admin/approvals/${id}/approve`, { user_id: 'alice' });
    const stream = await open(url, await p.hostToken(host));
    expect(approvalEvent(await stream.text())).toMatchObject({ approval_id: id, status: 'approved' });
  });

  it('refuses a stranger: no token 401, another agent or host 404, like an unknown id', async () => {
    const { url } = await pendingRegistration();
    const none = await open(url, undefined);
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ error: 'authentication_required' });
    const other = await p.activeAgent(['list_pets']);
    const asAgent = await open(url, await p.agentToken(other.agent, other.agentId));
    expect({ status: asAgent.status, body: asAgent.body }).toMatchObject({
      status: 404,
      body: { error: 'approval_not_found', message: expect.any(String) },
    });
    const asHost = await open(url, await p.hostToken(other.host));
    expect(asHost.status).toBe(404);
    const unknown = await open(`${p.issuer}/agent/events/apr_nope`, await p.hostToken(other.host));
    expect(unknown.status).toBe(404);
    expect((unknown.body as { error: string }).error).toBe((asHost.body as { error: string }).error);
    const stranger = await generateTestKey();
    expect((await open(url, await p.hostToken(stranger))).status).toBe(401);
  });

  it('HEAD gets the stream headers and holds nothing open', async () => {
    const { host, url } = await pendingRegistration();
    const res = await fetch(url, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${await p.hostToken(host)}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(p.proxy.approvalStreams.open).toBe(0);
  });

  it('caps open streams per agent with a 429 JSON error; closing one frees its place', async () => {
    const { host, url } = await pendingRegistration();
    const streams: Stream[] = [];
    for (let i = 0; i < 4; i++) streams.push(await open(url, await p.hostToken(host)));
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    const refused = await open(url, await p.hostToken(host));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toMatchObject({
      error: 'rate_limited',
      message: expect.stringMatching(/4 notification streams/),
    });
    for (const s of streams) s.abort();
    await expect.poll(() => p.proxy.approvalStreams.open).toBe(0);
    const again = await open(url, await p.hostToken(host));
    expect(again.status).toBe(200);
    again.abort();
  });
});

describe('shutdown', () => {
  it('ends open notification streams with an error event, so the client falls back to polling', async () => {
    const clock = new TestClock();
    const own = await startProtocol({ clock, timers: new ClockTimers(clock) });
    const host = await generateTestKey();
    const reg = await own.register(host, { capabilities: ['list_pets'] });
    const res = await fetch(reg.body.approval.notification_url as string, {
      headers: { authorization: `Bearer ${await own.hostToken(host)}` },
    });
    expect(res.status).toBe(200);
    const text = res.text();
    await own.close();
    const sent = await text;
    expect(sent).toContain('event: error');
    expect(sent).toContain('"error":"temporarily_unavailable"');
    expect(sent).not.toContain('event: approval');
  });
});
