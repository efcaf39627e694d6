/**
 * What replicas on one PostgreSQL share beyond the Store contract (issue 13), on a real server:
 * the seen-jti ledger (§4.6), the shared rate budgets (§8.13; the same arithmetic as the
 * in-process RateLimiter, compared call for call), and the change notices (pg_notify on commit
 * only, once per re-run transaction; the listener's down and up).
 */
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../../src/clock.js';
import {
  ChangeSet,
  noticePayload,
  parseNotice,
  PgChangeListener,
  type ChangeNotice,
} from '../../../src/storage/pg-notify.js';
import {
  REPLICA_CLOCK_MARGIN_MS,
  sharedLimiter,
  sharedReplayLedger,
} from '../../../src/storage/pg-shared.js';
import { PgStore } from '../../../src/storage/pg-store.js';
import { localLimiter, RateLimiter, type RateTake } from '../../../src/util/rate-limit.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { NOW, agent, approval, host } from './store-fixtures.js';

let server: TestPostgres;
let template = '';
beforeAll(async () => {
  server = await startPostgres();
  await (await PgStore.open(server.url)).close();
  template = server.databaseOf(server.url);
});
afterAll(async () => server.stop());

let store: PgStore;
let url = '';
beforeEach(async () => {
  url = await server.createDatabase(template);
  store = await PgStore.open(url);
});
afterEach(async () => store.close());

const manualClock = (at = NOW): Clock & { now(): number; advance(ms: number): void } => {
  let now = at;
  return { now: () => now, advance: (ms) => (now += ms) };
};

const waitFor = async (what: string, ok: () => boolean, timeoutMs = 5000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('the seen-jti ledger (§4.6)', () => {
  it('records a jti once per identity: a second record, from any replica, is a replay', async () => {
    const other = await PgStore.open(url);
    try {
      const seen = { identity: 'agent:a1', jti: 'j1', expiresAt: NOW + 90_000 };
      expect(await store.shared.recordJti(seen)).toBe(true);
      expect(await other.shared.recordJti(seen)).toBe(false);
      expect(await store.shared.recordJti({ ...seen, identity: 'agent:a2' })).toBe(true);
      // At once from many connections: exactly one is first.
      const race = { identity: 'host:h1', jti: 'j2', expiresAt: NOW + 90_000 };
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? store : other).shared.recordJti(race)),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it('remembers a reused jti to the later expiry, and sweeps expired ones in bounded batches', async () => {
    const ledger = sharedReplayLedger(store.shared);
    expect(ledger.takeRestored()).toEqual([]);
    expect(await ledger.record({ identity: 'agent:a1', jti: 'j', expiresAt: NOW + 1000 })).toBe(true);
    expect(await ledger.record({ identity: 'agent:a1', jti: 'j', expiresAt: NOW + 5000 })).toBe(false);
    for (let i = 0; i < 5; i++) {
      await ledger.record({ identity: 'agent:a2', jti: `k${i}`, expiresAt: NOW + i });
    }
    // Kept a margin past its window: a replica whose clock is behind the sweeper's still accepts
    // the token that long, and must still find its jti.
    const M = REPLICA_CLOCK_MARGIN_MS;
    expect(await ledger.sweep(NOW + 4000, 10)).toBe(0);
    expect(await ledger.record({ identity: 'agent:a2', jti: 'k4', expiresAt: NOW + 4 })).toBe(false);
    expect(await ledger.sweep(NOW + M + 4000, 3)).toBe(3);
    expect(await ledger.sweep(NOW + M + 4000, 3)).toBe(2);
    expect(await ledger.sweep(NOW + M + 4000, 3)).toBe(0);
    // Extended to the later token's end: still a replay after the first one's window.
    expect(await ledger.record({ identity: 'agent:a1', jti: 'j', expiresAt: NOW + 5000 })).toBe(false);
    expect(await ledger.sweep(NOW + M + 5000, 10)).toBe(1);
    expect(await ledger.record({ identity: 'agent:a1', jti: 'j', expiresAt: NOW + 9000 })).toBe(true);
  });
});

describe('shared rate budgets (§8.13)', () => {
  const limit = { count: 3, windowMs: 60_000 };

  it('answers as the in-process limiter does, take after take, as time passes and limits change', async () => {
    const clock = manualClock();
    const shared = sharedLimiter(store.shared, clock);
    const local = localLimiter(new RateLimiter(clock));
    const script: [advanceMs: number, takes: RateTake[]][] = [
      [0, [{ key: 'a', limit }]],
      [0, [{ key: 'a', limit }]],
      [0, [{ key: 'a', limit }]],
      [0, [{ key: 'a', limit }]],
      [19_999, [{ key: 'a', limit }]],
      [1, [{ key: 'a', limit }]],
      [0, [{ key: 'a', limit }]],
      [5_000, [{ key: 'a', limit: { count: 10, windowMs: 10_000 } }]],
      [0, [{ key: 'a', limit: { count: 10, windowMs: 10_000 } }]],
      [120_000, [{ key: 'a', limit }]],
    ];
    for (const [advance, takes] of script) {
      clock.advance(advance);
      expect(await shared.take(takes)).toEqual(await local.take(takes));
      expect(await shared.check(takes[0]!)).toEqual(await local.check(takes[0]!));
    }
  });

  it('gives back as the in-process limiter does: one request, never past full, as time passes', async () => {
    const clock = manualClock();
    const shared = sharedLimiter(store.shared, clock);
    const local = localLimiter(new RateLimiter(clock));
    const take = { key: 'give:a', limit };
    const steps: ('take' | 'give' | number)[] = [
      'take',
      'take',
      'take',
      'take',
      'give',
      'take',
      'take',
      'give',
      'give',
      'give',
      'give',
      5_000,
      'take',
      'take',
      'take',
      'take',
    ];
    for (const step of steps) {
      if (typeof step === 'number') clock.advance(step);
      else if (step === 'give') {
        await shared.give(take);
        await local.give(take);
      } else expect(await shared.take([take])).toEqual(await local.take([take]));
      expect(await shared.check(take)).toEqual(await local.check(take));
    }
    await shared.give({ key: 'give:never', limit });
    expect(await store.shared.rateBucket('give:never')).toBeUndefined();
  });

  it('takes in order and stops at the first refusal: the budgets after it are untouched', async () => {
    const clock = manualClock();
    const shared = sharedLimiter(store.shared, clock);
    const one = { count: 1, windowMs: 60_000 };
    const takes = [
      { key: 'agent:a1', limit: one },
      { key: 'host:h1', limit },
      { key: 'user:u1', limit: { count: 10, windowMs: 60_000 } },
    ];
    expect(await shared.take(takes)).toEqual({ ok: true });
    // Refused at the agent: host and user untouched.
    expect(await shared.take(takes)).toEqual({ ok: false, refused: 0, retryAfterSec: 60 });
    expect(await shared.take(takes.slice(1))).toEqual({ ok: true });
    expect(await shared.take(takes.slice(1))).toEqual({ ok: true });
    // host:h1 is spent (three takes): refused there, user:u1 keeps the 7 of 10 it had left.
    expect(await shared.take(takes.slice(1))).toEqual({ ok: false, refused: 0, retryAfterSec: 20 });
    expect((await store.shared.rateBucket('user:u1'))?.credit).toBe(7 * 60_000);
    expect(await shared.take([])).toEqual({ ok: true });
  });

  it('admits exactly the budget when replicas take at once', async () => {
    const other = await PgStore.open(url);
    try {
      const clock = manualClock();
      const limiters = [sharedLimiter(store.shared, clock), sharedLimiter(other.shared, clock)];
      const verdicts = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          Promise.resolve(
            limiters[i % 2]!.take([{ key: 'cap:x', limit: { count: 25, windowMs: 3_600_000 } }]),
          ),
        ),
      );
      expect(verdicts.filter((v) => v.ok)).toHaveLength(25);
    } finally {
      await other.close();
    }
  });

  it('sweeps buckets that are full again (the same as none), at most limit at a time', async () => {
    const clock = manualClock();
    const shared = sharedLimiter(store.shared, clock);
    for (const key of ['a', 'b', 'c']) await shared.take([{ key, limit }]);
    // One take of 3 per minute refills in 20 s.
    expect(await store.shared.deleteFullRateBuckets(NOW + 19_999, 10)).toBe(0);
    expect(await store.shared.deleteFullRateBuckets(NOW + 20_000, 2)).toBe(2);
    expect(await store.shared.deleteFullRateBuckets(NOW + 20_000, 2)).toBe(1);
    expect(await store.shared.rateBucket('a')).toBeUndefined();
  });
});

describe('change notices between replicas', () => {
  it('names hosts, agents and grants (the caches) and approvals; nothing else is worth one', () => {
    const changes = new ChangeSet();
    expect(noticePayload('me', changes)).toBeUndefined();
    changes.approvals.add('apr_1');
    expect(parseNotice(noticePayload('me', changes))).toEqual({
      origin: 'me',
      cache: false,
      approvals: ['apr_1'],
    });
    for (let i = 0; i < 500; i++) changes.approvals.add(`apr_${'x'.repeat(20)}${i}`);
    changes.cache = true;
    expect(parseNotice(noticePayload('me', changes))).toEqual({
      origin: 'me',
      cache: true,
      approvals: 'all',
    });
    expect(parseNotice('not json')).toBeUndefined();
    expect(parseNotice('{"o":1}')).toBeUndefined();
  });

  /** A listener on `at` that records what it hears. */
  async function listen(
    origin = 'listener',
    at = url,
  ): Promise<{
    listener: PgChangeListener;
    notices: ChangeNotice[];
    events: string[];
  }> {
    const notices: ChangeNotice[] = [];
    const events: string[] = [];
    const listener = new PgChangeListener(
      { url: at, origin, connectionTimeoutMs: 1000, probeIntervalMs: 100, probeTimeoutMs: 300, retryMs: 100 },
      {
        onNotice: (n) => notices.push(n),
        onDown: () => events.push('down'),
        onUp: () => events.push('up'),
      },
    );
    await listener.start();
    return { listener, notices, events };
  }

  it('are sent as a write commits, once even when it is re-run, never when it rolls back', async () => {
    const { listener, notices } = await listen();
    try {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { name: '0' }));
        await tx.insertAgent(agent('a1', 'h1'));
        await tx.insertApproval(approval('p1', 'a1', 'h1'));
      });
      await waitFor('the first notice', () => notices.length === 1);
      expect(notices[0]).toEqual({ origin: store.origin, cache: true, approvals: [] });

      // Two writes that read then update the same row: one is re-run after a serialization failure.
      let attempts = 0;
      let arrived = 0;
      let bothRead!: () => void;
      const barrier = new Promise<void>((resolve) => (bothRead = resolve));
      const decide = (): Promise<void> =>
        store.write(async (tx) => {
          attempts++;
          const h = await tx.host('h1');
          if (++arrived === 2) bothRead();
          await Promise.race([barrier, new Promise((resolve) => setTimeout(resolve, 200))]);
          await tx.updateHost('h1', { name: String(Number(h!.name) + 1) });
          await tx.updateApproval('p1', { decidedAt: NOW });
        });
      await Promise.all([decide(), decide()]);
      expect(attempts).toBe(3);
      await waitFor('both decisions', () => notices.length === 3);

      await expect(
        store.write(async (tx) => {
          await tx.updateApproval('p1', { status: 'denied' });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      // A read-only write says nothing either; a later notice proves the rolled-back one never came.
      await store.write((tx) => tx.host('h1'));
      await store.write((tx) => tx.updateApproval('p1', { status: 'approved' }));
      await waitFor('the last notice', () => notices.length === 4);
      expect(notices.slice(1)).toEqual([
        { origin: store.origin, cache: true, approvals: ['p1'] },
        { origin: store.origin, cache: true, approvals: ['p1'] },
        { origin: store.origin, cache: false, approvals: ['p1'] },
      ]);
    } finally {
      await listener.close();
    }
  });

  it("skip the listener's own, and go down and up again with the database", async () => {
    const { listener, notices, events } = await listen(store.origin);
    try {
      expect(events).toEqual(['up']);
      expect(listener.listening).toBe(true);
      await store.write((tx) => tx.insertHost(host('h1')));
      await server.stopServer();
      await waitFor('down', () => events.includes('down'));
      expect(listener.listening).toBe(false);
      await server.startServer();
      await waitFor('up again', () => events.length === 3);
      expect(events).toEqual(['up', 'down', 'up']);
      expect(notices).toEqual([]);
    } finally {
      await server.startServer();
      await listener.close();
    }
  });

  it('goes down when its connection is cut, and listens again on a new one', async () => {
    const { listener, events } = await listen();
    try {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'agent-auth-proxy changes'",
        );
      } finally {
        await admin.end();
      }
      await waitFor('down, then up again', () => events.length === 3);
      expect(events).toEqual(['up', 'down', 'up']);
    } finally {
      await listener.close();
    }
  });

  it('goes down within probe interval + probe timeout when the connection goes silent', async () => {
    // A relay between the listener and the server that can stop passing bytes without closing
    // anything: a network partition, as the listener sees it.
    const relay = await silentRelay(server.port);
    const { listener, events } = await listen('listener', relay.url(url));
    try {
      expect(events).toEqual(['up']);
      const silent = Date.now();
      relay.silence();
      await waitFor('down', () => events.includes('down'), 3000);
      // probeIntervalMs 100 + probeTimeoutMs 300 here (500 + 1000 in production), and timer slack.
      expect(Date.now() - silent).toBeLessThan(100 + 300 + 600);
    } finally {
      await listener.close();
      relay.close();
    }
  });
});

/** A TCP relay to 127.0.0.1:`port` that `silence` turns into a black hole (connections stay open). */
async function silentRelay(
  port: number,
): Promise<{ url(of: string): string; silence(): void; close(): void }> {
  let silent = false;
  const sockets = new Set<Socket>();
  const relay = createServer((inbound) => {
    const outbound = connect(port, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.on('data', (chunk) => {
      if (!silent) outbound.write(chunk);
    });
    outbound.on('data', (chunk) => {
      if (!silent) inbound.write(chunk);
    });
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const relayPort = (relay.address() as AddressInfo).port;
  return {
    url: (of) => {
      const u = new URL(of);
      u.port = String(relayPort);
      return u.href;
    },
    silence: () => {
      silent = true;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      relay.close();
    },
  };
}
