/**
 * Sessions of approvers signed in at an OIDC provider (issue 11): migration 7 lets the sessions
 * table record 'oidc' and keeps the sessions of a database made before it; a session is dated by
 * the provider's auth_time when that is earlier than now, never later.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Sessions } from '../../../src/protocol/sessions.js';
import { MIGRATIONS } from '../../../src/storage/migrations.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

let store: Store | undefined;
afterEach(() => store?.close());

const OIDC_MIGRATION = MIGRATIONS.findIndex((m) => m.includes("'trusted_header', 'oidc'"));

describe('sessions of OIDC sign-ins', () => {
  it('migrates a database made before OIDC: its sessions survive, and oidc is accepted', async () => {
    const file = tempDbFile();
    const old = new Database(file);
    for (const sql of MIGRATIONS.slice(0, OIDC_MIGRATION)) old.exec(sql);
    old.pragma(`user_version = ${OIDC_MIGRATION}`);
    old
      .prepare("INSERT INTO sessions VALUES ('hash-1', 'alice', 'password', 1, 'csrf', 1, 9999999999999)")
      .run();
    old.close();
    store = openSqliteStore({ file });
    expect(await store.session('hash-1')).toMatchObject({ userId: 'alice', authMethod: 'password' });
    const sessions = new Sessions(store, new TestClock(), 3_600_000);
    const { cookieValue } = await sessions.start('bob@example.com', 'oidc');
    expect((await sessions.find(cookieValue))?.authMethod).toBe('oidc');
  });

  it('still refuses an auth method nobody defined (the CHECK constraint was kept)', async () => {
    const file = tempDbFile();
    store = openSqliteStore({ file });
    await store.close();
    store = undefined;
    const db = new Database(file);
    const insert = db.prepare(
      'INSERT INTO sessions (id_hash, user_id, auth_method, authenticated_at, csrf_token, created_at, expires_at) ' +
        "VALUES ('h', 'a', 'magic', 1, 'c', 1, 2)",
    );
    expect(() => insert.run()).toThrow(/CHECK constraint failed/);
    db.close();
  });

  it("dates a session by the provider's auth_time when earlier, and never later than now", async () => {
    store = openSqliteStore({ file: tempDbFile() });
    const clock = new TestClock();
    const sessions = new Sessions(store, clock, 3_600_000);
    const earlier = (
      await sessions.start('alice', 'oidc', undefined, { authenticatedAt: clock.now() - 600_000 })
    ).session;
    expect(earlier.authenticatedAt).toBe(clock.now() - 600_000);
    expect(sessions.isFresh(earlier, 300_000)).toBe(false);
    const future = (
      await sessions.start('alice', 'oidc', undefined, { authenticatedAt: clock.now() + 600_000 })
    ).session;
    expect(future.authenticatedAt).toBe(clock.now());
  });
});
