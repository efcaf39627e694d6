/**
 * Migration 11 (issue 16): a database made before it keeps its rows (the new columns read as
 * null); grants keep proposed and approved constraints apart from the effective ones, sessions an
 * OIDC sign-in's acr/amr, hosts the IP and user agent they registered from.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Sessions } from '../../../src/protocol/sessions.js';
import { MIGRATIONS } from '../../../src/storage/migrations.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { HostRecord, Store } from '../../../src/storage/types.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

let store: Store | undefined;
afterEach(() => store?.close());

const TRAIL_MIGRATION = MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN proposed_constraints'));

const HOST: HostRecord = {
  id: 'hst_1',
  thumbprint: 'thumb',
  publicJwk: { kty: 'OKP', crv: 'Ed25519', x: 'x' },
  name: 'laptop',
  userId: null,
  defaultCapabilities: [],
  status: 'pending',
  preRegistered: false,
  admittedByPolicy: false,
  registeredIp: '192.0.2.7',
  registeredUserAgent: 'ShelterBot/2.1',
  activatedAt: null,
  lastUsedAt: null,
  createdAt: 1,
  updatedAt: 1,
};

describe('migration 11: proposed / approved / effective, acr/amr, registration origin', () => {
  it('keeps the rows of an older database; the new fields read as null', async () => {
    expect(TRAIL_MIGRATION).toBeGreaterThan(0);
    const file = tempDbFile();
    const old = new Database(file);
    for (const sql of MIGRATIONS.slice(0, TRAIL_MIGRATION)) old.exec(sql);
    old.pragma(`user_version = ${TRAIL_MIGRATION}`);
    old
      .prepare(
        "INSERT INTO hosts (id, thumbprint, public_jwk, status, created_at, updated_at) VALUES ('hst_0', 't0', '{}', 'pending', 1, 1)",
      )
      .run();
    old.close();
    store = openSqliteStore({ file });
    expect(await store.host('hst_0')).toMatchObject({
      id: 'hst_0',
      registeredIp: null,
      registeredUserAgent: null,
    });
  });

  it('stores and reads back each new field', async () => {
    store = openSqliteStore({ file: ':memory:' });
    const s = store;
    await s.write(async (tx) => {
      await tx.insertHost(HOST);
      await tx.insertAgent({
        id: 'agt_1',
        hostId: 'hst_1',
        userId: null,
        name: 'a',
        publicJwk: HOST.publicJwk,
        keyThumbprint: 'k',
        mode: 'delegated',
        status: 'active',
        lastUsedAt: null,
        activatedAt: null,
        createdAt: 1,
        updatedAt: 1,
      });
      await tx.putGrant({
        id: 'grt_1',
        agentId: 'agt_1',
        capability: 'list_pets',
        status: 'active',
        constraints: { limit: { max: 200 } },
        proposedConstraints: { limit: { max: 1000 } },
        approvedConstraints: { limit: { max: 200 } },
        grantedBy: 'alice',
        deniedBy: null,
        reason: null,
        expiresAt: null,
        approvalId: null,
        createdAt: 1,
        updatedAt: 1,
      });
    });
    expect(await s.host('hst_1')).toMatchObject({
      registeredIp: '192.0.2.7',
      registeredUserAgent: 'ShelterBot/2.1',
    });
    expect((await s.grants('agt_1'))[0]).toMatchObject({
      proposedConstraints: { limit: { max: 1000 } },
      approvedConstraints: { limit: { max: 200 } },
      constraints: { limit: { max: 200 } },
    });
    const sessions = new Sessions(s, new TestClock(), 3_600_000);
    const oidc = await sessions.start('alice', 'oidc', undefined, {
      claims: { acr: 'urn:example:mfa', amr: ['pwd', 'otp'] },
    });
    expect(await sessions.find(oidc.cookieValue)).toMatchObject({
      acr: 'urn:example:mfa',
      amr: ['pwd', 'otp'],
    });
    const password = await sessions.start('bob', 'password');
    expect(await sessions.find(password.cookieValue)).toMatchObject({ acr: null, amr: null });
  });
});
