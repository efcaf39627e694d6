/**
 * The replay journal of the SQLite store (§4.6): accepted jtis written through the
 * synchronous=NORMAL connection, read back at start-up, swept from the oldest end in small
 * batches. Real files, real connections.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../../src/storage/sqlite-store.js';
import type { Store } from '../../../src/storage/types.js';
import { tempDbFile } from '../../helpers/proxy.js';

const opened: Store[] = [];
afterEach(() => {
  for (const store of opened.splice(0)) store.close();
});

function open(file = tempDbFile()): { store: Store; file: string } {
  const store = openSqliteStore({ file });
  opened.push(store);
  return { store, file };
}

function rowCount(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM seen_jtis').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

const NOW = 1_700_000_000_000;

describe('seen jtis journal', () => {
  it('returns what was recorded and is still live, oldest first, to a store opened later on the file', () => {
    const { store, file } = open();
    store.recordSeenJti({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 }, NOW);
    store.recordSeenJti({ identity: 'host:h', jti: 'j1', expiresAt: NOW + 5000 }, NOW);
    store.recordSeenJti({ identity: 'agent:a', jti: 'old', expiresAt: NOW }, NOW);
    store.close();
    const { store: reopened } = open(file);
    expect(reopened.liveSeenJtis(NOW)).toEqual([
      { identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 },
      { identity: 'host:h', jti: 'j1', expiresAt: NOW + 5000 },
    ]);
    expect(reopened.liveSeenJtis(NOW + 1000)).toEqual([
      { identity: 'host:h', jti: 'j1', expiresAt: NOW + 5000 },
    ]);
  });

  it('is readable by another connection at once: the commit does not wait for a checkpoint', () => {
    const { store, file } = open();
    store.recordSeenJti({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 }, NOW);
    expect(rowCount(file)).toBe(1);
  });

  it('sweeps expired rows from the oldest end, at most `limit` at a time', () => {
    const { store, file } = open();
    for (let i = 0; i < 10; i++) {
      store.recordSeenJti({ identity: 'agent:a', jti: `j${i}`, expiresAt: NOW + i * 100 }, NOW);
    }
    expect(store.deleteExpiredSeenJtis(NOW + 450, 3)).toBe(3);
    expect(rowCount(file)).toBe(7);
    expect(store.deleteExpiredSeenJtis(NOW + 450, 3)).toBe(2);
    expect(store.liveSeenJtis(NOW + 450).map((s) => s.jti)).toEqual(['j5', 'j6', 'j7', 'j8', 'j9']);
    expect(rowCount(file)).toBe(5);
  });

  it('a live row at the head holds back later expired rows only until it expires itself', () => {
    const { store, file } = open();
    store.recordSeenJti({ identity: 'agent:a', jti: 'long', expiresAt: NOW + 1000 }, NOW);
    for (let i = 0; i < 5; i++) {
      store.recordSeenJti({ identity: 'agent:a', jti: `short${i}`, expiresAt: NOW + 10 }, NOW);
    }
    // The batch looks at the oldest 1 row only, which is live: nothing to delete.
    expect(store.deleteExpiredSeenJtis(NOW + 500, 1)).toBe(0);
    // A batch wide enough to reach past it deletes the expired ones behind it.
    expect(store.deleteExpiredSeenJtis(NOW + 500, 10)).toBe(5);
    expect(store.deleteExpiredSeenJtis(NOW + 1000, 10)).toBe(1);
    expect(rowCount(file)).toBe(0);
  });

  it('sweeps as it records, so the table stays near one validity window of rows without maintenance', () => {
    const { store, file } = open();
    // 5 000 tokens, one per ms, each remembered for 100 ms.
    for (let i = 0; i < 5000; i++) {
      store.recordSeenJti({ identity: 'agent:a', jti: `j${i}`, expiresAt: NOW + i + 100 }, NOW + i);
    }
    // Sweeps run every 1 024 records and delete up to 2 048 expired rows each.
    expect(rowCount(file)).toBeLessThanOrEqual(1024 + 100);
    expect(store.liveSeenJtis(NOW + 5000)).toHaveLength(99);
  });

  it('joins a transaction of the main connection instead of waiting for its lock', () => {
    const { store, file } = open();
    expect(() =>
      store.write(() => {
        store.recordSeenJti({ identity: 'agent:a', jti: 'in-tx', expiresAt: NOW + 1000 }, NOW);
        throw new Error('roll back');
      }),
    ).toThrow('roll back');
    expect(rowCount(file)).toBe(0);
    store.write(() => store.recordSeenJti({ identity: 'agent:a', jti: 'in-tx', expiresAt: NOW + 1000 }, NOW));
    expect(rowCount(file)).toBe(1);
  });

  it('works on an in-memory database (one connection)', () => {
    const store = openSqliteStore({ file: ':memory:' });
    opened.push(store);
    store.recordSeenJti({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 }, NOW);
    expect(store.liveSeenJtis(NOW)).toHaveLength(1);
    expect(store.deleteExpiredSeenJtis(NOW + 1000)).toBe(1);
  });
});
