/**
 * Fair share (issue 10 class 7, §8.13): caps on upstream calls in flight per agent, per host and
 * in total (`rate_limits.in_flight_*`), and per-capability rate limits per agent, host and user
 * (`rate_limits.per_capability`). Over real HTTP against a recording upstream whose slow calls
 * are held until the test lets them go, so one agent can be made to hold its slots for as long as
 * the test needs, without sleeps. Every refusal is a 429 `rate_limited` with `Retry-After`, and
 * the recording upstream proves the refused call was never made. The no-leak tests run each
 * failure path (upstream error, timeout, agent disconnect, stream end) more times than the cap,
 * then show the agent can still hold its whole cap at once, and not one call more.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import type { Reply, TestProtocol } from '../../helpers/protocol.js';
import { json, type RecordedRequest } from '../../helpers/upstream.js';

const PER_AGENT = 2;
const PER_HOST = 3;
const TOTAL = 5;
const FAILURES = 3 * PER_AGENT;

/** Upstream calls that wait until the test lets them go; `arrived(n)` resolves once n have come in. */
class Held {
  private readonly waiting: (() => void)[] = [];
  private count = 0;
  private readonly watchers: { n: number; resolve: () => void }[] = [];

  /** A handler that holds the call, then answers with `respond` (unless the caller went away). */
  handler(
    respond: (req: RecordedRequest, res: ServerResponse) => void = (_q, res) => json(res, 200, { ok: true }),
  ) {
    return async (req: RecordedRequest, res: ServerResponse): Promise<void> => {
      await this.hold();
      if (!res.destroyed) respond(req, res);
    };
  }

  hold(): Promise<void> {
    const released = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.count++;
    for (const w of this.watchers.filter((w) => this.count >= w.n)) w.resolve();
    return released;
  }

  arrived(n: number): Promise<void> {
    if (this.count >= n) return Promise.resolve();
    return new Promise((resolve) => this.watchers.push({ n, resolve }));
  }

  releaseAll(): void {
    for (const go of this.waiting.splice(0)) go();
  }
}

/** Waits (bounded) for a condition the proxy reaches on its own, e.g. a slot given back. */
async function until(what: string, condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

function expectRateLimited(reply: Reply, retryAfter: number): void {
  expect(reply.status).toBe(429);
  expect(reply.body).toEqual({ error: 'rate_limited', message: expect.any(String) });
  expect(reply.headers.get('retry-after')).toBe(String(retryAfter));
}

interface Agent {
  agent: TestKey;
  agentId: string;
  hostId: string;
}

/** An active agent under `host` (a linked host), granted `capabilities` through an approval. */
async function agentUnder(
  p: TestProtocol,
  host: { key: TestKey; hostId: string },
  capabilities: string[],
): Promise<Agent> {
  const reg = await p.register(host.key, { capabilities });
  if (reg.status !== 200) throw new Error(`registration failed: ${JSON.stringify(reg.body)}`);
  const approval = await p.pendingApproval(reg.body.agent_id);
  if (approval) await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
  return { agent: reg.agent, agentId: reg.body.agent_id, hostId: host.hostId };
}

async function newAgent(p: TestProtocol, capabilities: string[], userId = 'alice'): Promise<Agent> {
  const { agent, agentId, hostId } = await p.activeAgent(capabilities, { userId });
  return { agent, agentId, hostId };
}

describe('fair share: caps on upstream calls in flight (rate_limits.in_flight_*)', () => {
  let gw: Gateway;
  let held: Held;
  const CAPS = ['get_item', 'list_items', 'stream_events'];

  beforeAll(async () => {
    gw = await startGateway({
      // list_items times out quickly: the timeout path is one of the ways a call can end.
      api: ['    retries: 0', '    operations:', '      list_items:', '        timeout: 150ms'].join('\n'),
      policy: [
        'rate_limits:',
        '  unknown_host_registration: null',
        `  in_flight_per_agent: ${PER_AGENT}`,
        `  in_flight_per_host: ${PER_HOST}`,
        `  in_flight_total: ${TOTAL}`,
      ].join('\n'),
    });
  });
  afterEach(async () => {
    held.releaseAll();
    await until('every slot is back', () => gw.p.proxy.inFlight.count() === 0);
    gw.upstream.reset();
  });
  afterAll(() => gw.close());

  const inFlight = (agentId: string): number => gw.p.proxy.inFlight.count({ agentId });

  /** Starts `n` calls of `who` to GET /items/{id} that the upstream holds; resolves once all arrived. */
  async function holdCalls(who: Agent, id: string, n: number): Promise<Promise<Reply>[]> {
    const before = gw.upstream.received(`/v1/items/${id}`).length;
    const calls = Array.from({ length: n }, () =>
      gw.p.execute(who.agent, who.agentId, 'get_item', { itemId: id }),
    );
    await held.arrived(before + n);
    return calls;
  }

  it('an agent holding its cap of slow calls gets 429 rate_limited with Retry-After, the extra call never reaches the upstream, and an agent of another host still executes', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/slow-a', held.handler());
    const a = await newAgent(gw.p, CAPS);
    const b = await newAgent(gw.p, CAPS, 'bob');
    const calls = await holdCalls(a, 'slow-a', PER_AGENT);

    expectRateLimited(await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'slow-a' }), 1);
    expect(gw.upstream.received('/v1/items/slow-a')).toHaveLength(PER_AGENT);
    // Another agent, of another host and user, is not starved.
    const other = await gw.p.execute(b.agent, b.agentId, 'get_item', { itemId: 'fast' });
    expect(other.status).toBe(200);

    held.releaseAll();
    for (const reply of await Promise.all(calls)) expect(reply.status).toBe(200);
    await until('a has no call in flight', () => inFlight(a.agentId) === 0);
    expect((await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'fast' })).status).toBe(200);
  });

  it('a host cannot spread slow calls over several agents past in_flight_per_host; an agent of another host still executes', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/slow-h', held.handler());
    const host = await gw.p.linkedHost('carol');
    const a1 = await agentUnder(gw.p, host, CAPS);
    const a2 = await agentUnder(gw.p, host, CAPS);
    const a3 = await agentUnder(gw.p, host, CAPS);
    const b = await newAgent(gw.p, CAPS, 'dave');
    const calls = [...(await holdCalls(a1, 'slow-h', PER_AGENT)), ...(await holdCalls(a2, 'slow-h', 1))];

    // a2 and a3 are under their own caps, but their host has PER_HOST calls running.
    expectRateLimited(await gw.p.execute(a2.agent, a2.agentId, 'get_item', { itemId: 'slow-h' }), 1);
    expectRateLimited(await gw.p.execute(a3.agent, a3.agentId, 'get_item', { itemId: 'slow-h' }), 1);
    expect(gw.upstream.received('/v1/items/slow-h')).toHaveLength(PER_HOST);
    expect((await gw.p.execute(b.agent, b.agentId, 'get_item', { itemId: 'fast' })).status).toBe(200);

    held.releaseAll();
    for (const reply of await Promise.all(calls)) expect(reply.status).toBe(200);
  });

  it('in_flight_total bounds all hosts together: a new host is refused while the proxy is full, and served once calls finish', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/slow-t', held.handler());
    const host = await gw.p.linkedHost('erin');
    const a1 = await agentUnder(gw.p, host, CAPS);
    const a2 = await agentUnder(gw.p, host, CAPS);
    const b = await newAgent(gw.p, CAPS, 'frank');
    const c = await newAgent(gw.p, CAPS, 'grace');
    const calls = [
      ...(await holdCalls(a1, 'slow-t', PER_AGENT)),
      ...(await holdCalls(a2, 'slow-t', PER_HOST - PER_AGENT)),
      ...(await holdCalls(b, 'slow-t', TOTAL - PER_HOST)),
    ];
    expect(gw.p.proxy.inFlight.count()).toBe(TOTAL);
    expectRateLimited(await gw.p.execute(c.agent, c.agentId, 'get_item', { itemId: 'fast' }), 1);
    expect(gw.upstream.received('/v1/items/fast')).toHaveLength(0);

    held.releaseAll();
    await Promise.all(calls);
    await until('the proxy has room', () => gw.p.proxy.inFlight.count() === 0);
    expect((await gw.p.execute(c.agent, c.agentId, 'get_item', { itemId: 'fast' })).status).toBe(200);
  });

  it('refused calls hold no slot: hammering at the cap does not lock the agent out once its calls finish', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/slow-r', held.handler());
    const a = await newAgent(gw.p, CAPS);
    const calls = await holdCalls(a, 'slow-r', PER_AGENT);
    const refused = await Promise.all(
      Array.from({ length: 20 }, () => gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'slow-r' })),
    );
    for (const reply of refused) expectRateLimited(reply, 1);
    expect(inFlight(a.agentId)).toBe(PER_AGENT);
    held.releaseAll();
    await Promise.all(calls);
    await until('a has no call in flight', () => inFlight(a.agentId) === 0);
    const again = await holdCalls(a, 'slow-r', PER_AGENT);
    held.releaseAll();
    for (const reply of await Promise.all(again)) expect(reply.status).toBe(200);
  });

  /**
   * After the failures, the agent can still hold PER_AGENT calls at once (no slot leaked), and the
   * cap still holds (the failures did not free slots they never held).
   */
  async function expectFullCapLeft(a: Agent): Promise<void> {
    await until('a has no call in flight', () => inFlight(a.agentId) === 0);
    held = new Held();
    gw.upstream.on('GET /v1/items/after', held.handler());
    const calls = await holdCalls(a, 'after', PER_AGENT);
    expectRateLimited(await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'after' }), 1);
    held.releaseAll();
    for (const reply of await Promise.all(calls)) expect(reply.status).toBe(200);
  }

  it('no slot leaks after upstream errors: after many 502s the agent still runs its whole cap at once', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/boom', (_req, res) => json(res, 500, { oops: true }));
    const a = await newAgent(gw.p, CAPS);
    for (let i = 0; i < FAILURES; i++) {
      const reply = await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'boom' });
      expect(reply.status).toBe(502);
      expect(reply.body.error).toBe('upstream_error');
    }
    await expectFullCapLeft(a);
  });

  it('no slot leaks after upstream timeouts: after many 504s the agent still runs its whole cap at once', async () => {
    held = new Held();
    // Never answers: list_items times out after 150 ms.
    gw.upstream.on('GET /v1/items', () => held.hold());
    const a = await newAgent(gw.p, CAPS);
    for (let round = 0; round < FAILURES / PER_AGENT; round++) {
      const replies = await Promise.all(
        Array.from({ length: PER_AGENT }, () => gw.p.execute(a.agent, a.agentId, 'list_items', {})),
      );
      for (const reply of replies) expect(reply.body.error).toBe('upstream_timeout');
    }
    await expectFullCapLeft(a);
  });

  it('no slot leaks after the agent disconnects mid-call: the slot comes back and the cap is whole again', async () => {
    held = new Held();
    gw.upstream.on('GET /v1/items/hang', held.handler());
    const a = await newAgent(gw.p, CAPS);
    for (let i = 0; i < FAILURES / PER_AGENT; i++) {
      const aborts = Array.from({ length: PER_AGENT }, () => new AbortController());
      const before = gw.upstream.received('/v1/items/hang').length;
      const calls = aborts.map(async (abort) => {
        const token = await gw.p.agentToken(a.agent, a.agentId, {}, gw.p.executeLocation);
        return fetch(`${gw.p.proxy.url}/capability/execute`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ capability: 'get_item', arguments: { itemId: 'hang' } }),
          signal: abort.signal,
        }).then(
          () => 'answered',
          () => 'aborted',
        );
      });
      await held.arrived(before + PER_AGENT);
      expect(inFlight(a.agentId)).toBe(PER_AGENT);
      for (const abort of aborts) abort.abort();
      expect(await Promise.all(calls)).toEqual(aborts.map(() => 'aborted'));
      await until('the disconnected calls give their slots back', () => inFlight(a.agentId) === 0);
    }
    await expectFullCapLeft(a);
  });

  it('open SSE streams hold slots: a third stream is refused; a slot comes back when the agent disconnects and when the upstream ends the stream', async () => {
    held = new Held();
    const ends: (() => void)[] = [];
    gw.upstream.on('GET /v1/events', async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      await new Promise<void>((resolve) => ends.push(resolve));
      res.end();
    });
    const a = await newAgent(gw.p, CAPS);
    const open = async (): Promise<Response> => {
      const token = await gw.p.agentToken(a.agent, a.agentId, {}, gw.p.executeLocation);
      return fetch(`${gw.p.proxy.url}/capability/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ capability: 'stream_events', arguments: {} }),
      });
    };
    const s1 = await open();
    const s2 = await open();
    expect([s1.status, s2.status]).toEqual([200, 200]);
    expect(s1.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(inFlight(a.agentId)).toBe(PER_AGENT);
    const s3 = await open();
    expect(s3.status).toBe(429);
    expect(s3.headers.get('retry-after')).toBe('1');
    expect(((await s3.json()) as { error: string }).error).toBe('rate_limited');
    expect(gw.upstream.received('/v1/events')).toHaveLength(PER_AGENT);

    // The agent goes away from one stream: its slot comes back.
    await s1.body?.cancel();
    await until('the cancelled stream gives its slot back', () => inFlight(a.agentId) === 1);
    // The upstream ends the other: the relay ends with `done` and the slot comes back.
    for (const end of ends.splice(0)) end();
    const rest = await s2.text();
    expect(rest).toContain('event: done');
    await until('the ended stream gives its slot back', () => inFlight(a.agentId) === 0);
    await expectFullCapLeft(a);
  });
});

describe('per-capability rate limits per agent, host and user (rate_limits.per_capability)', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({
      policy: [
        'rate_limits:',
        '  unknown_host_registration: null',
        '  per_capability:',
        '    get_item: {per_agent: 2/1m}',
        '    list_items: {per_user: 3/1m}',
        '    delete_item: {per_host: 2/1m}',
        '    ping: {per_agent: 1/1m, global: 3/1m}',
        '    stream_events: 2/1m',
      ].join('\n'),
    });
  });
  afterAll(() => gw.close());

  it('per_agent: one agent using up its own limit on a capability gets 429 with Retry-After; another agent still executes it', async () => {
    const a = await newAgent(gw.p, ['get_item']);
    const b = await newAgent(gw.p, ['get_item'], 'bob');
    for (let i = 0; i < 2; i++) {
      expect((await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'x' })).status).toBe(200);
    }
    const refused = await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'x' });
    expectRateLimited(refused, 30);
    expect(refused.body.message).toBe(`Agent ${a.agentId} on get_item exceeded 2 requests per 60 s.`);
    expect(gw.upstream.received('/v1/items/x')).toHaveLength(2);
    expect((await gw.p.execute(b.agent, b.agentId, 'get_item', { itemId: 'y' })).status).toBe(200);
    gw.p.clock.advance(30_000);
    expect((await gw.p.execute(a.agent, a.agentId, 'get_item', { itemId: 'x' })).status).toBe(200);
  });

  it('per_user: agents of one user cannot escape the limit by registering under several hosts; another user is unaffected', async () => {
    const a1 = await newAgent(gw.p, ['list_items'], 'ursula');
    const a2 = await newAgent(gw.p, ['list_items'], 'ursula');
    const other = await newAgent(gw.p, ['list_items'], 'victor');
    expect(a1.hostId).not.toBe(a2.hostId);
    for (const who of [a1, a2, a1]) {
      expect((await gw.p.execute(who.agent, who.agentId, 'list_items', {})).status).toBe(200);
    }
    expectRateLimited(await gw.p.execute(a2.agent, a2.agentId, 'list_items', {}), 20);
    expect((await gw.p.execute(other.agent, other.agentId, 'list_items', {})).status).toBe(200);
  });

  it('per_host: agents of one host share the limit; an agent of another host is unaffected', async () => {
    const host = await gw.p.linkedHost('walter');
    const a1 = await agentUnder(gw.p, host, ['delete_item']);
    const a2 = await agentUnder(gw.p, host, ['delete_item']);
    const other = await newAgent(gw.p, ['delete_item'], 'walter');
    expect((await gw.p.execute(a1.agent, a1.agentId, 'delete_item', { itemId: 'd1' })).status).toBe(200);
    expect((await gw.p.execute(a2.agent, a2.agentId, 'delete_item', { itemId: 'd2' })).status).toBe(200);
    expectRateLimited(await gw.p.execute(a2.agent, a2.agentId, 'delete_item', { itemId: 'd3' }), 30);
    expect(gw.upstream.received('/v1/items/d3')).toHaveLength(0);
    expect((await gw.p.execute(other.agent, other.agentId, 'delete_item', { itemId: 'd4' })).status).toBe(
      200,
    );
  });

  it('an agent refused by its own per_agent limit does not drain the global limit it shares with everyone', async () => {
    const noisy = await newAgent(gw.p, ['ping'], 'xena');
    expect((await gw.p.execute(noisy.agent, noisy.agentId, 'ping', {})).status).toBe(200);
    for (let i = 0; i < 10; i++)
      expectRateLimited(await gw.p.execute(noisy.agent, noisy.agentId, 'ping', {}), 60);
    // global 3/1m: noisy used one; two others still get theirs, then the global bucket is empty.
    const b = await newAgent(gw.p, ['ping'], 'yves');
    const c = await newAgent(gw.p, ['ping'], 'zoe');
    expect((await gw.p.execute(b.agent, b.agentId, 'ping', {})).status).toBe(200);
    expect((await gw.p.execute(c.agent, c.agentId, 'ping', {})).status).toBe(200);
    const d = await newAgent(gw.p, ['ping'], 'zack');
    const everyone = await gw.p.execute(d.agent, d.agentId, 'ping', {});
    expectRateLimited(everyone, 20);
    expect(everyone.body.message).toBe('Capability ping exceeded 3 requests per 60 s.');
    expect(gw.upstream.received('/v1/public/ping')).toHaveLength(3);
  });

  it('a plain string still means one bucket over all agents', async () => {
    const a = await newAgent(gw.p, ['stream_events'], 'amy');
    const b = await newAgent(gw.p, ['stream_events'], 'ben');
    gw.upstream.on('GET /v1/events', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: one\n\n');
    });
    expect((await gw.p.execute(a.agent, a.agentId, 'stream_events', {})).status).toBe(200);
    expect((await gw.p.execute(b.agent, b.agentId, 'stream_events', {})).status).toBe(200);
    expectRateLimited(await gw.p.execute(b.agent, b.agentId, 'stream_events', {}), 30);
  });
});
