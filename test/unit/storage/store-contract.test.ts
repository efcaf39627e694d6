/**
 * The storage contract (src/storage/types.ts), pinned once for every Store implementation: each
 * method's results, orderings, keyset pages and limits, cascades, compare-and-set, counts, the
 * sweeps' bounds, JSON and binary round trips, and the transaction guarantees (all or nothing;
 * concurrent read-then-update writes never lose an update). Each test gets an empty store.
 *
 * FACTORIES is the place to register a store: the same suite then runs against it.
 */
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PgStore } from '../../../src/storage/pg-store.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type {
  ChallengeRecord,
  OidcPendingRecord,
  PasskeyRecord,
  PerCallRecord,
  Store,
  StoreWriter,
} from '../../../src/storage/types.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { tempDbFile } from '../../helpers/proxy.js';
import {
  NOW,
  activity,
  agent,
  approval,
  asyncJob,
  grant,
  host,
  passkey,
  perCall,
  session,
} from './store-fixtures.js';

interface StoreFactory {
  readonly name: string;
  /** Once before the suite (e.g. start a server). */
  readonly start?: () => Promise<void>;
  /** An empty, migrated store. */
  readonly open: () => Promise<Store>;
  readonly stop?: () => Promise<void>;
}

let postgres: TestPostgres | undefined;
let template = '';

const postgresFactory: StoreFactory = {
  name: 'PostgreSQL',
  start: async () => {
    postgres = await startPostgres();
    // Migrated once; each test's database is a copy (CREATE DATABASE … TEMPLATE).
    await (await PgStore.open(postgres.url)).close();
    template = postgres.databaseOf(postgres.url);
  },
  open: async () => PgStore.open(await postgres!.createDatabase(template)),
  stop: async () => postgres?.stop(),
};

const sqliteFactory: StoreFactory = {
  name: 'SQLite',
  open: () => Promise.resolve(openSqliteStore({ file: tempDbFile() })),
};

/** The stores the suite runs against: one entry per Store implementation. */
const FACTORIES: readonly StoreFactory[] = [sqliteFactory, postgresFactory];

const ids = (records: readonly { readonly id?: string | number }[]): unknown[] => records.map((r) => r.id);

describe.each(FACTORIES)('Store contract: $name', (factory) => {
  let store: Store;

  beforeAll(async () => factory.start?.());
  afterAll(async () => factory.stop?.());
  beforeEach(async () => {
    store = await factory.open();
  });
  afterEach(async () => store.close());

  /** Host h1 (alice's) with agents a1, a2. */
  const seed = (): Promise<void> =>
    store.write(async (tx) => {
      await tx.insertHost(host('h1'));
      await tx.insertAgent(agent('a1', 'h1'));
      await tx.insertAgent(agent('a2', 'h1', { createdAt: NOW + 1 }));
    });

  describe('hosts', () => {
    it('round-trips every field, found by id, thumbprint and JWKS URL', async () => {
      const h = host('h1', {
        preRegistered: true,
        admittedByPolicy: true,
        jwksUrl: 'https://keys.example.com/jwks.json',
        lastUsedAt: NOW + 5,
      });
      await store.write((tx) => tx.insertHost(h));
      expect(await store.host('h1')).toEqual(h);
      expect(await store.hostByThumbprint('tp-h1')).toEqual(h);
      expect(await store.hostByJwksUrl('https://keys.example.com/jwks.json')).toEqual(h);
      expect(await store.host('nope')).toBeUndefined();
      expect(await store.hostByThumbprint('nope')).toBeUndefined();
      expect(await store.hostByJwksUrl('https://nope.example.com')).toBeUndefined();
    });

    it('reads optional fields never given as null', async () => {
      const { registeredIp: _i, registeredUserAgent: _u, jwksUrl: _j, ...bare } = host('h1');
      await store.write((tx) => tx.insertHost(bare));
      expect(await store.host('h1')).toMatchObject({
        registeredIp: null,
        registeredUserAgent: null,
        jwksUrl: null,
      });
    });

    it('updates only the fields a patch defines, null included', async () => {
      await store.write((tx) => tx.insertHost(host('h1')));
      await store.write((tx) =>
        tx.updateHost('h1', {
          name: 'renamed',
          userId: null,
          status: 'revoked',
          updatedAt: NOW + 9,
          lastUsedAt: undefined,
        }),
      );
      expect(await store.host('h1')).toEqual({
        ...host('h1'),
        name: 'renamed',
        userId: null,
        status: 'revoked',
        updatedAt: NOW + 9,
      });
    });

    it('refuses a patch naming an unknown field, and rolls its transaction back', async () => {
      await store.write((tx) => tx.insertHost(host('h1')));
      await expect(
        store.write(async (tx) => {
          await tx.updateHost('h1', { name: 'renamed' });
          await tx.updateHost('h1', { bogus: 1 } as never);
        }),
      ).rejects.toThrow(/unknown field hosts\.bogus/);
      expect((await store.host('h1'))?.name).toBe('host h1');
    });

    it('lists oldest first by (createdAt, id), ids in byte order, a keyset page at a time', async () => {
      await store.write(async (tx) => {
        await tx.insertHost(host('h-b', { thumbprint: 't1' }));
        await tx.insertHost(host('h-B', { thumbprint: 't2' }));
        await tx.insertHost(host('h-a', { thumbprint: 't3' }));
        await tx.insertHost(host('h-A', { thumbprint: 't4' }));
        await tx.insertHost(host('h-0', { thumbprint: 't5', createdAt: NOW + 1 }));
        await tx.insertHost(host('h-z', { thumbprint: 't6', createdAt: NOW - 1 }));
      });
      const all = ['h-z', 'h-A', 'h-B', 'h-a', 'h-b', 'h-0'];
      expect(ids(await store.hosts({ limit: 100 }))).toEqual(all);
      expect(ids(await store.hosts({ limit: 2 }))).toEqual(all.slice(0, 2));
      expect(ids(await store.hosts({ after: { createdAt: NOW, id: 'h-B' }, limit: 2 }))).toEqual([
        'h-a',
        'h-b',
      ]);
      expect(ids(await store.hosts({ after: { createdAt: NOW, id: 'h-b' }, limit: 10 }))).toEqual(['h-0']);
      expect(ids(await store.hosts({ after: { createdAt: NOW + 1, id: 'h-0' }, limit: 10 }))).toEqual([]);
    });

    it('filters by status and user, alone or together; a status-only or bare listing needs a limit', async () => {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending', userId: null }));
        await tx.insertHost(host('h2', { status: 'active', userId: 'alice' }));
        await tx.insertHost(host('h3', { status: 'pending', userId: 'alice' }));
        await tx.insertHost(host('h4', { status: 'active', userId: 'bob' }));
      });
      expect(ids(await store.hosts({ status: 'pending', limit: 10 }))).toEqual(['h1', 'h3']);
      expect(ids(await store.hosts({ userId: 'alice' }))).toEqual(['h2', 'h3']);
      expect(ids(await store.hosts({ userId: 'alice', status: 'active', limit: 10 }))).toEqual(['h2']);
      expect(
        ids(await store.hosts({ status: 'pending', after: { createdAt: NOW, id: 'h1' }, limit: 10 })),
      ).toEqual(['h3']);
      await expect(store.hosts({ status: 'pending' })).rejects.toThrow(/needs a page limit/);
      await expect(store.hosts()).rejects.toThrow(/needs a page limit/);
    });

    it('counts hosts by status, and the active unlinked ones policy admitted', async () => {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending' }));
        await tx.insertHost(host('h2', { status: 'pending' }));
        await tx.insertHost(host('h3', { admittedByPolicy: true, userId: null }));
        await tx.insertHost(host('h4', { admittedByPolicy: true, userId: 'alice' }));
        await tx.insertHost(host('h5', { admittedByPolicy: true, userId: null, status: 'revoked' }));
      });
      expect(await store.countHosts('pending')).toBe(2);
      expect(await store.countHosts('active')).toBe(2);
      expect(await store.countHosts('rejected')).toBe(0);
      expect(await store.countPolicyAdmittedHosts()).toBe(1);
    });

    it('refuses a second host with the same thumbprint or JWKS URL', async () => {
      await store.write((tx) => tx.insertHost(host('h1', { jwksUrl: 'https://k.example.com' })));
      await expect(store.write((tx) => tx.insertHost(host('h2', { thumbprint: 'tp-h1' })))).rejects.toThrow();
      await expect(
        store.write((tx) => tx.insertHost(host('h3', { jwksUrl: 'https://k.example.com' }))),
      ).rejects.toThrow();
      await store.write(async (tx) => {
        await tx.insertHost(host('h4', { jwksUrl: null }));
        await tx.insertHost(host('h5', { jwksUrl: null }));
      });
      expect(ids(await store.hosts({ limit: 10 }))).toEqual(['h1', 'h4', 'h5']);
    });

    it('deleting a host deletes its agents, their approvals and grants', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertHost(host('h2', { thumbprint: 'tp-h2b' }));
        await tx.insertAgent(agent('b1', 'h2'));
        await tx.insertApproval(approval('p1', 'a1', 'h1'));
        await tx.putGrant(grant('g1', 'a1'));
        await tx.putGrant(grant('g2', 'b1'));
      });
      await store.write((tx) => tx.deleteHost('h1'));
      expect(await store.host('h1')).toBeUndefined();
      expect(await store.agent('a1')).toBeUndefined();
      expect(await store.approval('p1')).toBeUndefined();
      expect(await store.grants('a1')).toEqual([]);
      expect(ids(await store.grants('b1'))).toEqual(['g2']);
    });
  });

  describe('the policy grants drift last applied', () => {
    it('are none at first, then the last text written; a rolled-back write leaves the one before', async () => {
      expect(await store.appliedPolicyGrants()).toBeUndefined();
      await store.write((tx) => tx.putAppliedPolicyGrants('{"defaults":["a"]}'));
      await store.write((tx) => tx.putAppliedPolicyGrants('{"defaults":["b"]}'));
      await expect(
        store.write(async (tx) => {
          await tx.putAppliedPolicyGrants('{"defaults":["c"]}');
          expect(await tx.appliedPolicyGrants()).toBe('{"defaults":["c"]}');
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.appliedPolicyGrants()).toBe('{"defaults":["b"]}');
    });
  });

  describe('retired host keys (§5.9)', () => {
    it('are found by thumbprint, inside and outside a transaction; a rolled-back retirement is not', async () => {
      expect(await store.retiredHostKey('tp-old')).toBeUndefined();
      await expect(
        store.write(async (tx) => {
          await tx.retireHostKey({ thumbprint: 'tp-old', hostId: 'h1', retiredAt: NOW });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.retiredHostKey('tp-old')).toBeUndefined();
      const seen = await store.write(async (tx) => {
        await tx.retireHostKey({ thumbprint: 'tp-old', hostId: 'h1', retiredAt: NOW });
        return tx.retiredHostKey('tp-old');
      });
      expect(seen).toEqual({ thumbprint: 'tp-old', hostId: 'h1', retiredAt: NOW });
      expect(await store.retiredHostKey('tp-old')).toEqual(seen);
      expect(await store.retiredHostKey('tp-other')).toBeUndefined();
    });

    it('a later retirement of the same key replaces the record, and outlives the host', async () => {
      await seed();
      await store.write((tx) => tx.retireHostKey({ thumbprint: 'tp-old', hostId: 'h0', retiredAt: NOW }));
      await store.write((tx) => tx.retireHostKey({ thumbprint: 'tp-old', hostId: 'h1', retiredAt: NOW + 5 }));
      await store.write((tx) => tx.deleteHost('h1'));
      expect(await store.retiredHostKey('tp-old')).toEqual({
        thumbprint: 'tp-old',
        hostId: 'h1',
        retiredAt: NOW + 5,
      });
    });
  });

  describe('agents', () => {
    it('round-trips every field, found by id and by (host, key thumbprint)', async () => {
      await store.write((tx) => tx.insertHost(host('h1')));
      const a = agent('a1', 'h1', {
        mode: 'autonomous',
        userId: null,
        jwksUrl: 'https://agent.example.com/jwks.json',
        jwksKid: 'k1',
        lastUsedAt: NOW + 3,
        activatedAt: null,
      });
      await store.write((tx) => tx.insertAgent(a));
      expect(await store.agent('a1')).toEqual(a);
      expect(await store.agentByKey('h1', 'tp-a1')).toEqual(a);
      expect(await store.agentByKey('h2', 'tp-a1')).toBeUndefined();
      expect(await store.agent('nope')).toBeUndefined();
    });

    it('refuses an agent of an unknown host, and a second with the same key under a host', async () => {
      await seed();
      await expect(store.write((tx) => tx.insertAgent(agent('x', 'nope')))).rejects.toThrow();
      await expect(
        store.write((tx) => tx.insertAgent(agent('a3', 'h1', { keyThumbprint: 'tp-a1' }))),
      ).rejects.toThrow();
    });

    it('lists by host, status and user, oldest first, a keyset page at a time', async () => {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1'));
        await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
        await tx.insertAgent(agent('a3', 'h1', { createdAt: NOW + 2 }));
        await tx.insertAgent(agent('a1', 'h1', { status: 'pending', userId: 'bob' }));
        await tx.insertAgent(agent('a2', 'h2', { createdAt: NOW + 1 }));
      });
      expect(ids(await store.agents({ limit: 10 }))).toEqual(['a1', 'a2', 'a3']);
      expect(ids(await store.agents({ hostId: 'h1' }))).toEqual(['a1', 'a3']);
      expect(ids(await store.agents({ status: 'active', limit: 10 }))).toEqual(['a2', 'a3']);
      expect(ids(await store.agents({ userId: 'alice' }))).toEqual(['a2', 'a3']);
      expect(ids(await store.agents({ hostId: 'h1', userId: 'alice' }))).toEqual(['a3']);
      expect(ids(await store.agents({ hostId: 'h1', status: 'pending', userId: 'bob' }))).toEqual(['a1']);
      expect(ids(await store.agents({ after: { createdAt: NOW, id: 'a1' }, limit: 1 }))).toEqual(['a2']);
      expect(ids(await store.agents({ hostId: 'h1', after: { createdAt: NOW, id: 'a1' } }))).toEqual(['a3']);
      await expect(store.agents({ status: 'active' })).rejects.toThrow(/needs a page limit/);
      await expect(store.agents({})).rejects.toThrow(/needs a page limit/);
    });

    it("a user's agents: linked to them or under their host, newest first, later insertions first on ties", async () => {
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { userId: 'alice' }));
        await tx.insertHost(host('h2', { thumbprint: 'tp-h2', userId: 'bob' }));
        await tx.insertAgent(agent('a-z', 'h1', { userId: null })); // under alice's host
        await tx.insertAgent(agent('a-y', 'h2', { userId: 'alice' })); // alice's, under bob's host
        await tx.insertAgent(agent('a-x', 'h1', { userId: 'alice' })); // both: counted once
        await tx.insertAgent(agent('a-w', 'h2', { userId: 'bob' })); // not alice's
        await tx.insertAgent(agent('a-v', 'h2', { userId: null, createdAt: NOW - 1 }));
        await tx.insertAgent(agent('a-u', 'h1', { userId: null, createdAt: NOW - 1 }));
      });
      const page = (limit: number, offset: number): Promise<unknown[]> =>
        store.agentsOfUser('alice', { limit, offset }).then(ids);
      expect(await page(10, 0)).toEqual(['a-x', 'a-y', 'a-z', 'a-u']);
      expect(await page(2, 1)).toEqual(['a-y', 'a-z']);
      expect(await page(10, 4)).toEqual([]);
      expect(await store.countAgentsOfUser('alice')).toBe(4);
      expect(ids(await store.agentsOfUser('bob', { limit: 10, offset: 0 }))).toEqual(['a-w', 'a-y', 'a-v']);
      expect(await store.countAgentsOfUser('carol')).toBe(0);
    });

    it('deleting an agent deletes its grants, approvals (and their inbox entries), jobs and per-call rows, not its activity', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertApproval(approval('p1', 'a1', 'h1'));
        await tx.insertApproval(approval('p2', 'a2', 'h1'));
        await tx.putGrant(grant('g1', 'a1', { approvalId: 'p1' }));
        await tx.putGrant(grant('g2', 'a2'));
        await tx.insertPerCall(perCall('c1', 'a1'));
        await tx.appendActivity(activity({ agentId: 'a1' }));
      });
      await store.insertAsyncJob(asyncJob('j1', 'a1'));
      await store.markOpened('p1', 'alice', NOW);
      await store.write((tx) => tx.deleteAgent('a1'));
      expect(await store.agent('a1')).toBeUndefined();
      expect(await store.grants('a1')).toEqual([]);
      expect(await store.approval('p1')).toBeUndefined();
      expect(await store.asyncJob('j1')).toBeUndefined();
      expect(await store.perCall('c1')).toBeUndefined();
      expect(await store.inbox({ userId: 'alice', now: NOW, limit: 10 })).toEqual([]);
      expect(await store.activity({ agentId: 'a1', limit: 10 })).toHaveLength(1);
      expect(ids(await store.grants('a2'))).toEqual(['g2']);
      expect(await store.approval('p2')).toBeDefined();
    });
  });

  describe('grants', () => {
    it("round-trips every field; an agent's grants in creation order, revoked ones included", async () => {
      await seed();
      const g = grant('g1', 'a1', {
        capabilityVersion: null,
        constraints: { q: { eq: 'Zoë ✓ "quoted" \\ \n' } },
      });
      await store.write(async (tx) => {
        await tx.putGrant(grant('g3', 'a1', { createdAt: NOW + 1, status: 'revoked' }));
        await tx.putGrant(g);
        await tx.putGrant(
          grant('g2', 'a1', { constraints: null, proposedConstraints: null, approvedConstraints: null }),
        );
        await tx.putGrant(grant('g0', 'a2'));
      });
      const grants = await store.grants('a1');
      expect(ids(grants)).toEqual(['g1', 'g2', 'g3']); // ties of createdAt: insertion order
      expect(grants[0]).toEqual(g);
      expect(grants[1]).toMatchObject({
        constraints: null,
        proposedConstraints: null,
        approvedConstraints: null,
      });
      expect(await store.grants('nope')).toEqual([]);
    });

    it("putGrant replaces the agent's row for the same capability (a new id, counters reset), and only that one", async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.putGrant(grant('g1', 'a1', { capability: 'list_pets', status: 'denied' }));
        await tx.putGrant(grant('g2', 'a1', { capability: 'get_pet' }));
        await tx.putGrant(grant('g3', 'a2', { capability: 'list_pets' }));
      });
      await store.touch(new Map(), new Map(), new Map([['g1', { uses: 3, lastUsedAt: NOW }]]));
      await store.write((tx) =>
        tx.putGrant(grant('g4', 'a1', { capability: 'list_pets', status: 'pending' })),
      );
      expect((await store.grants('a1')).map((g) => [g.id, g.capability, g.status])).toEqual([
        ['g2', 'get_pet', 'active'],
        ['g4', 'list_pets', 'pending'],
      ]);
      expect(ids(await store.grants('a2'))).toEqual(['g3']);
      expect(await store.grantUses('a1')).toEqual(new Map());
    });

    it('insertGrant adds a first grant; a second for the same agent and capability is refused and changes nothing', async () => {
      await seed();
      const g = grant('g1', 'a1', { capability: 'list_pets' });
      await store.write((tx) => tx.insertGrant(g));
      expect(await store.grants('a1')).toEqual([g]);
      await expect(
        store.write(async (tx) => {
          await tx.insertGrant(grant('g2', 'a1', { capability: 'get_pet' }));
          await tx.insertGrant(grant('g3', 'a1', { capability: 'list_pets' }));
        }),
      ).rejects.toThrow();
      expect(await store.grants('a1')).toEqual([g]);
    });

    it('updates a grant', async () => {
      await seed();
      await store.write((tx) => tx.putGrant(grant('g1', 'a1', { status: 'pending' })));
      await store.write((tx) =>
        tx.updateGrant('g1', {
          status: 'active',
          approvedConstraints: { limit: { max: 3 } },
          capabilityVersion: 'v2',
        }),
      );
      expect((await store.grants('a1'))[0]).toMatchObject({
        status: 'active',
        approvedConstraints: { limit: { max: 3 } },
        capabilityVersion: 'v2',
        proposedConstraints: { limit: { max: 1000 } },
      });
    });

    it('finds the active grants of a capability at another version or none (drift)', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.putGrant(grant('g1', 'a1', { capability: 'list_pets', capabilityVersion: 'v1' }));
        await tx.putGrant(grant('g2', 'a2', { capability: 'list_pets', capabilityVersion: null }));
        await tx.putGrant(grant('g3', 'a1', { capability: 'get_pet', capabilityVersion: 'v1' }));
      });
      await store.write(async (tx) => {
        await tx.insertAgent(agent('a3', 'h1'));
        await tx.insertAgent(agent('a4', 'h1'));
        await tx.putGrant(grant('g4', 'a3', { capability: 'list_pets', capabilityVersion: 'v2' }));
        await tx.putGrant(
          grant('g5', 'a4', { capability: 'list_pets', capabilityVersion: 'v1', status: 'pending' }),
        );
      });
      expect(ids(await store.grantsOffVersion('list_pets', 'v2')).sort()).toEqual(['g1', 'g2']);
      expect(ids(await store.grantsOffVersion('list_pets', 'v1')).sort()).toEqual(['g2', 'g4']);
      expect(await store.grantsOffVersion('get_pet', 'v1')).toEqual([]);
      // Only active grants count; names nobody holds, or unknown, are left out.
      expect(await store.grantedCapabilities(['list_pets', 'get_pet', 'add_pet', 'no_such'])).toEqual(
        new Set(['list_pets', 'get_pet']),
      );
      await store.write(async (tx) => {
        await tx.putGrant(
          grant('g3', 'a1', { capability: 'get_pet', capabilityVersion: 'v1', status: 'revoked' }),
        );
      });
      expect(await store.grantedCapabilities(['list_pets', 'get_pet'])).toEqual(new Set(['list_pets']));
      expect(await store.grantedCapabilities([])).toEqual(new Set());
      // A name with JSON or SQL metacharacters is a name like any other.
      expect(await store.grantedCapabilities(['x"],"y', "z' OR 1=1 --"])).toEqual(new Set());
    });

    it('counts uses and raises the last use in batches (touch); grantUses lists used grants only', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.putGrant(grant('g1', 'a1'));
        await tx.putGrant(grant('g2', 'a1'));
        await tx.putGrant(grant('g3', 'a2'));
      });
      await store.touch(new Map(), new Map(), new Map([['g1', { uses: 2, lastUsedAt: NOW + 10 }]]));
      await store.touch(
        new Map(),
        new Map(),
        new Map([
          ['g1', { uses: 3, lastUsedAt: NOW + 5 }],
          ['g3', { uses: 1, lastUsedAt: NOW + 1 }],
          ['nope', { uses: 1, lastUsedAt: NOW }],
        ]),
      );
      expect(await store.grantUses('a1')).toEqual(new Map([['g1', { uses: 5, lastUsedAt: NOW + 10 }]]));
      expect(await store.grantUses('a2')).toEqual(new Map([['g3', { uses: 1, lastUsedAt: NOW + 1 }]]));
      expect(await store.grantUses('nope')).toEqual(new Map());
    });
  });

  describe('touch', () => {
    it('raises the last use of agents and hosts, never lowers it; unknown ids and empty batches do nothing', async () => {
      await seed();
      await store.touch(new Map(), new Map());
      await store.touch(
        new Map([
          ['a1', NOW + 10],
          ['nope', NOW],
        ]),
        new Map([['h1', NOW + 20]]),
      );
      await store.touch(
        new Map([
          ['a1', NOW + 5],
          ['a2', NOW + 7],
        ]),
        new Map([['h1', NOW + 1]]),
      );
      expect((await store.agent('a1'))?.lastUsedAt).toBe(NOW + 10);
      expect((await store.agent('a2'))?.lastUsedAt).toBe(NOW + 7);
      expect((await store.host('h1'))?.lastUsedAt).toBe(NOW + 20);
      expect((await store.agent('a1'))?.updatedAt).toBe(NOW);
    });

    it('loses no use when flushes run at once', async () => {
      await seed();
      await store.write((tx) => tx.putGrant(grant('g1', 'a1')));
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          store.touch(
            new Map([['a1', NOW + i]]),
            new Map([['h1', NOW + i]]),
            new Map([['g1', { uses: 1, lastUsedAt: NOW + i }]]),
          ),
        ),
      );
      expect(await store.grantUses('a1')).toEqual(new Map([['g1', { uses: 8, lastUsedAt: NOW + 7 }]]));
      expect((await store.agent('a1'))?.lastUsedAt).toBe(NOW + 7);
    });
  });

  describe('approvals', () => {
    it('round-trips every field, found by id and by user code', async () => {
      await seed();
      const p = approval('p1', 'a1', 'h1', {
        kind: 'registration',
        method: 'ciba',
        capabilities: [{ name: 'list_pets' }, { name: 'get_pet', constraints: { id: { in: [1, 2] } } }],
        status: 'approved',
        decidedAt: NOW + 1,
        decidedBy: 'alice',
      });
      await store.write((tx) => tx.insertApproval(p));
      expect(await store.approval('p1')).toEqual(p);
      expect(await store.approvalByUserCode('code-p1')).toEqual(p);
      expect(await store.approval('nope')).toBeUndefined();
      expect(await store.approvalByUserCode('nope')).toBeUndefined();
      await expect(
        store.write((tx) => tx.insertApproval(approval('p2', 'a1', 'h1', { userCode: 'code-p1' }))),
      ).rejects.toThrow();
    });

    it('updates an approval; deleting one keeps the grants that pointed at it, unlinked', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertApproval(approval('p1', 'a1', 'h1'));
        await tx.putGrant(grant('g1', 'a1', { approvalId: 'p1', status: 'pending' }));
      });
      await store.write((tx) =>
        tx.updateApproval('p1', { status: 'denied', decidedAt: NOW + 2, decidedBy: 'bob' }),
      );
      expect(await store.approval('p1')).toMatchObject({
        status: 'denied',
        decidedAt: NOW + 2,
        decidedBy: 'bob',
      });
      await store.write((tx) => tx.deleteApproval('p1'));
      expect(await store.approval('p1')).toBeUndefined();
      expect((await store.grants('a1'))[0]).toMatchObject({ id: 'g1', approvalId: null, status: 'pending' });
    });

    it('lists by status and agent, oldest first, a keyset page at a time; status alone needs a limit', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertApproval(approval('p3', 'a1', 'h1', { createdAt: NOW + 2 }));
        await tx.insertApproval(approval('p1', 'a2', 'h1', { status: 'expired' }));
        await tx.insertApproval(approval('p2', 'a1', 'h1', { createdAt: NOW + 1 }));
        await tx.insertApproval(approval('p0', 'a1', 'h1'));
      });
      expect(ids(await store.approvals({ limit: 10 }))).toEqual(['p0', 'p1', 'p2', 'p3']);
      expect(ids(await store.approvals({ status: 'pending', limit: 2 }))).toEqual(['p0', 'p2']);
      expect(ids(await store.approvals({ agentId: 'a1' }))).toEqual(['p0', 'p2', 'p3']);
      expect(ids(await store.approvals({ agentId: 'a2', status: 'pending' }))).toEqual([]);
      expect(
        ids(
          await store.approvals({
            status: 'pending',
            agentId: 'a1',
            after: { createdAt: NOW + 1, id: 'p2' },
          }),
        ),
      ).toEqual(['p3']);
      expect(ids(await store.approvals({ after: { createdAt: NOW, id: 'p0' }, limit: 10 }))).toEqual([
        'p1',
        'p2',
        'p3',
      ]);
      await expect(store.approvals({ status: 'pending' })).rejects.toThrow(/needs a page limit/);
    });

    it('overdue: pending ones whose deadline is at or before now, earliest first, at most limit', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertApproval(approval('p1', 'a1', 'h1', { expiresAt: NOW - 5 }));
        await tx.insertApproval(approval('p2', 'a1', 'h1', { expiresAt: NOW }));
        await tx.insertApproval(approval('p3', 'a1', 'h1', { expiresAt: NOW - 10 }));
        await tx.insertApproval(approval('p4', 'a1', 'h1', { expiresAt: NOW + 1 }));
        await tx.insertApproval(approval('p5', 'a1', 'h1', { expiresAt: NOW - 20, status: 'denied' }));
      });
      expect(ids(await store.overdueApprovals(NOW, 10))).toEqual(['p3', 'p1', 'p2']);
      expect(ids(await store.overdueApprovals(NOW, 2))).toEqual(['p3', 'p1']);
      expect(await store.overdueApprovals(NOW - 11, 10)).toEqual([]);
    });

    it("counts a host's open approvals (per-call ones too) and all pending ones not yet expired", async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
        await tx.insertAgent(agent('b1', 'h2'));
        await tx.insertApproval(approval('p1', 'a1', 'h1', { expiresAt: NOW + 1 }));
        await tx.insertApproval(approval('p2', 'a2', 'h1', { expiresAt: NOW }));
        await tx.insertApproval(approval('p3', 'a1', 'h1', { status: 'approved' }));
        await tx.insertApproval(approval('p4', 'b1', 'h2'));
        // Per-call approvals count with them: open ones of the host's agents only.
        await tx.insertPerCall(perCall('c1', 'a1', { expiresAt: NOW + 1 }));
        await tx.insertPerCall(perCall('c2', 'a2', { expiresAt: NOW }));
        await tx.insertPerCall(perCall('c3', 'a1', { status: 'completed' }));
        await tx.insertPerCall(perCall('c4', 'b1', { hostId: 'h2' }));
      });
      expect(await store.countOpenApprovals('h1', NOW)).toBe(2);
      expect(await store.countOpenApprovals('h1', NOW - 1)).toBe(4);
      expect(await store.countOpenApprovals('h2', NOW)).toBe(2);
      expect(await store.countOpenApprovals('nope', NOW)).toBe(0);
      expect(await store.countPendingApprovals(NOW)).toBe(2);
    });
  });

  describe('inbox', () => {
    beforeEach(async () => {
      await seed();
      await store.write(async (tx) => {
        const ciba = { method: 'ciba' as const };
        await tx.insertApproval(approval('p1', 'a1', 'h1', { ...ciba, loginHint: 'alice' }));
        await tx.insertApproval(
          approval('p2', 'a1', 'h1', { ...ciba, loginHint: 'bob', createdAt: NOW + 1 }),
        );
        await tx.insertApproval(approval('p3', 'a1', 'h1', { loginHint: 'alice', createdAt: NOW + 2 }));
        await tx.insertApproval(approval('p4', 'a2', 'h1', { loginHint: null, createdAt: NOW + 3 }));
        await tx.insertApproval(approval('p5', 'a2', 'h1', { ...ciba, loginHint: 'alice', expiresAt: NOW }));
        await tx.insertApproval(
          approval('p6', 'a2', 'h1', { ...ciba, loginHint: 'alice', status: 'denied' }),
        );
        await tx.insertApproval(
          approval('p7', 'a2', 'h1', { ...ciba, loginHint: 'alice', createdAt: NOW + 3 }),
        );
      });
    });

    it('holds CIBA requests for the user and device requests the user opened, open ones only, newest first', async () => {
      const inbox = (userId: string): Promise<unknown[]> =>
        store.inbox({ userId, now: NOW, limit: 10 }).then(ids);
      expect(await inbox('alice')).toEqual(['p7', 'p1']); // p3: a device request alice has not opened
      await store.markOpened('p3', 'alice', NOW);
      await store.markOpened('p4', 'alice', NOW);
      await store.markOpened('p4', 'alice', NOW + 5); // again: ignored
      await store.markOpened('p2', 'alice', NOW); // a CIBA request for bob: opening it changes nothing
      expect(await inbox('alice')).toEqual(['p7', 'p4', 'p3', 'p1']);
      expect(await inbox('bob')).toEqual(['p2']);
      expect(await store.inbox({ userId: 'alice', now: NOW + 60_000, limit: 10 })).toEqual([]);
    });

    it('pages by (createdAt, id) below the last one seen, at most limit', async () => {
      await store.markOpened('p4', 'alice', NOW);
      const page = (before?: { createdAt: number; id: string }): Promise<unknown[]> =>
        store.inbox({ userId: 'alice', now: NOW, limit: 2, ...(before ? { before } : {}) }).then(ids);
      expect(await page()).toEqual(['p7', 'p4']);
      expect(await page({ createdAt: NOW + 3, id: 'p4' })).toEqual(['p1']);
      expect(await page({ createdAt: NOW + 3, id: 'p7' })).toEqual(['p4', 'p1']);
    });

    it('refuses to record the opening of an approval that does not exist', async () => {
      await expect(store.markOpened('nope', 'alice', NOW)).rejects.toThrow();
    });
  });

  describe('activity', () => {
    it('appends in order with increasing ids; lists newest first, every field read back', async () => {
      const first = activity({ detail: { nested: { a: [1, 'two', null] }, unicode: 'Zoë ✓' } });
      await store.write((tx) => tx.appendActivity({ ...first, id: 12345 }));
      await store.appendActivities([
        activity({ type: 'b', detail: null, latencyMs: null, upstreamStatus: null, jti: null }),
        activity({ type: 'c', agentId: null, hostId: null, userId: null, capability: null }),
      ]);
      await store.appendActivities([]);
      const rows = await store.activity({ limit: 10 });
      expect(rows.map((r) => r.type)).toEqual(['c', 'b', 'execute']);
      const [c, b, a] = rows as [typeof first, typeof first, typeof first];
      expect(a.id! < b.id! && b.id! < c.id!).toBe(true);
      expect(a).toEqual({ ...first, id: a.id });
      expect(b).toMatchObject({ detail: null, latencyMs: null, upstreamStatus: null, jti: null });
      expect(c).toMatchObject({ agentId: null, hostId: null, userId: null, capability: null });
    });

    it('filters by agent, host, capability, time window and id, at most limit', async () => {
      await store.appendActivities([
        activity({ type: '1', at: NOW - 10 }),
        activity({ type: '2', agentId: 'a2', at: NOW - 5 }),
        activity({ type: '3', hostId: 'h2', capability: 'get_pet', at: NOW }),
        activity({ type: '4', at: NOW + 5 }),
      ]);
      const types = (q: Parameters<Store['activity']>[0]): Promise<string[]> =>
        store.activity(q).then((rows) => rows.map((r) => r.type));
      expect(await types({ agentId: 'a1', limit: 10 })).toEqual(['4', '3', '1']);
      expect(await types({ hostId: 'h2', limit: 10 })).toEqual(['3']);
      expect(await types({ capability: 'list_pets', limit: 10 })).toEqual(['4', '2', '1']);
      expect(await types({ since: NOW - 5, limit: 10 })).toEqual(['4', '3', '2']);
      expect(await types({ until: NOW, limit: 10 })).toEqual(['2', '1']);
      expect(await types({ since: NOW - 5, until: NOW + 5, limit: 10 })).toEqual(['3', '2']);
      expect(await types({ agentId: 'a1', capability: 'list_pets', since: NOW - 10, limit: 10 })).toEqual([
        '4',
        '1',
      ]);
      expect(await types({ limit: 2 })).toEqual(['4', '3']);
      const [, three] = await store.activity({ limit: 2 });
      expect(await types({ beforeId: three!.id!, limit: 10 })).toEqual(['2', '1']);
      expect(await types({ agentId: 'a1', beforeId: three!.id!, limit: 10 })).toEqual(['1']);
    });

    it('pages a time window without an owner newest first by (at, id), each row once, on any page size', async () => {
      // Times out of id order, as batched execution records are: an event logged directly may get
      // a lower id than an older execution still waiting in its batch (issue 17).
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 30 }),
          fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined }),
          fc.integer({ min: 0, max: 31 }),
          fc.integer({ min: 1, max: 6 }),
          async (times, since, until, limit) => {
            await store.write((tx) => tx.deleteAgentActivity('a1', 10_000));
            await store.appendActivities(times.map((at) => activity({ at })));
            const all = await store.activity({ limit: 1_000 });
            const expected = all
              .filter((r) => (since === undefined || r.at >= since) && r.at < until)
              .sort((x, y) => y.at - x.at || y.id! - x.id!)
              .map((r) => r.id);
            const window = { ...(since !== undefined ? { since } : {}), until, limit };
            const walked: unknown[] = [];
            let beforeId: number | undefined;
            for (let pages = 0; pages < 100; pages++) {
              const rows = await store.activity({
                ...window,
                ...(beforeId !== undefined ? { beforeId } : {}),
              });
              walked.push(...rows.map((r) => r.id));
              if (rows.length < limit) break;
              beforeId = rows[rows.length - 1]!.id;
            }
            expect(walked).toEqual(expected);
          },
        ),
        { numRuns: 40 },
      );
    });

    it('a window page whose cursor row was deleted meanwhile goes on below its id', async () => {
      // The first row written is the newest by time, so the first page's cursor is the lowest id.
      await store.appendActivities([40, 10, 20, 30].map((at) => activity({ at })));
      const [first] = await store.activity({ until: 100, limit: 1 });
      expect(first?.at).toBe(40);
      await store.write((tx) => tx.deleteAgentActivity('a1', 1)); // an erase (§9.2) of that row
      expect(await store.activity({ until: 100, beforeId: first!.id!, limit: 10 })).toEqual([]);
      expect((await store.activity({ until: 100, limit: 10 })).map((r) => r.at)).toEqual([30, 20, 10]);
    });

    it('deletes records dated before a time, oldest first, at most limit, and says how many', async () => {
      await store.appendActivities([
        activity({ type: 'old2', at: NOW - 2 }),
        activity({ type: 'old1', at: NOW - 3 }),
        activity({ type: 'edge', at: NOW }),
        activity({ type: 'new', at: NOW + 1 }),
      ]);
      expect(await store.deleteActivityBefore(NOW, 1)).toBe(1);
      expect((await store.activity({ limit: 10 })).map((r) => r.type)).toEqual(['new', 'edge', 'old2']);
      expect(await store.deleteActivityBefore(NOW, 10)).toBe(1);
      expect(await store.deleteActivityBefore(NOW, 10)).toBe(0);
      expect((await store.activity({ limit: 10 })).map((r) => r.type)).toEqual(['new', 'edge']);
    });

    it('deletes approval requests closed before a time, oldest decision first, at most limit; never pending ones', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertApproval(approval('p1', 'a1', 'h1', { status: 'denied', decidedAt: NOW - 2 }));
        await tx.insertApproval(approval('p2', 'a1', 'h1', { status: 'expired', decidedAt: NOW - 3 }));
        await tx.insertApproval(approval('p3', 'a2', 'h1', { status: 'approved', decidedAt: NOW }));
        await tx.insertApproval(approval('p4', 'a2', 'h1', { createdAt: NOW - 10 }));
      });
      expect(await store.deleteClosedApprovalsBefore(NOW, 1)).toBe(1);
      expect(await store.approval('p2')).toBeUndefined();
      expect(await store.deleteClosedApprovalsBefore(NOW, 10)).toBe(1);
      expect(await store.deleteClosedApprovalsBefore(NOW, 10)).toBe(0);
      expect((await store.approvals({ limit: 10 })).map((a) => a.id).sort()).toEqual(['p3', 'p4']);
    });

    it("deletes an agent's records oldest first, at most limit, in a transaction", async () => {
      await store.appendActivities([
        activity({ type: '1' }),
        activity({ type: '2', agentId: 'a2' }),
        activity({ type: '3' }),
        activity({ type: '4' }),
      ]);
      expect(await store.write((tx) => tx.deleteAgentActivity('a1', 2))).toBe(2);
      expect((await store.activity({ limit: 10 })).map((r) => r.type)).toEqual(['4', '2']);
      expect(await store.write((tx) => tx.deleteAgentActivity('a1', 5))).toBe(1);
      expect(await store.write((tx) => tx.deleteAgentActivity('a1', 5))).toBe(0);
    });
  });

  describe('async jobs', () => {
    it('round-trips a job; deletes expired ones (deadline before now), oldest first, at most limit', async () => {
      await seed();
      await store.insertAsyncJob(asyncJob('j1', 'a1', { expiresAt: NOW - 1 }));
      await store.insertAsyncJob(asyncJob('j2', 'a1', { expiresAt: NOW - 2, statusCapability: null }));
      await store.insertAsyncJob(asyncJob('j3', 'a2', { expiresAt: NOW }));
      expect(await store.asyncJob('j2')).toEqual(
        asyncJob('j2', 'a1', { expiresAt: NOW - 2, statusCapability: null }),
      );
      expect(await store.asyncJob('nope')).toBeUndefined();
      expect(await store.deleteExpiredAsyncJobs(NOW, 1)).toBe(1);
      expect(await store.asyncJob('j2')).toBeUndefined();
      expect(await store.deleteExpiredAsyncJobs(NOW, 10)).toBe(1);
      expect(await store.asyncJob('j1')).toBeUndefined();
      expect(await store.asyncJob('j3')).toBeDefined();
      expect(await store.deleteExpiredAsyncJobs(NOW, 10)).toBe(0);
    });

    it("forgets an agent's jobs beyond its newest `keep` (by creation, then id), and no other agent's", async () => {
      await seed();
      await store.insertAsyncJob(asyncJob('j1', 'a1', { createdAt: NOW - 3 }));
      await store.insertAsyncJob(asyncJob('j3', 'a1', { createdAt: NOW - 1 }));
      await store.insertAsyncJob(asyncJob('j2a', 'a1', { createdAt: NOW - 2 }));
      await store.insertAsyncJob(asyncJob('j2b', 'a1', { createdAt: NOW - 2 }));
      await store.insertAsyncJob(asyncJob('k1', 'a2', { createdAt: NOW - 9 }));
      expect(await store.forgetOlderAsyncJobs('a1', 2)).toBe(2);
      const left = async (ids: string[]): Promise<string[]> =>
        (await Promise.all(ids.map(async (id) => ((await store.asyncJob(id)) ? id : '')))).filter(Boolean);
      expect(await left(['j1', 'j2a', 'j2b', 'j3', 'k1'])).toEqual(['j2b', 'j3', 'k1']);
      expect(await store.forgetOlderAsyncJobs('a1', 2)).toBe(0);
      expect(await store.forgetOlderAsyncJobs('a2', 0)).toBe(1);
    });

    it('refuses a job of an unknown agent', async () => {
      await expect(store.insertAsyncJob(asyncJob('j1', 'nope'))).rejects.toThrow();
    });
  });

  describe('sessions', () => {
    it('round-trips a session (acr, amr, credential tag or none), deletes one, and sweeps expired ones at most limit', async () => {
      const oidc = session('s1');
      const password = session('s2', {
        authMethod: 'password',
        acr: null,
        amr: null,
        credentialTag: 'Xq3v9dN0bA1cD2eF3gH4iJ',
        expiresAt: NOW - 1,
      });
      await store.insertSession(oidc);
      await store.insertSession(password);
      await store.insertSession(session('s3', { expiresAt: NOW }));
      await store.insertSession(session('s4', { expiresAt: NOW + 1 }));
      expect(await store.session('s1')).toEqual(oidc);
      expect(await store.session('s2')).toEqual(password);
      expect(await store.session('nope')).toBeUndefined();
      await store.deleteSession('s1');
      expect(await store.session('s1')).toBeUndefined();
      expect(await store.deleteExpiredSessions(NOW, 1)).toBe(1);
      expect(await store.session('s2')).toBeUndefined();
      expect(await store.deleteExpiredSessions(NOW, 10)).toBe(1);
      expect(await store.session('s3')).toBeUndefined();
      expect(await store.session('s4')).toBeDefined();
    });

    it('refuses an auth method nobody defined', async () => {
      await expect(store.insertSession(session('s1', { authMethod: 'magic' as never }))).rejects.toThrow();
    });
  });

  describe('passkeys', () => {
    const enrol = (...keys: PasskeyRecord[]): Promise<void> =>
      store.write(async (tx) => {
        for (const k of keys) await tx.insertPasskey(k);
      });

    it('round-trips a passkey, its public key a plain Uint8Array; lists a user’s oldest first', async () => {
      const k = passkey('k2', { counter: 2 ** 32 - 1, lastUsedAt: NOW + 1 });
      await enrol(k, passkey('k1', { createdAt: NOW + 1 }), passkey('k3', { userId: 'bob' }), passkey('k0'));
      const read = await store.passkey('k2');
      expect(read).toEqual(k);
      expect(Object.getPrototypeOf(read!.publicKey)).toBe(Uint8Array.prototype);
      expect(ids(await store.passkeys('alice'))).toEqual(['k0', 'k2', 'k1']);
      expect(await store.passkeys('carol')).toEqual([]);
      expect(await store.passkey('nope')).toBeUndefined();
      // The transaction reads what it wrote.
      expect(await store.write(async (tx) => ids(await tx.passkeys('alice')))).toEqual(['k0', 'k2', 'k1']);
    });

    it('records a use; deletes a passkey only for its owner', async () => {
      await enrol(passkey('k1'));
      await store.recordPasskeyUse('k1', 7, NOW + 3);
      expect(await store.passkey('k1')).toMatchObject({ counter: 7, lastUsedAt: NOW + 3 });
      expect(await store.write((tx) => tx.deletePasskey('k1', 'bob'))).toBe(false);
      expect(await store.passkey('k1')).toBeDefined();
      expect(await store.write((tx) => tx.deletePasskey('k1', 'alice'))).toBe(true);
      expect(await store.write((tx) => tx.deletePasskey('k1', 'alice'))).toBe(false);
      expect(await store.passkey('k1')).toBeUndefined();
    });

    it('a rolled-back transaction leaves no passkey behind, nor its removal', async () => {
      await enrol(passkey('k1'));
      const boom = new Error('boom');
      await expect(
        store.write(async (tx) => {
          await tx.insertPasskey(passkey('k2'));
          await tx.deletePasskey('k1', 'alice');
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(ids(await store.passkeys('alice'))).toEqual(['k1']);
    });

    it('concurrent enrolments that each count first never pass the cap (no write skew)', async () => {
      await enrol(passkey('k0'), passkey('k1'));
      const add = (id: string): Promise<boolean> =>
        store.write(async (tx) => {
          if ((await tx.passkeys('alice')).length >= 3) return false;
          await tx.insertPasskey(passkey(id));
          return true;
        });
      const added = await Promise.all(['k2', 'k3', 'k4', 'k5'].map(add));
      expect(added.filter(Boolean)).toHaveLength(1);
      expect(await store.passkeys('alice')).toHaveLength(3);
    });

    it('keeps one enrolment code per user: replaced by a new one, taken once, only when right and unexpired', async () => {
      const put = (user: string, hash: string, expiresAt: number): Promise<void> =>
        store.write((tx) => tx.putEnrolmentCode(user, hash, expiresAt));
      const take = (user: string, hash: string, now = NOW): Promise<boolean> =>
        store.write((tx) => tx.takeEnrolmentCode(user, hash, now));
      await put('alice', 'h1', NOW + 1000);
      await put('alice', 'h2', NOW + 1000);
      await put('bob', 'h1', NOW + 1000);
      expect(await store.hasEnrolmentCode('alice', 'h1', NOW)).toBe(false);
      expect(await store.hasEnrolmentCode('alice', 'h2', NOW)).toBe(true);
      expect(await take('alice', 'h1')).toBe(false); // replaced
      expect(await take('carol', 'h2')).toBe(false); // another user's hash is not theirs
      expect(await store.hasEnrolmentCode('alice', 'h2', NOW + 1000)).toBe(false); // expired then
      expect(await take('alice', 'h2', NOW + 1000)).toBe(false);
      expect(await store.hasEnrolmentCode('alice', 'h2', NOW)).toBe(true); // a refusal keeps it
      expect(await take('alice', 'h2')).toBe(true);
      expect(await take('alice', 'h2')).toBe(false); // once
      expect(await store.hasEnrolmentCode('alice', 'h2', NOW)).toBe(false);
      expect(await take('bob', 'h1')).toBe(true);
    });

    it('ends every session of one user, and only theirs', async () => {
      await store.insertSession(session('s1'));
      await store.insertSession(session('s2', { authMethod: 'password', acr: null, amr: null }));
      await store.insertSession(session('s3', { userId: 'bob' }));
      expect(await store.write((tx) => tx.deleteSessionsOf('alice'))).toBe(2);
      expect(await store.session('s1')).toBeUndefined();
      expect(await store.session('s2')).toBeUndefined();
      expect(await store.session('s3')).toBeDefined();
      expect(await store.write((tx) => tx.deleteSessionsOf('alice'))).toBe(0);
    });
  });

  describe('approval-page state (shared by replicas, issue 13)', () => {
    const pending = (n: number, over: Partial<OidcPendingRecord> = {}): OidcPendingRecord => ({
      stateHash: `state${n}`,
      nonce: `nonce${n}`,
      verifier: `verifier${n}`,
      returnTo: `/approvals/${n}`,
      fresh: n % 2 === 0,
      browserHash: 'browser',
      expiresAt: NOW + 600_000 + n,
      ...over,
    });
    const challenge = (n: number, owner = 'ip:1', over: Partial<ChallengeRecord> = {}): ChallengeRecord => ({
      challengeHash: `challenge${n}`,
      owner,
      data: JSON.stringify({ n }),
      expiresAt: NOW + 120_000,
      ...over,
    });
    const LIMITS = { perOwner: 5, total: 10_000 };

    it('a pending OIDC sign-in round-trips, is taken once, only by its browser, and not once expired', async () => {
      await store.insertOidcPending(pending(1), 10, NOW);
      await store.insertOidcPending(pending(2), 10, NOW);
      expect(await store.takeOidcPending('state1', 'another browser', NOW)).toBeUndefined();
      expect(await store.takeOidcPending('state1', 'browser', NOW)).toEqual(pending(1));
      expect(await store.takeOidcPending('state1', 'browser', NOW)).toBeUndefined();
      expect(await store.takeOidcPending('state2', 'browser', NOW + 600_002)).toBeUndefined();
      expect(await store.takeOidcPending('state2', 'browser', NOW)).toBeUndefined();
    });

    it('pending OIDC sign-ins: at most max unexpired, the one expiring first evicted', async () => {
      for (const n of [1, 2, 3]) await store.insertOidcPending(pending(n), 3, NOW);
      await store.insertOidcPending(pending(4), 3, NOW);
      expect(await store.takeOidcPending('state1', 'browser', NOW)).toBeUndefined();
      for (const n of [2, 3, 4])
        expect(await store.takeOidcPending(`state${n}`, 'browser', NOW)).toBeDefined();
      // Expired ones do not count: nothing unexpired is evicted for them.
      await store.insertOidcPending(pending(5, { expiresAt: NOW }), 1, NOW - 1);
      await store.insertOidcPending(pending(6), 1, NOW);
      expect(await store.takeOidcPending('state6', 'browser', NOW)).toBeDefined();
    });

    it('of two concurrent takes of one pending sign-in, or of one challenge, exactly one gets it', async () => {
      for (let i = 0; i < 5; i++) {
        await store.insertOidcPending(pending(i), 100, NOW);
        await store.issueChallenge(challenge(i, `ip:${i}`), LIMITS, NOW);
        const oidc = await Promise.all([
          store.takeOidcPending(`state${i}`, 'browser', NOW),
          store.takeOidcPending(`state${i}`, 'browser', NOW),
        ]);
        expect(oidc.filter((r) => r !== undefined)).toHaveLength(1);
        const taken = await Promise.all([
          store.takeChallenge(`challenge${i}`, NOW),
          store.takeChallenge(`challenge${i}`, NOW),
        ]);
        expect(taken.filter((r) => r !== undefined)).toEqual([challenge(i, `ip:${i}`)]);
      }
    });

    it('a challenge is taken once, and not once expired', async () => {
      expect(await store.issueChallenge(challenge(1), LIMITS, NOW)).toBe(true);
      expect(await store.issueChallenge(challenge(2), LIMITS, NOW)).toBe(true);
      expect(await store.takeChallenge('challenge1', NOW)).toEqual(challenge(1));
      expect(await store.takeChallenge('challenge1', NOW)).toBeUndefined();
      expect(await store.takeChallenge('challenge2', NOW + 120_000)).toBeUndefined();
      expect(await store.takeChallenge('challenge2', NOW)).toBeUndefined();
      expect(await store.takeChallenge('nope', NOW)).toBeUndefined();
    });

    it("challenges per owner: a new one evicts that owner's oldest, never another owner's", async () => {
      const limits = { perOwner: 3, total: 100 };
      await store.issueChallenge(challenge(0, 'ip:2'), limits, NOW);
      for (let n = 1; n <= 4; n++) expect(await store.issueChallenge(challenge(n), limits, NOW)).toBe(true);
      expect(await store.takeChallenge('challenge1', NOW)).toBeUndefined();
      for (const n of [0, 2, 3, 4]) expect(await store.takeChallenge(`challenge${n}`, NOW)).toBeDefined();
    });

    it('challenges in total: once full of unexpired ones a new one is refused, nothing evicted', async () => {
      const limits = { perOwner: 5, total: 3 };
      for (let n = 1; n <= 3; n++)
        expect(await store.issueChallenge(challenge(n, `ip:${n}`), limits, NOW)).toBe(true);
      expect(await store.issueChallenge(challenge(4, 'ip:4'), limits, NOW)).toBe(false);
      for (let n = 1; n <= 3; n++) expect(await store.takeChallenge(`challenge${n}`, NOW)).toBeDefined();
      expect(await store.takeChallenge('challenge4', NOW)).toBeUndefined();
      // Expired ones do not count.
      for (let n = 5; n <= 7; n++) {
        await store.issueChallenge(challenge(n, `ip:${n}`, { expiresAt: NOW }), limits, NOW - 1);
      }
      expect(await store.issueChallenge(challenge(8, 'ip:8'), limits, NOW)).toBe(true);
    });

    it("the total counts owners of one kind: strangers' (ip:) sign-in challenges leave signed-in (session:) ones room", async () => {
      const limits = { perOwner: 5, total: 2 };
      for (let n = 1; n <= 2; n++)
        expect(await store.issueChallenge(challenge(n, `ip:${n}`), limits, NOW)).toBe(true);
      expect(await store.issueChallenge(challenge(3, 'ip:3'), limits, NOW)).toBe(false);
      expect(await store.issueChallenge(challenge(4, 'session:a'), limits, NOW)).toBe(true);
      expect(await store.issueChallenge(challenge(5, 'session:b'), limits, NOW)).toBe(true);
      expect(await store.issueChallenge(challenge(6, 'session:c'), limits, NOW)).toBe(false);
    });

    it('challenge bounds hold under concurrent issues: never more than total, nor perOwner for one owner', async () => {
      const limits = { perOwner: 3, total: 4 };
      const issued = await Promise.all(
        Array.from({ length: 10 }, (_, n) => store.issueChallenge(challenge(n, `ip:${n}`), limits, NOW)),
      );
      expect(issued.filter(Boolean)).toHaveLength(4);
      for (let n = 0; n < 10; n++) await store.takeChallenge(`challenge${n}`, NOW);
      await Promise.all(
        Array.from({ length: 8 }, (_, n) => store.issueChallenge(challenge(20 + n, 'ip:same'), limits, NOW)),
      );
      const left = await Promise.all(
        Array.from({ length: 8 }, (_, n) => store.takeChallenge(`challenge${20 + n}`, NOW)),
      );
      expect(left.filter((c) => c !== undefined)).toHaveLength(3);
    });

    it('a TOTP step is used once per user; an earlier step after a later one is refused too', async () => {
      expect(await store.useTotpStep('alice', 100, NOW)).toBe(true);
      expect(await store.useTotpStep('alice', 100, NOW)).toBe(false);
      expect(await store.useTotpStep('alice', 99, NOW)).toBe(false);
      expect(await store.useTotpStep('bob', 100, NOW)).toBe(true);
      expect(await store.useTotpStep('alice', 101, NOW)).toBe(true);
      const both = await Promise.all([
        store.useTotpStep('carol', 7, NOW),
        store.useTotpStep('carol', 7, NOW),
      ]);
      expect(both.filter(Boolean)).toHaveLength(1);
    });

    it('sweeps expired rows of each table, at most limit of each, and says the most from one', async () => {
      for (let n = 0; n < 3; n++) {
        await store.insertOidcPending(pending(n, { expiresAt: NOW - n }), 100, NOW - 10);
        await store.issueChallenge(challenge(n, `ip:${n}`, { expiresAt: NOW - n }), LIMITS, NOW - 10);
        await store.useTotpStep(`user${n}`, 1, NOW - n);
        await store.write((tx) => tx.putEnrolmentCode(`user${n}`, 'code', NOW - n));
      }
      await store.write((tx) => tx.putEnrolmentCode('alice', 'code', NOW + 1));
      await store.insertOidcPending(pending(9), 100, NOW);
      await store.issueChallenge(challenge(9), LIMITS, NOW);
      await store.useTotpStep('alice', 1, NOW + 1);
      expect(await store.deleteExpiredSignInState(NOW, 2)).toBe(2);
      expect(await store.deleteExpiredSignInState(NOW, 2)).toBe(1);
      expect(await store.deleteExpiredSignInState(NOW, 2)).toBe(0);
      // What was kept: the unexpired rows, and a used step stays refused until it is swept.
      expect(await store.takeOidcPending('state9', 'browser', NOW)).toBeDefined();
      expect(await store.takeChallenge('challenge9', NOW)).toBeDefined();
      expect(await store.useTotpStep('alice', 1, NOW + 1)).toBe(false);
      expect(await store.useTotpStep('user0', 1, NOW + 1)).toBe(true);
      // An expired enrolment code is gone, not only refused: asked as of before its expiry, too.
      expect(await store.hasEnrolmentCode('user0', 'code', NOW - 100)).toBe(false);
      expect(await store.hasEnrolmentCode('alice', 'code', NOW)).toBe(true);
    });
  });

  describe('per-call approvals', () => {
    it('round-trips every field, whatever JSON the result is', async () => {
      await seed();
      const results: unknown[] = ['text', 0, false, [1, { b: 'x' }], { rows: [{ id: 1, name: 'Rex' }] }];
      const records = results.map((result, i) =>
        perCall(`c${i}`, 'a1', {
          status: 'completed',
          result,
          decidedAt: NOW + 1,
          decidedBy: 'alice',
          createdAt: NOW + i,
        }),
      );
      const failed = perCall('cf', 'a1', {
        status: 'failed',
        error: { error: 'upstream_error', status: 502 },
      });
      await store.write(async (tx) => {
        for (const r of [...records, failed]) await tx.insertPerCall(r);
      });
      for (const r of [...records, failed]) expect(await store.perCall(r.id)).toEqual(r);
      expect(await store.perCall('nope')).toBeUndefined();
    });

    it("keeps JSON as given: the upstream's key order, and any string (NUL included)", async () => {
      await seed();
      const result = { zeta: 1, alpha: { y: 'NUL \u0000 inside', b: [] }, mid: null };
      const args = { z: 1, a: 2 };
      await store.write((tx) =>
        tx.insertPerCall(perCall('c1', 'a1', { arguments: args, status: 'completed', result })),
      );
      const read = await store.perCall('c1');
      expect(read?.result).toEqual(result);
      expect(Object.keys(read!.result as object)).toEqual(['zeta', 'alpha', 'mid']);
      expect(Object.keys((read!.result as { alpha: object }).alpha)).toEqual(['y', 'b']);
      expect(Object.keys(read!.arguments)).toEqual(['z', 'a']);
    });

    it('moves a row on only from the expected status (compare-and-set); an empty patch moves nothing', async () => {
      await seed();
      await store.write((tx) => tx.insertPerCall(perCall('c1', 'a1')));
      const move = (from: PerCallRecord['status'], patch: Partial<PerCallRecord>): Promise<boolean> =>
        store.write((tx) => tx.updatePerCall('c1', from, patch));
      expect(await move('executing', { status: 'completed' })).toBe(false);
      expect(await move('pending', {})).toBe(false);
      expect(await move('pending', { status: 'executing', decidedAt: NOW + 1, decidedBy: 'alice' })).toBe(
        true,
      );
      expect(await move('pending', { status: 'failed' })).toBe(false);
      expect(await move('executing', { status: 'completed', result: { ok: true } })).toBe(true);
      expect(await store.perCall('c1')).toMatchObject({
        status: 'completed',
        result: { ok: true },
        decidedAt: NOW + 1,
        decidedBy: 'alice',
      });
      expect(await store.write((tx) => tx.updatePerCall('nope', 'pending', { status: 'executing' }))).toBe(
        false,
      );
    });

    it('of two concurrent decisions, exactly one moves the row', async () => {
      await seed();
      await store.write((tx) => tx.insertPerCall(perCall('c1', 'a1')));
      const decide = (by: string): Promise<boolean> =>
        store.write(async (tx) => {
          const current = await tx.perCall('c1');
          if (current?.status !== 'pending') return false;
          return tx.updatePerCall('c1', 'pending', { status: 'executing', decidedBy: by, decidedAt: NOW });
        });
      const outcomes = await Promise.all([decide('alice'), decide('bob'), decide('carol')]);
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      const winner = ['alice', 'bob', 'carol'][outcomes.indexOf(true)];
      expect((await store.perCall('c1'))?.decidedBy).toBe(winner);
    });

    it('addressed to a user, or to the approvers (null): open ones, newest first, at most limit', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertPerCall(perCall('c1', 'a1'));
        await tx.insertPerCall(perCall('c2', 'a1', { createdAt: NOW + 1 }));
        await tx.insertPerCall(perCall('c3', 'a1', { expiresAt: NOW }));
        await tx.insertPerCall(perCall('c4', 'a1', { status: 'executing' }));
        await tx.insertPerCall(perCall('c5', 'a2', { userId: null }));
        await tx.insertPerCall(perCall('c6', 'a2', { userId: 'bob' }));
        await tx.insertPerCall(perCall('c0', 'a1'));
      });
      expect(ids(await store.perCallsAddressedTo('alice', NOW, 10))).toEqual(['c2', 'c1', 'c0']);
      expect(ids(await store.perCallsAddressedTo('alice', NOW, 2))).toEqual(['c2', 'c1']);
      expect(ids(await store.perCallsAddressedTo(null, NOW, 10))).toEqual(['c5']);
      expect(ids(await store.perCallsAddressedTo('carol', NOW, 10))).toEqual([]);
      expect(await store.countOpenPerCalls('a1', NOW)).toBe(3);
      expect(await store.countOpenPerCalls('a1', NOW - 1)).toBe(4);
      expect(await store.countOpenPerCalls('a2', NOW)).toBe(2);
      // An agent's pending rows, past their deadline or not, soonest deadline first.
      const pendingA1 = ids(await store.pendingPerCallsOf('a1', 10));
      expect(pendingA1[0]).toBe('c3');
      expect([...pendingA1].sort()).toEqual(['c0', 'c1', 'c2', 'c3']);
      expect(await store.pendingPerCallsOf('a1', 2)).toHaveLength(2);
      expect(ids(await store.pendingPerCallsOf('a2', 10)).sort()).toEqual(['c5', 'c6']);
    });

    it("the operator's list: newest first, by status, below a keyset position, at most limit", async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertPerCall(perCall('c1', 'a1'));
        await tx.insertPerCall(perCall('c2', 'a1', { status: 'completed', createdAt: NOW + 1 }));
        await tx.insertPerCall(perCall('c3', 'a1', { createdAt: NOW + 2 }));
        await tx.insertPerCall(perCall('c0', 'a1'));
      });
      expect(ids(await store.perCalls({ limit: 10 }))).toEqual(['c3', 'c2', 'c1', 'c0']);
      expect(ids(await store.perCalls({ limit: 2 }))).toEqual(['c3', 'c2']);
      expect(ids(await store.perCalls({ status: 'pending', limit: 10 }))).toEqual(['c3', 'c1', 'c0']);
      expect(ids(await store.perCalls({ before: { createdAt: NOW + 1, id: 'c2' }, limit: 10 }))).toEqual([
        'c1',
        'c0',
      ]);
      expect(
        ids(await store.perCalls({ status: 'pending', before: { createdAt: NOW, id: 'c1' }, limit: 10 })),
      ).toEqual(['c0']);
    });

    it('overdue pending rows (deadline at or before now) at most limit; stale rows swept by keep-until; one deleted', async () => {
      await seed();
      await store.write(async (tx) => {
        await tx.insertPerCall(perCall('c1', 'a1', { expiresAt: NOW - 1, keepUntil: NOW - 1 }));
        await tx.insertPerCall(perCall('c2', 'a1', { expiresAt: NOW, keepUntil: NOW }));
        await tx.insertPerCall(perCall('c3', 'a1', { expiresAt: NOW + 1, keepUntil: NOW + 1 }));
        await tx.insertPerCall(
          perCall('c4', 'a1', { expiresAt: NOW - 1, status: 'completed', keepUntil: NOW - 2 }),
        );
      });
      expect(ids(await store.overduePerCalls(NOW, 10)).sort()).toEqual(['c1', 'c2']);
      expect(await store.overduePerCalls(NOW, 1)).toHaveLength(1);
      expect(await store.deleteStalePerCalls(NOW, 2)).toBe(2);
      expect(await store.deleteStalePerCalls(NOW, 2)).toBe(1);
      expect(await store.deleteStalePerCalls(NOW, 2)).toBe(0);
      expect(ids(await store.perCalls({ limit: 10 }))).toEqual(['c3']);
      await store.write((tx) => tx.deletePerCall('c3'));
      expect(await store.perCall('c3')).toBeUndefined();
    });

    it('abandoned calls: executing rows claimed at or before the time, oldest first, at most limit', async () => {
      await seed();
      const executing = (createdAt: number, decidedAt: number | null) =>
        ({ status: 'executing', createdAt, decidedAt, keepUntil: NOW + 1000 }) as const;
      await store.write(async (tx) => {
        // Claimed long ago, claimed just at the time, claimed after it (created long before).
        await tx.insertPerCall(perCall('c1', 'a1', executing(NOW - 50, NOW - 40)));
        await tx.insertPerCall(perCall('c2', 'a1', executing(NOW - 60, NOW)));
        await tx.insertPerCall(perCall('c3', 'a1', executing(NOW - 70, NOW + 1)));
        // Not executing: pending, or finished, however old.
        await tx.insertPerCall(perCall('c4', 'a1', { createdAt: NOW - 80 }));
        await tx.insertPerCall(
          perCall('c5', 'a1', { status: 'failed', createdAt: NOW - 90, decidedAt: NOW - 90 }),
        );
      });
      expect(ids(await store.abandonedPerCalls(NOW, 10))).toEqual(['c2', 'c1']);
      expect(ids(await store.abandonedPerCalls(NOW, 1))).toEqual(['c2']);
      expect(ids(await store.abandonedPerCalls(NOW - 41, 10))).toEqual([]);
      expect(ids(await store.abandonedPerCalls(NOW + 1, 10))).toEqual(['c3', 'c2', 'c1']);
    });
  });

  describe('stale pending registrations', () => {
    it('deletes never-activated pending agents, then pending hosts left without agents, created before, bounded', async () => {
      const old = NOW - 1000;
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending', createdAt: old }));
        await tx.insertHost(host('h2', { thumbprint: 'tp-h2', status: 'pending', createdAt: old }));
        await tx.insertHost(host('h3', { thumbprint: 'tp-h3', status: 'pending', createdAt: NOW }));
        await tx.insertHost(host('h4', { thumbprint: 'tp-h4', status: 'active', createdAt: old }));
        await tx.insertAgent(agent('a1', 'h1', { status: 'pending', activatedAt: null, createdAt: old }));
        await tx.insertAgent(agent('a2', 'h4', { status: 'pending', activatedAt: null, createdAt: old + 1 }));
        await tx.insertAgent(agent('a3', 'h4', { status: 'pending', activatedAt: old, createdAt: old })); // reactivating
        await tx.insertAgent(agent('a4', 'h4', { status: 'pending', activatedAt: null, createdAt: NOW }));
        await tx.insertAgent(agent('a5', 'h4', { status: 'active', activatedAt: null, createdAt: old }));
        // Its registration's request ran out unanswered.
        await tx.insertApproval(approval('p1', 'a1', 'h1', { kind: 'registration', expiresAt: old + 600 }));
      });
      // Limit 1: the oldest stale agent (a1), then one host without agents (h1 now, or h2).
      expect(await store.deleteStalePending(NOW, 1, NOW)).toEqual({ agents: 1, hosts: 1, rejected: 0 });
      expect(await store.agent('a1')).toBeUndefined();
      expect(await store.approval('p1')).toBeUndefined();
      expect(await store.deleteStalePending(NOW, 10, NOW)).toEqual({ agents: 1, hosts: 1, rejected: 0 });
      expect(await store.deleteStalePending(NOW, 10, NOW)).toEqual({ agents: 0, hosts: 0, rejected: 0 });
      expect(ids(await store.agents({ limit: 10 }))).toEqual(['a3', 'a5', 'a4']);
      expect(ids(await store.hosts({ limit: 10 }))).toEqual(['h4', 'h3']);
    });

    it('keeps an agent whose registration still waits for a person (retried or extended)', async () => {
      const old = NOW - 1000;
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending', createdAt: old }));
        await tx.insertAgent(agent('a1', 'h1', { status: 'pending', activatedAt: null, createdAt: old }));
        await tx.insertApproval(approval('p1', 'a1', 'h1', { kind: 'registration', expiresAt: NOW + 1 }));
      });
      expect(await store.deleteStalePending(NOW, 10, NOW)).toEqual({ agents: 0, hosts: 0, rejected: 0 });
      expect((await store.approval('p1'))?.status).toBe('pending');
      // Once that request has run out too, it goes.
      expect(await store.deleteStalePending(NOW, 10, NOW + 1)).toEqual({ agents: 1, hosts: 1, rejected: 0 });
    });

    it('rejects a stale pending host whose agents were all denied: the denial stays, its pool slot is freed', async () => {
      const old = NOW - 1000;
      await store.write(async (tx) => {
        await tx.insertHost(host('h1', { status: 'pending', createdAt: old }));
        await tx.insertAgent(agent('a1', 'h1', { status: 'rejected', activatedAt: null, createdAt: old }));
        await tx.insertAgent(agent('a2', 'h1', { status: 'pending', activatedAt: null, createdAt: old }));
      });
      expect(await store.deleteStalePending(NOW, 10, NOW)).toEqual({ agents: 1, hosts: 0, rejected: 1 });
      expect((await store.host('h1'))?.status).toBe('rejected');
      expect(await store.countHosts('pending')).toBe(0);
      expect((await store.agent('a1'))?.status).toBe('rejected');
    });
  });

  describe('ping', () => {
    it('answers while the database is up, and again and again', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      await Promise.all([store.ping(), store.ping()]);
      await store.write((tx) => tx.insertHost(host('h1')));
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });

  describe('write transactions', () => {
    it("resolves with fn's value; fn's reads see its own writes", async () => {
      const seen = await store.write(async (tx) => {
        await tx.insertHost(host('h1'));
        await tx.updateHost('h1', { name: 'inside' });
        return (await tx.host('h1'))?.name;
      });
      expect(seen).toBe('inside');
    });

    it('all or nothing: when fn throws, none of its writes persist and write rejects with its error', async () => {
      await seed();
      const boom = new Error('boom');
      await expect(
        store.write(async (tx) => {
          await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
          await tx.updateAgent('a1', { status: 'revoked' });
          await tx.putGrant(grant('g1', 'a1'));
          await tx.deleteAgent('a2');
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await store.host('h2')).toBeUndefined();
      expect((await store.agent('a1'))?.status).toBe('active');
      expect(await store.grants('a1')).toEqual([]);
      expect(await store.agent('a2')).toBeDefined();
    });

    it('all or nothing: a statement the database refuses rolls back the earlier ones', async () => {
      await seed();
      await expect(
        store.write(async (tx) => {
          await tx.insertHost(host('h2', { thumbprint: 'tp-h2' }));
          await tx.insertAgent(agent('a1', 'h2')); // duplicate id
        }),
      ).rejects.toThrow();
      expect(await store.host('h2')).toBeUndefined();
    });

    it('reads outside a write never see its changes before it commits (rolled back: never)', async () => {
      // A read made while the transaction is open either runs beside it (PostgreSQL: the state
      // before) or waits for it to end (SQLite, one connection): either way it cannot see a row
      // that is then rolled back.
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let inserted!: () => void;
      const insertedYet = new Promise<void>((resolve) => (inserted = resolve));
      const writing = store.write(async (tx) => {
        await tx.insertHost(host('h1'));
        inserted();
        await gate;
        throw new Error('changed my mind');
      });
      await insertedYet;
      const reading = store.host('h1');
      release();
      await expect(writing).rejects.toThrow('changed my mind');
      expect(await reading).toBeUndefined();
      expect(await store.host('h1')).toBeUndefined();
    });

    it('concurrent read-then-update writes never lose an update', async () => {
      await store.write((tx) => tx.insertHost(host('h1', { name: '0' })));
      const increment = (tx: StoreWriter): Promise<void> =>
        tx.host('h1').then((h) => tx.updateHost('h1', { name: String(Number(h!.name) + 1) }));
      await Promise.all(Array.from({ length: 5 }, () => store.write(increment)));
      expect((await store.host('h1'))?.name).toBe('5');
    });

    it('concurrent writes that each insert a row after counting them see each other (no write skew)', async () => {
      // Each admits a pending host only while fewer than 2 are pending (the pending-host bound).
      const admit = (id: string): Promise<boolean> =>
        store.write(async (tx) => {
          if ((await tx.countHosts('pending')) >= 2) return false;
          await tx.insertHost(host(id, { thumbprint: `tp-${id}`, status: 'pending' }));
          return true;
        });
      const admitted = await Promise.all(['h1', 'h2', 'h3', 'h4'].map(admit));
      expect(admitted.filter(Boolean)).toHaveLength(2);
      expect(await store.countHosts('pending')).toBe(2);
    });
  });
});
