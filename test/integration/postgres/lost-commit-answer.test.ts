/**
 * A commit whose answer was lost (PostgreSQL committed; the connection broke before the proxy
 * heard so) on the usage flush (usage.ts): the flush is retried, and its counts must land once.
 * `uses = uses + n` re-applied would count every use of that flush twice on the account page.
 * A TCP relay between the store and the database passes COMMIT on and drops its answer.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageTracker } from '../../../src/protocol/usage.js';
import { PgStore } from '../../../src/storage/pg-store.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startTcpRelay, type TcpRelay } from '../../helpers/tcp-relay.js';
import { agent, grant, host, NOW } from '../../unit/storage/store-fixtures.js';

/** The simple-protocol Query message `COMMIT` ('Q', length 11, the text and its NUL). */
const COMMIT = Buffer.concat([Buffer.from([0x51, 0, 0, 0, 11]), Buffer.from('COMMIT\0')]);

let postgres: TestPostgres;
let relay: TcpRelay;
beforeAll(async () => {
  postgres = await startPostgres();
  relay = await startTcpRelay({ host: '127.0.0.1', port: postgres.port });
}, 60_000);
afterAll(async () => {
  await relay?.close();
  await postgres?.stop();
});

/** The grant's stored count, read straight from the database (not through the relay). */
async function storedUses(url: string, grantId: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ uses: string }>('SELECT uses FROM grants WHERE id = $1', [grantId]);
    return Number(rows[0]?.uses);
  } finally {
    await client.end();
  }
}

describe('a usage flush whose commit answer was lost', () => {
  it('is retried and counted once (regression: counted twice)', async () => {
    const url = await postgres.createDatabase();
    const relayed = new URL(url);
    relayed.port = String(relay.port);
    const store = await PgStore.open(relayed.href, { connectionTimeoutMs: 2000 });
    try {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1'));
        await tx.insertAgent(agent('a1', 'h1'));
        await tx.putGrant(grant('g1', 'a1'));
      });
      const usage = new UsageTracker(store);
      for (let i = 0; i < 3; i++) usage.recordGrant('g1', NOW + i);

      relay.loseAnswerTo(COMMIT);
      await usage.flush(); // committed, but the store heard only that the connection broke
      expect(await storedUses(url, 'g1')).toBe(3);
      // The tracker cannot know it did: the next flush sends that batch again, then the new use.
      usage.recordGrant('g1', NOW + 10);
      await usage.flush();
      expect(await storedUses(url, 'g1')).toBe(4);
      expect(usage.grantUse('g1', { uses: 4, lastUsedAt: NOW + 10 }).uses).toBe(4);
    } finally {
      await store.close();
    }
  }, 30_000);
});
