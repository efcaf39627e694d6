/**
 * The asynchronous store over SQLite (sqlite-async-store.ts), on a real database file: one write
 * transaction at a time, store-level calls wait for the open one (they never see its uncommitted
 * rows, nor join it), a throwing `fn` rolls back all it wrote, and SQLite errors reject.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { applyMigrations, openSqliteStore } from '../../../src/storage/open-sqlite.js';
import { sqliteStoreError, StoreUnavailableError } from '../../../src/storage/errors.js';
import { MIGRATIONS } from '../../../src/storage/migrations.js';
import { SqliteAsyncStore } from '../../../src/storage/sqlite-async-store.js';
import { SqliteEngine } from '../../../src/storage/sqlite-store.js';
import type { AgentRecord, HostRecord, Store } from '../../../src/storage/types.js';
import { activityRecord } from '../../helpers/activity.js';
import { tempDbFile } from '../../helpers/proxy.js';

const NOW = 1_800_000_000_000;
const JWK = { kty: 'OKP', crv: 'Ed25519', x: 'x' } as const;

const host = (id: string): HostRecord => ({
  id,
  thumbprint: `tp-${id}`,
  publicJwk: JWK,
  name: id,
  userId: null,
  defaultCapabilities: [],
  status: 'active',
  preRegistered: false,
  admittedByPolicy: false,
  activatedAt: NOW,
  lastUsedAt: null,
  createdAt: NOW,
  updatedAt: NOW,
});

const agent = (id: string, hostId: string): AgentRecord => ({
  id,
  hostId,
  userId: null,
  name: id,
  publicJwk: JWK,
  keyThumbprint: `tp-${id}`,
  mode: 'autonomous',
  status: 'active',
  lastUsedAt: null,
  activatedAt: NOW,
  createdAt: NOW,
  updatedAt: NOW,
});

/** A promise and the function that resolves it: holds a transaction open until a test says so. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

let file: string;
let store: Store | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

function openStore(): Store {
  file = tempDbFile();
  store = openSqliteStore({ file });
  return store;
}

describe('SqliteAsyncStore', () => {
  it('runs writes one at a time: two started together both commit, in the order they were made', async () => {
    const s = openStore();
    const events: string[] = [];
    const first = s.write(async (tx) => {
      events.push('first: begin');
      await tx.insertHost(host('h1'));
      // A whole event-loop turn inside the transaction: the second write must still wait.
      await nextTurn();
      await tx.insertAgent(agent('a1', 'h1'));
      events.push('first: end');
      return 'first';
    });
    const second = s.write(async (tx) => {
      events.push('second: begin');
      // The first write is committed by now: its rows are there.
      const seen = await tx.agent('a1');
      await tx.insertHost(host('h2'));
      events.push('second: end');
      return seen?.id;
    });
    expect(await Promise.all([first, second])).toEqual(['first', 'a1']);
    expect(events).toEqual(['first: begin', 'first: end', 'second: begin', 'second: end']);
    expect((await s.hosts({ limit: 10 })).map((h) => h.id)).toEqual(['h1', 'h2']);
  });

  it('a store-level read during an open transaction does not see its uncommitted row; after the commit it does', async () => {
    const s = openStore();
    const held = gate();
    const other = new Database(file, { readonly: true });
    try {
      let inside = false;
      const writing = s.write(async (tx) => {
        await tx.insertHost(host('h1'));
        inside = true;
        await held.opened;
      });
      await nextTurn();
      expect(inside).toBe(true);
      // The row is written but not committed: another connection does not see it…
      expect(other.prepare("SELECT count(*) AS n FROM hosts WHERE id = 'h1'").get()).toEqual({ n: 0 });
      // …and a read through the store waits for the transaction rather than read it on its connection.
      let read: HostRecord | undefined | 'pending' = 'pending';
      const reading = s.host('h1').then((h) => {
        read = h;
      });
      await nextTurn();
      expect(read).toBe('pending');
      held.open();
      await writing;
      await reading;
      expect(read).toMatchObject({ id: 'h1' });
      expect(other.prepare("SELECT count(*) AS n FROM hosts WHERE id = 'h1'").get()).toEqual({ n: 1 });
    } finally {
      other.close();
    }
  });

  it('a read that waited for a transaction that rolls back sees nothing of it', async () => {
    const s = openStore();
    const held = gate();
    const writing = s.write(async (tx) => {
      await tx.insertHost(host('h1'));
      await held.opened;
      throw new Error('changed my mind');
    });
    await nextTurn();
    const reading = s.host('h1');
    held.open();
    await expect(writing).rejects.toThrow('changed my mind');
    expect(await reading).toBeUndefined();
  });

  it('a throwing fn rolls back everything it wrote, and the next write runs', async () => {
    const s = openStore();
    await expect(
      s.write(async (tx) => {
        await tx.insertHost(host('h1'));
        await tx.insertAgent(agent('a1', 'h1'));
        await tx.appendActivity(activityRecord(NOW, 'test.rolled_back'));
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await s.host('h1')).toBeUndefined();
    expect(await s.agent('a1')).toBeUndefined();
    expect(await s.activity({ limit: 10 })).toEqual([]);
    await s.write((tx) => tx.insertHost(host('h1')));
    expect(await s.host('h1')).toMatchObject({ id: 'h1' });
  });

  it('a batch written while a transaction is open waits for it and is not part of it', async () => {
    const s = openStore();
    const held = gate();
    const writing = s.write(async (tx) => {
      await tx.insertHost(host('h1'));
      await held.opened;
      throw new Error('rolled back');
    });
    await nextTurn();
    // The group-committed activity and the usage flush, as the execute path makes them.
    const batch = s.appendActivities([activityRecord(NOW, 'test.batch')]);
    const touched = s.touch(new Map(), new Map([['h0', NOW]]));
    held.open();
    await expect(writing).rejects.toThrow('rolled back');
    await batch;
    await touched;
    expect((await s.activity({ limit: 10 })).map((r) => r.type)).toEqual(['test.batch']);
    expect(await s.host('h1')).toBeUndefined();
  });

  it('a SQLite error rejects the promise; nothing throws synchronously', async () => {
    const s = openStore();
    // A foreign key violation: the agent's host does not exist.
    let write: Promise<void> | undefined;
    expect(() => {
      write = s.write((tx) => tx.insertAgent(agent('a1', 'no-such-host')));
    }).not.toThrow();
    await expect(write).rejects.toThrow(/FOREIGN KEY constraint failed/);
    let job: Promise<void> | undefined;
    expect(() => {
      job = s.insertAsyncJob({
        id: 'j1',
        agentId: 'no-such-agent',
        capability: 'c',
        upstreamUrl: 'https://u/1',
        statusCapability: null,
        createdAt: NOW,
        expiresAt: NOW + 1,
      });
    }).not.toThrow();
    await expect(job).rejects.toThrow(/FOREIGN KEY constraint failed/);
    // Through tx too: the call's own promise rejects, and fn decides what to do with it.
    const caught = await s.write(async (tx) => {
      const failed = tx.insertAgent(agent('a2', 'no-such-host'));
      await expect(failed).rejects.toThrow(/FOREIGN KEY constraint failed/);
      await tx.insertHost(host('h1'));
      return 'committed';
    });
    expect(caught).toBe('committed');
    expect(await s.host('h1')).toMatchObject({ id: 'h1' });
  });

  it('a tx kept past its write is refused', async () => {
    const s = openStore();
    let kept: Parameters<Parameters<Store['write']>[0]>[0] | undefined;
    await s.write((tx) => {
      kept = tx;
      return Promise.resolve();
    });
    await expect(kept?.insertHost(host('h1'))).rejects.toThrow(/outside its transaction/);
    expect(await s.host('h1')).toBeUndefined();
  });

  it('close waits for the open transaction, which commits', async () => {
    const s = openStore();
    const held = gate();
    const writing = s.write(async (tx) => {
      await tx.insertHost(host('h1'));
      await held.opened;
    });
    await nextTurn();
    const closing = s.close();
    held.open();
    await writing;
    await closing;
    store = undefined;
    const reopened = openSqliteStore({ file });
    try {
      expect(await reopened.host('h1')).toMatchObject({ id: 'h1' });
    } finally {
      await reopened.close();
    }
  });
});

describe('migrations of one file by two processes', () => {
  it('a migration another process applied after this one read the version is skipped, not run twice', async () => {
    const file = tempDbFile();
    // This process read version 0 …
    const late = new Database(file);
    // … while another opened the same new file and migrated it all.
    const first = openSqliteStore({ file });
    try {
      expect(() => applyMigrations(late, 0)).not.toThrow();
      expect(late.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    } finally {
      late.close();
      await first.close();
    }
  });
});

describe('a database that cannot take a write', () => {
  it('rejects writes with StoreUnavailableError (503), not a raw SQLite error (500): SQLITE_READONLY', async () => {
    const file = tempDbFile();
    await openSqliteStore({ file }).close();
    // SQLite's own read-only open: what a 0400 file gives a non-root proxy, and root too.
    const db = new Database(file, { readonly: true });
    const readOnly = new SqliteAsyncStore(new SqliteEngine(db));
    try {
      await expect(readOnly.write((tx) => tx.insertHost(host('h1')))).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
      await expect(readOnly.appendActivities([activityRecord(NOW, 'execution')])).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
      // Reads still work.
      expect(await readOnly.host('h1')).toBeUndefined();
    } finally {
      await readOnly.close();
    }
  });

  it('maps the codes of a full disk, an I/O error, a read-only file and a lock held too long, nothing else', () => {
    const sqlite = (code: string): Error => Object.assign(new Error(code), { code });
    for (const code of [
      'SQLITE_READONLY',
      'SQLITE_READONLY_DIRECTORY',
      'SQLITE_FULL',
      'SQLITE_IOERR_WRITE',
      'SQLITE_BUSY',
    ])
      expect(sqliteStoreError(sqlite(code)), code).toBeInstanceOf(StoreUnavailableError);
    for (const code of ['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_ERROR', 'SQLITE_TOOBIG'])
      expect(sqliteStoreError(sqlite(code)), code).not.toBeInstanceOf(StoreUnavailableError);
  });
});
