/**
 * Issue 12: every execute writes one decision record (the `request` log line) with agent, host,
 * user, capability, allow/deny, the error code and reason, the trace id, total and upstream
 * durations, the client IP and, when the upstream call failed underneath, its cause (§11). The
 * W3C traceparent goes upstream with the agent's trace id under a new span id, or a new trace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { Reply, TestProtocol } from '../../helpers/protocol.js';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;
type Line = Record<string, unknown>;

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const FRESH_TRACE = /^[0-9a-f]{32}$/;

/** The one `request` line of a reply (by the request id the proxy sent back). */
function recordOf(lines: readonly string[], reply: Reply): Line {
  const id = reply.headers.get('x-request-id');
  const found = lines
    .map((l) => JSON.parse(l) as Line)
    .filter((l) => l.msg === 'request' && l.request_id === id);
  expect(found).toHaveLength(1);
  return found[0] as Line;
}

describe('the execute decision record', () => {
  const lines: string[] = [];
  let gw: Gateway;
  let agent: Agent;
  beforeAll(async () => {
    gw = await startGateway({ logSink: (line) => lines.push(line) });
    agent = await gw.p.activeAgent(['ping', { name: 'get_item', constraints: { itemId: { in: ['mine'] } } }]);
  });
  afterAll(() => gw.close());

  it('an allowed execute: who, what, allow, the trace id, durations, client IP', async () => {
    const reply = await gw.p.execute(
      agent.agent,
      agent.agentId,
      'ping',
      {},
      { headers: { traceparent: TRACEPARENT } },
    );
    expect(reply.status).toBe(200);
    const record = recordOf(lines, reply);
    expect(record).toMatchObject({
      level: 'info',
      route: 'POST /capability/execute',
      decision: 'allow',
      code: null,
      agent_id: agent.agentId,
      host_id: agent.hostId,
      user_id: 'alice',
      capability: 'ping',
      client_ip: '127.0.0.1',
      trace_id: TRACE_ID,
      status: 200,
      upstream_status: 200,
      upstream_cause: null,
    });
    expect(record.duration_ms).toEqual(expect.any(Number));
    expect(record.upstream_ms).toEqual(expect.any(Number));
    expect(Number(record.upstream_ms)).toBeLessThanOrEqual(Number(record.duration_ms));
    // The upstream sees the same trace under the proxy's own span.
    const sent = String(gw.upstream.requests.at(-1)?.headers.traceparent).split('-');
    expect(sent[1]).toBe(TRACE_ID);
    expect(sent[2]).toMatch(/^[0-9a-f]{16}$/);
    expect(sent[2]).not.toBe('00f067aa0ba902b7');
    expect(sent[3]).toBe('01');
  });

  it('without a grant: deny, capability_not_granted, with a reason and a trace id', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_items', {});
    expect(reply.status).toBe(403);
    const record = recordOf(lines, reply);
    expect(record).toMatchObject({
      decision: 'deny',
      code: 'capability_not_granted',
      step: 'authorize',
      agent_id: agent.agentId,
      host_id: agent.hostId,
      user_id: 'alice',
      capability: 'list_items',
      client_ip: '127.0.0.1',
      upstream_ms: null,
    });
    expect(record.reason).toEqual(expect.any(String));
    expect(record.trace_id).toMatch(FRESH_TRACE);
  });

  it('a JWT from a clock too far ahead (§8.2): deny, invalid_jwt, and the record says its iat is in the future', async () => {
    const now = Math.floor(gw.p.clock.now() / 1000);
    const reply = await gw.p.execute(
      agent.agent,
      agent.agentId,
      'ping',
      {},
      {
        extra: { iat: now + 40, exp: now + 60 },
      },
    );
    expect(reply.status).toBe(401);
    const record = recordOf(lines, reply);
    expect(record).toMatchObject({ decision: 'deny', code: 'invalid_jwt', client_ip: '127.0.0.1' });
    expect(record.reason).toMatch(/"iat" is in the future/);
  });

  it('a constraint violated: deny, constraint_violated, decided by the constraints step', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'theirs' });
    expect(reply.status).toBe(403);
    expect(recordOf(lines, reply)).toMatchObject({
      decision: 'deny',
      code: 'constraint_violated',
      step: 'constraints',
      capability: 'get_item',
      agent_id: agent.agentId,
      upstream_ms: null,
    });
  });

  it('no or an invalid traceparent: a fresh trace id, the same in the upstream call and the record', async () => {
    for (const headers of [{}, { traceparent: 'not-a-trace' }] as Record<string, string>[]) {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping', {}, { headers });
      expect(reply.status).toBe(200);
      const traceId = recordOf(lines, reply).trace_id;
      expect(traceId).toMatch(FRESH_TRACE);
      expect(traceId).not.toBe(TRACE_ID);
      expect(String(gw.upstream.requests.at(-1)?.headers.traceparent)).toMatch(
        new RegExp(`^00-${String(traceId)}-[0-9a-f]{16}-01$`),
      );
    }
  });

  it('a failed admin authentication: a warn line with the client IP and never the token', async () => {
    const guess = 'wrong-admin-token-7f3a9c';
    const reply = await gw.p.request('GET', '/admin/approvals', { token: guess });
    expect(reply.status).toBe(401);
    const warn = lines
      .map((l) => JSON.parse(l) as Line)
      .find(
        (l) => l.level === 'warn' && l.msg === 'authentication failed' && l.route === 'GET /admin/approvals',
      );
    expect(warn).toMatchObject({ client_ip: '127.0.0.1', error: 'invalid_token' });
    expect(lines.join('')).not.toContain(guess);
  });
});

describe('what a client sends is cut in the log line', () => {
  const lines: string[] = [];
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway({ logSink: (line) => lines.push(line) });
  });
  afterAll(() => gw.close());

  it('a 404 for a 15 KB path: path and reason at most 512 characters each, the line under 2 KB', async () => {
    const reply = await gw.p.request('GET', `/${'x'.repeat(15_000)}`);
    expect(reply.status).toBe(404);
    const line = lines.find((l) => l.includes(`"request_id":"${reply.headers.get('x-request-id')}"`)) ?? '';
    const record = JSON.parse(line) as Line;
    expect(record.msg).toBe('request');
    expect(String(record.path)).toHaveLength(513);
    expect(String(record.reason)).toHaveLength(513);
    expect(line.length).toBeLessThan(2048);
  });

  it('a hundred unknown capability names of 10 KB: the answer and the line name 20, each cut to 128', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['ping']);
    const names = Array.from({ length: 100 }, (_, i) => `${i}`.padEnd(10_000, 'n'));
    const reply = await gw.p.request('POST', '/agent/request-capability', {
      token: await gw.p.agentToken(agent, agentId),
      body: { capabilities: names },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_capabilities');
    expect(reply.body.invalid_capabilities).toHaveLength(20);
    expect(reply.body.message).toMatch(/and 80 more\.$/);
    expect(JSON.stringify(reply.body).length).toBeLessThan(8 * 1024);
    const line = lines.find((l) => l.includes(`"request_id":"${reply.headers.get('x-request-id')}"`)) ?? '';
    expect(line.length).toBeGreaterThan(0);
    expect(line.length).toBeLessThan(2048);
  });
});

describe('an upstream that refuses the connection', () => {
  it('the record names the cause: ECONNREFUSED', async () => {
    const lines: string[] = [];
    const gw = await startGateway({ api: '    retries: 0', logSink: (line) => lines.push(line) });
    try {
      const agent = await gw.p.activeAgent(['ping']);
      await gw.upstream.close(); // its port is closed from here on
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping', {});
      expect(reply.status).toBe(502);
      const record = recordOf(lines, reply);
      expect(record).toMatchObject({
        level: 'info',
        decision: 'deny',
        outcome: 'error',
        code: 'upstream_unavailable',
        step: 'upstream',
        upstream_cause: 'ECONNREFUSED',
        upstream_status: null,
        agent_id: agent.agentId,
        capability: 'ping',
        client_ip: '127.0.0.1',
      });
      expect(record.trace_id).toMatch(FRESH_TRACE);
      expect(record.upstream_ms).toEqual(expect.any(Number));
    } finally {
      await gw.p.close();
    }
  });
});
