/**
 * The notification stream bounds (README "Bounds": 4 per agent, 32 per host, 1000 in total) hold
 * for clients that go away before their stream starts. On PostgreSQL the owner lookup waits on
 * the pool; a client that resets its connection meanwhile has closed before the stream listens
 * for 'close'. Before the fix, each such stream kept its slot and timers until the approval was
 * decided or expired: four resets locked the agent's real client out (429).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import {
  ClockTimers,
  startProtocol,
  TestClock,
  writePolicy,
  type TestProtocol,
} from '../../helpers/protocol.js';

let postgres: TestPostgres;
let p: TestProtocol | undefined;
beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  await p?.close();
  await postgres?.stop();
});

/** Sends the request, then resets the connection at once (no answer awaited). */
function openAndAbort(base: string, path: string, token: string): Promise<void> {
  const url = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
        () => {
          socket.resetAndDestroy();
          resolve();
        },
      );
    });
    socket.on('error', () => resolve());
  });
}

describe('notification stream slots of clients that went away', () => {
  it('a reset connection does not keep a stream slot', async () => {
    const clock = new TestClock();
    p = await startProtocol({
      clock,
      timers: new ClockTimers(clock),
      overrides: {
        db: await postgres.createDatabase(),
        policy: writePolicy('rate_limits:\n  unknown_host_registration: null\n  per_agent: null\n'),
      },
    });
    const proto = p;
    const { agent, agentId } = await proto.activeAgent(['list_pets']);
    const asked = await proto.request('POST', '/agent/request-capability', {
      token: await proto.agentToken(agent, agentId),
      body: { capabilities: ['create_pet'] },
    });
    expect(asked.status).toBe(200);
    const url: string = asked.body.approval.notification_url;
    const path = new URL(url).pathname;

    for (let i = 0; i < 12 && proto.proxy.approvalStreams.open < 4; i++) {
      await openAndAbort(proto.proxy.url, path, await proto.agentToken(agent, agentId, {}, url));
      await new Promise((r) => setTimeout(r, 100));
    }
    // Nobody is listening any more: a real client must get its stream (HEAD: the same route and
    // slot, answered with the headers only, so the probe never hangs once this is fixed).
    const real = await proto.request('HEAD', path, {
      token: await proto.agentToken(agent, agentId, {}, url),
    });
    expect(proto.proxy.approvalStreams.open).toBe(0);
    expect(real.status).toBe(200);
  }, 60_000);
});
