/**
 * The sliding session TTL (§2.4) across replicas. Each replica keeps "last used" in memory and
 * writes it every few seconds, so a replica may not have heard of a use on another one when it
 * finds the session over. A use near the session's end is written at once, and the expiry is
 * stored only if the row, read again in its transaction, still finds it due. Before, a replica
 * stored `expired` for every replica 2 s after a use on the other (TTL 4 s, seen with two
 * processes); here two proxies in one process share a database, each on its own test clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startProtocol, TestClock, writePolicy, type TestProtocol } from '../../helpers/protocol.js';
import { writeConfig } from '../../helpers/browser.js';
import { PETSTORE } from '../../helpers/proxy.js';

const TTL_MS = 60_000;
let postgres: TestPostgres;
let a: TestProtocol | undefined;
let b: TestProtocol | undefined;
beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await postgres?.stop();
});

describe('the session TTL on two replicas (§2.4)', () => {
  it('a replica does not expire an agent used on the other within its TTL; idle past it, it does', async () => {
    const db = await postgres.createDatabase();
    // One issuer for both, as replicas behind one address have.
    const config = writeConfig(
      `server:\n  issuer: http://proxy.example\napis:\n  - spec: ${PETSTORE}\nmock_upstream: true\n`,
    );
    const policy = writePolicy(
      `lifetimes:\n  session_ttl: ${TTL_MS / 1000}s\nrate_limits:\n  unknown_host_registration: null\n`,
    );
    const start = Date.now();
    const clockA = new TestClock(start);
    const clockB = new TestClock(start);
    const advance = (ms: number): void => {
      clockA.advance(ms);
      clockB.advance(ms);
    };
    a = await startProtocol({ clock: clockA, overrides: { config, policy, db } });
    b = await startProtocol({ clock: clockB, overrides: { config, policy, db } });
    const fx = await a.activeAgent(['list_pets']);
    expect((await b.execute(fx.agent, fx.agentId, 'list_pets')).status).toBe(200); // B knows this use

    advance(50_000); // near the session's end: A's use is written at once
    expect((await a.execute(fx.agent, fx.agentId, 'list_pets')).status).toBe(200);
    advance(15_000); // 65 s after the use B knows of, 15 s after A's
    const onB = await b.execute(fx.agent, fx.agentId, 'list_pets');
    expect(onB.status, JSON.stringify(onB.body)).toBe(200);

    advance(TTL_MS + 1); // idle past the TTL: expired, on either replica
    const idle = await b.execute(fx.agent, fx.agentId, 'list_pets');
    expect(idle.status).toBe(403);
    expect(idle.body.error).toBe('agent_expired');
    expect((await a.execute(fx.agent, fx.agentId, 'list_pets')).body.error).toBe('agent_expired');
  }, 60_000);
});
