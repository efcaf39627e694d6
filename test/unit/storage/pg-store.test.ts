/**
 * What only the PostgreSQL store has (issue 13): a database that goes away and comes back,
 * replicas migrating at once, a schema newer than the proxy, serialization conflicts re-run (and
 * what happens without the re-run), and a transaction PostgreSQL aborted that `fn` did not notice.
 * The behaviour every store shares is in store-contract.test.ts.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toProtocolError, UserError } from '../../../src/errors.js';
import { createLogger } from '../../../src/log.js';
import { ExecutionLog } from '../../../src/protocol/execution-log.js';
import { StoreInputError, StoreUnavailableError } from '../../../src/storage/errors.js';
import { openPool } from '../../../src/storage/pg-pool.js';
import { PG_MIGRATIONS } from '../../../src/storage/pg-schema.js';
import { CHANGES_CHANNEL } from '../../../src/storage/pg-notify.js';
import { PgStore } from '../../../src/storage/pg-store.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { activity, agent, host, NOW } from './store-fixtures.js';

let server: TestPostgres;
beforeAll(async () => {
  server = await startPostgres();
});
afterAll(async () => server.stop());

async function sql<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgreSQL store', () => {
  it('says the database is unavailable when nothing answers at its address', async () => {
    const url = new URL(await server.createDatabase());
    url.port = '1'; // nothing listens there
    await expect(PgStore.open(url.href, { connectionTimeoutMs: 1000 })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
  });

  it('fails with StoreUnavailableError while the database is down, and recovers once it is back', async () => {
    const poolErrors: Error[] = [];
    const store = await PgStore.open(await server.createDatabase(), {
      connectionTimeoutMs: 1000,
      onPoolError: (err) => poolErrors.push(err),
    });
    try {
      await store.write((tx) => tx.insertHost(host('h1')));
      await server.stopServer();
      await expect(store.host('h1')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(
        store.write((tx) => tx.insertHost(host('h2', { thumbprint: 'tp-h2' }))),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.appendActivities([activity()])).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await server.startServer();
      await store.ping();
      expect((await store.host('h1'))?.id).toBe('h1');
      await store.write((tx) => tx.insertHost(host('h2', { thumbprint: 'tp-h2' })));
      expect(await store.countHosts('active')).toBe(2);
      // The idle connection the shutdown closed was reported, not thrown at the process.
      expect(poolErrors.length).toBeGreaterThan(0);
    } finally {
      await server.startServer();
      await store.close();
    }
  });

  it('a database stopped in the middle of a write fails it whole, and the process goes on', async () => {
    // Regression: a checked-out connection that the server closes emits 'error'; without a
    // listener that was an uncaught exception (vitest reports it, failing this test).
    const store = await PgStore.open(await server.createDatabase(), { connectionTimeoutMs: 1000 });
    try {
      await expect(
        store.write(async (tx) => {
          await tx.insertHost(host('h1'));
          await server.stopServer();
          await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
        }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      await server.startServer();
      expect(await store.host('h1')).toBeUndefined();
      expect(await store.countHosts('active')).toBe(0);
    } finally {
      await server.startServer();
      await store.close();
    }
  });

  it('migrates once when several replicas open a new database at the same moment', async () => {
    const url = await server.createDatabase();
    const stores = await Promise.all(Array.from({ length: 4 }, () => PgStore.open(url, { poolSize: 2 })));
    await Promise.all(stores.map((s) => s.close()));
    const rows = await sql<{ version: number }>(
      url,
      'SELECT version FROM schema_migrations ORDER BY version',
    );
    expect(rows.map((r) => r.version)).toEqual(PG_MIGRATIONS.map((_, i) => i + 1));
    // Opening again finds nothing to do.
    await (await PgStore.open(url)).close();
    expect(await sql(url, 'SELECT version FROM schema_migrations')).toHaveLength(PG_MIGRATIONS.length);
  });

  it('refuses a database a newer proxy migrated', async () => {
    const url = await server.createDatabase();
    await (await PgStore.open(url)).close();
    await sql(
      url,
      `INSERT INTO schema_migrations (version, applied_at) VALUES (${PG_MIGRATIONS.length + 1}, 0)`,
    );
    const opening = PgStore.open(url);
    await expect(opening).rejects.toBeInstanceOf(UserError);
    await expect(opening).rejects.toThrow(/newer than this proxy supports/);
  });

  it('refuses options that cannot work', async () => {
    const url = await server.createDatabase();
    await expect(PgStore.open(url, { poolSize: 0 })).rejects.toThrow(/poolSize must be an integer/);
    await expect(PgStore.open(url, { statementTimeoutMs: 1.5 })).rejects.toThrow(/statementTimeoutMs/);
  });

  describe('serialization conflicts', () => {
    /** Two writes that both read the host, wait for each other, then both update it. */
    async function collide(store: PgStore): Promise<PromiseSettledResult<void>[]> {
      let arrived = 0;
      let bothRead!: () => void;
      const barrier = new Promise<void>((resolve) => (bothRead = resolve));
      const increment = (): Promise<void> =>
        store.write(async (tx) => {
          const h = await tx.host('h1');
          if (++arrived === 2) bothRead();
          await Promise.race([barrier, new Promise((resolve) => setTimeout(resolve, 200))]);
          await tx.updateHost('h1', { name: String(Number(h!.name) + 1) });
        });
      return Promise.allSettled([increment(), increment()]);
    }

    it('are re-run: both increments land', async () => {
      const store = await PgStore.open(await server.createDatabase());
      try {
        await store.write((tx) => tx.insertHost(host('h1', { name: '0' })));
        const outcomes = await collide(store);
        expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
        expect((await store.host('h1'))?.name).toBe('2');
      } finally {
        await store.close();
      }
    });

    it('without re-runs, one of them fails as the database being unavailable (503, not 500) and changes nothing', async () => {
      const store = await PgStore.open(await server.createDatabase(), { serializationRetries: 0 });
      try {
        await store.write((tx) => tx.insertHost(host('h1', { name: '0' })));
        const outcomes = await collide(store);
        const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
        expect(failed).toHaveLength(1);
        // Rolled back whole, and the same request may succeed a moment later: retry, not a bug.
        expect(failed[0]!.reason).toBeInstanceOf(StoreUnavailableError);
        expect(((failed[0]!.reason as Error).cause as { code?: string }).code).toBe('40001');
        expect(toProtocolError(failed[0]!.reason).status).toBe(503);
        expect((await store.host('h1'))?.name).toBe('1');
      } finally {
        await store.close();
      }
    });
  });

  it("commits the store's writes with synchronous_commit on, whatever the database's default", async () => {
    const url = await server.createDatabase();
    const name = server.databaseOf(url);
    // A server tuned for speed: acknowledged commits a crash of the database could forget.
    await sql(url, `ALTER DATABASE "${name}" SET synchronous_commit = off`);
    const connections = await openPool(url, {});
    try {
      const setting = async (pool: pg.Pool): Promise<unknown> =>
        (await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]
          ?.synchronous_commit;
      expect(await setting(connections.pool)).toBe('on');
      // The replay ledger's and rate budgets' pool opts out on purpose (README: ~0.6 s of jtis).
      expect(await setting(connections.sharedPool)).toBe('off');
    } finally {
      await Promise.all([connections.pool.end(), connections.sharedPool.end(), connections.probe.end()]);
    }
  });

  it('rejects a write whose transaction PostgreSQL aborted, even when fn swallowed the error', async () => {
    // SQLite would roll back only the failed statement and commit the rest; PostgreSQL aborts the
    // whole transaction, so `write` must not report success.
    const store = await PgStore.open(await server.createDatabase());
    try {
      await store.write((tx) => tx.insertHost(host('h1')));
      await expect(
        store.write(async (tx) => {
          await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
          await tx.insertHost(host('h1')).catch(() => undefined); // duplicate, swallowed
        }),
      ).rejects.toThrow();
      expect(await store.host('h2')).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('reports the duration of each write and activity batch', async () => {
    const writes: string[] = [];
    const store = await PgStore.open(await server.createDatabase(), {
      onWrite: (kind, seconds) => {
        expect(seconds).toBeGreaterThanOrEqual(0);
        writes.push(kind);
      },
    });
    try {
      await store.write((tx) => tx.insertHost(host('h1')));
      await store.appendActivities([activity(), activity()]);
      expect(writes).toEqual(['state', 'activity']);
    } finally {
      await store.close();
    }
  });

  it('answers text it cannot hold (a NUL) as a StoreInputError, for a lookup as for a write', async () => {
    const store = await PgStore.open(await server.createDatabase());
    try {
      await expect(store.agent('agt_\u0000x')).rejects.toBeInstanceOf(StoreInputError);
      await expect(store.host('h\u0000')).rejects.toBeInstanceOf(StoreInputError);
      await expect(
        store.write((tx) => tx.insertHost(host('h\u0000', { thumbprint: 'tp-nul' }))),
      ).rejects.toBeInstanceOf(StoreInputError);
      expect(await store.countHosts('active')).toBe(0);
      // toProtocolError makes it a 400 that names the cause, not a 500.
      expect(toProtocolError(new StoreInputError('x')).toBody()).toEqual({
        error: 'invalid_request',
        message: 'The request holds text that cannot be stored (a NUL character).',
      });
    } finally {
      await store.close();
    }
  });

  it('execution records: one the database refuses is dropped alone, the rest of its batch and later ones are written', async () => {
    const store = await PgStore.open(await server.createDatabase());
    const lines: Record<string, unknown>[] = [];
    const log = new ExecutionLog(
      store,
      createLogger('debug', (line) => void lines.push(JSON.parse(line) as Record<string, unknown>)),
    );
    try {
      for (let n = 0; n < 7; n++) {
        log.record(activity({ capability: n === 4 ? 'get\u0000pet' : `cap_${n}`, agentId: `agt_${n}` }));
      }
      await log.flush();
      log.record(activity({ capability: 'cap_later' }));
      await log.flush();
      const stored = (await store.activity({ limit: 100 })).map((r) => r.capability).reverse();
      expect(stored).toEqual(['cap_0', 'cap_1', 'cap_2', 'cap_3', 'cap_5', 'cap_6', 'cap_later']);
      const dropped = lines.filter((l) => l.msg === 'execution record refused by the database, dropped');
      expect(dropped.map((l) => l.agent_id)).toEqual(['agt_4']);
      expect(lines.some((l) => l.msg === 'writing execution records failed')).toBe(false);
    } finally {
      await log.stop();
      await store.close();
    }
  });

  it('the pending cleanup tells the other replicas to drop their hot caches', async () => {
    const url = await server.createDatabase();
    const store = await PgStore.open(url);
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    try {
      const notices: string[] = [];
      listener.on('notification', (m) => notices.push(m.payload ?? ''));
      await listener.query(`LISTEN ${CHANGES_CHANNEL}`);
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending', activatedAt: null, userId: null }));
        await tx.insertAgent(agent('a1', 'h1', { status: 'pending', activatedAt: null, userId: null }));
      });
      await listener.query('SELECT 1'); // the insert's own notice, delivered before this answer
      notices.length = 0;
      expect(await store.deleteStalePending(NOW + 1, 10, NOW + 1)).toEqual({
        agents: 1,
        hosts: 1,
        rejected: 0,
      });
      // Nothing deleted, nothing said.
      expect(await store.deleteStalePending(NOW + 1, 10, NOW + 1)).toEqual({
        agents: 0,
        hosts: 0,
        rejected: 0,
      });
      await listener.query('SELECT 1'); // delivered before this answer
      expect(notices.map((n) => (JSON.parse(n) as { c: boolean }).c)).toEqual([true]);
    } finally {
      await listener.end();
      await store.close();
    }
  });
});
