/**
 * Graceful shutdown (SIGTERM → close()) over real HTTP: readiness turns 503 at once (the listener
 * stays open, so a probe is answered, not refused), new requests get 503, a request already
 * running finishes and its activity record is on disk when close() resolves; a request that
 * outlasts server.shutdown_grace is cut off and close() still ends (timers advanced by hand).
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../../helpers/gateway.js';
import { ClockTimers, TestClock } from '../../helpers/protocol.js';
import { json } from '../../helpers/upstream.js';

async function gatewayHolding(): Promise<{
  g: Awaited<ReturnType<typeof startGateway>>;
  timers: ClockTimers;
  agent: Awaited<ReturnType<Awaited<ReturnType<typeof startGateway>>['p']['activeAgent']>>;
  arrived: Promise<void>;
  release: () => void;
}> {
  const clock = new TestClock();
  const timers = new ClockTimers(clock);
  const g = await startGateway({ clock, timers, config: 'server:\n  shutdown_grace: 10s\n' });
  const agent = await g.p.activeAgent(['list_items']);
  let release = (): void => undefined;
  let arrive = (): void => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  g.upstream.on('GET /v1/items', async (_req, res) => {
    arrive();
    await held;
    json(res, 200, [{ id: 'a' }]);
  });
  return { g, timers, agent, arrived, release };
}

describe('graceful shutdown', () => {
  it('unready first, new requests refused with 503, the running one finishes and is recorded, then close ends', async () => {
    const { g, agent, arrived, release } = await gatewayHolding();
    const url = g.p.proxy.url;
    const running = g.p.execute(agent.agent, agent.agentId, 'list_items');
    await arrived;
    const closing = g.p.close();

    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const refused = await g.p.execute(agent.agent, agent.agentId, 'list_items');
    expect(refused.status).toBe(503);
    expect(refused.body.error).toBe('temporarily_unavailable');
    expect(refused.headers.get('connection')).toBe('close');
    expect(g.upstream.requests).toHaveLength(1);

    release();
    const done = await running;
    expect(done.status).toBe(200);
    expect(done.body.data).toEqual([{ id: 'a' }]);
    await closing;
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    await g.upstream.close();

    // The finished execution's record was flushed before close() resolved.
    const db = new Database(g.db, { readonly: true });
    try {
      const rows = db
        .prepare("SELECT outcome FROM activity WHERE agent_id = ? AND capability = 'list_items'")
        .all(agent.agentId) as { outcome: string }[];
      expect(rows.map((r) => r.outcome)).toContain('success');
    } finally {
      db.close();
    }
  });

  it('a request that outlasts server.shutdown_grace is cut off, and close still ends', async () => {
    const { g, timers, agent, arrived, release } = await gatewayHolding();
    const running = g.p.execute(agent.agent, agent.agentId, 'list_items').then(
      (r) => r.status,
      () => 'connection closed',
    );
    await arrived;
    const closing = g.p.close();
    let closed = false;
    void closing.then(() => (closed = true));
    timers.advance(9_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    timers.advance(1_000);
    await closing;
    expect(await running).toBe('connection closed');
    release();
    await g.upstream.close();
    // The call reached the upstream: the audit log says so, although it was cut off (§11).
    const db = new Database(g.db, { readonly: true });
    try {
      const rows = db
        .prepare("SELECT outcome FROM activity WHERE agent_id = ? AND capability = 'list_items'")
        .all(agent.agentId) as { outcome: string }[];
      expect(rows).toHaveLength(1);
    } finally {
      db.close();
    }
  });
});
