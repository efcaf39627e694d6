/**
 * Policy `hosts` (§2.8) against what happened to those hosts after the file was written: a key
 * the host rotated away (§5.9), a host revoked (§5.10) or linked to another user (§2.9). Each
 * entry is applied at every start-up and reload; one the stored state rules out is skipped with a
 * warning naming it, and the proxy starts. A reload applies the entries in one transaction with
 * drift (§2.12): refused, it leaves nothing of the new policy behind.
 */
import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { StoreWriter } from '../../../src/storage/types.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { writePolicy } from '../../helpers/protocol.js';

let gw: Gateway | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await gw?.close();
  gw = undefined;
});

interface Entry {
  readonly key: TestKey;
  readonly name: string;
  readonly userId: string;
  readonly defaults: readonly string[];
}

function policy(entries: readonly Entry[]): string {
  return [
    'rate_limits:',
    '  unknown_host_registration: null',
    'hosts:',
    ...entries.flatMap((e) => [
      `  - name: ${e.name}`,
      `    public_key: { kty: OKP, crv: Ed25519, x: ${e.key.publicJwk.x} }`,
      `    user_id: ${e.userId}`,
      `    default_capabilities: [${e.defaults.join(', ')}]`,
    ]),
    '',
  ].join('\n');
}

/** A gateway on `file` (and `db`, to restart on the same state), its log lines kept in `lines`. */
async function start(file: string, lines: string[], db?: string): Promise<Gateway> {
  gw = await startGateway({ policyFile: file, logSink: (l) => lines.push(l), ...(db ? { db } : {}) });
  return gw;
}

async function restart(file: string, lines: string[]): Promise<Gateway> {
  const db = (gw as Gateway).db;
  await (gw as Gateway).close();
  gw = undefined;
  return start(file, lines, db);
}

/** The `warn` lines about policy entry `entry` (`hosts[i]`). */
function skipped(lines: readonly string[], entry: string): Record<string, unknown>[] {
  return lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.level === 'warn' && l.entry === entry);
}

async function hosts(g: Gateway): Promise<Record<string, unknown>[]> {
  const listing = (await g.p.admin('GET', '/admin/hosts')).body as { hosts: Record<string, unknown>[] };
  return listing.hosts;
}

const grantsOf = (body: { agent_capability_grants: { capability: string; status: string }[] }) =>
  body.agent_capability_grants.map((g) => [g.capability, g.status]);

describe('a hosts[] entry whose key the host rotated away (§5.9)', () => {
  it('creates no new host for the old key at the next start-up, and says which entry to update', async () => {
    const oldKey = await generateTestKey();
    const newKey = await generateTestKey();
    const file = writePolicy(
      policy([{ key: oldKey, name: 'ci', userId: 'alice', defaults: ['create_item'] }]),
    );
    const lines: string[] = [];
    let g = await start(file, lines);
    const [host] = await hosts(g);
    const rotated = await g.p.hostPost(oldKey, '/host/rotate-key', {
      public_key: newKey.publicJwk,
      proof: await g.p.hostToken(newKey),
    });
    expect(rotated.status).toBe(200);

    g = await restart(file, lines);
    // The one host, with its new key: no second, active, linked host for the retired key.
    expect(await hosts(g)).toMatchObject([
      { host_id: host?.host_id, thumbprint: newKey.thumbprint, user_id: 'alice', status: 'active' },
    ]);
    expect(skipped(lines, 'hosts[0]')).toEqual([
      expect.objectContaining({
        host_id: host?.host_id,
        msg: expect.stringMatching(/rotated away by host hst_.*Update or remove the entry/),
      }),
    ]);
    // Whoever holds the old key gets nothing: it no longer works, not even for a new host.
    const stranger = await g.p.register(oldKey, { capabilities: ['create_item'] });
    expect({ status: stranger.status, error: stranger.body.error }).toEqual({
      status: 401,
      error: 'invalid_jwt',
    });
    expect(await hosts(g)).toHaveLength(1);
    // The host itself keeps its defaults and its user.
    const own = await g.p.register(newKey, { capabilities: ['create_item'] });
    expect({ status: own.body.status, user: own.body.user_id }).toEqual({ status: 'active', user: 'alice' });
    expect(grantsOf(own.body)).toEqual([['create_item', 'active']]);
  });

  it('the old key cannot be pre-registered through the admin API, nor rotated back to', async () => {
    const oldKey = await generateTestKey();
    const newKey = await generateTestKey();
    const file = writePolicy(policy([{ key: oldKey, name: 'ci', userId: 'alice', defaults: [] }]));
    const g = await start(file, []);
    await g.p.hostPost(oldKey, '/host/rotate-key', {
      public_key: newKey.publicJwk,
      proof: await g.p.hostToken(newKey),
    });
    const vouched = await g.p.admin('POST', '/admin/hosts', {
      public_key: oldKey.publicJwk,
      user_id: 'alice',
    });
    expect(vouched.status).toBe(400);
    expect(vouched.body).toMatchObject({
      error: 'invalid_request',
      message: expect.stringMatching(/rotated away/),
    });
    const back = await g.p.hostPost(newKey, '/host/rotate-key', {
      public_key: oldKey.publicJwk,
      proof: await g.p.hostToken(oldKey),
    });
    expect(back.status).toBe(400);
    expect(back.body.error).toBe('invalid_request');
    expect(await hosts(g)).toMatchObject([{ thumbprint: newKey.thumbprint }]);
  });
});

describe('a hosts[] host revoked or linked elsewhere after the policy was written', () => {
  const cases: readonly [string, (g: Gateway, key: TestKey, id: string) => Promise<unknown>, RegExp][] = [
    ['revoked by itself (§5.10)', (g, key) => g.p.hostPost(key, '/host/revoke', {}), /is revoked/],
    [
      'revoked by the operator',
      (g, _key, id) => g.p.admin('POST', `/admin/hosts/${id}/revoke`),
      /is revoked/,
    ],
    [
      'linked to another user (§2.9)',
      async (g, _key, id) => {
        await g.p.admin('POST', `/admin/hosts/${id}/unlink`);
        await g.p.admin('POST', `/admin/hosts/${id}/link`, { user_id: 'bob' });
      },
      /linked to another user/,
    ],
  ];

  it.each(cases)(
    '%s: the next start-up skips the entry with a warning, and applies the others',
    async (_, act, why) => {
      const key = await generateTestKey();
      const later = await generateTestKey();
      const ci: Entry = { key, name: 'ci', userId: 'alice', defaults: ['get_item'] };
      const file = writePolicy(policy([ci]));
      const lines: string[] = [];
      let g = await start(file, lines);
      const [host] = await hosts(g);
      await act(g, key, host?.host_id as string);
      const after = (await g.p.admin('GET', `/admin/hosts/${host?.host_id as string}`)).body;

      writeFileSync(file, policy([ci, { key: later, name: 'later', userId: 'carol', defaults: [] }]));
      g = await restart(file, lines);
      expect(skipped(lines, 'hosts[0]')).toEqual([
        expect.objectContaining({ host_id: host?.host_id, msg: expect.stringMatching(why) }),
      ]);
      // The skipped host is as the host, the operator or the user left it; the next entry applies.
      expect((await g.p.admin('GET', `/admin/hosts/${host?.host_id as string}`)).body).toMatchObject({
        status: after.status,
        user_id: after.user_id,
        updated_at: after.updated_at,
      });
      expect((await hosts(g)).map((h) => [h.name, h.user_id])).toEqual([
        ['ci', after.user_id],
        ['later', 'carol'],
      ]);
    },
  );
});

describe('reload applies hosts[] (live changes)', () => {
  it('a removed default is no longer granted, a new entry is created, an unchanged one is not written', async () => {
    const ciKey = await generateTestKey();
    const secondKey = await generateTestKey();
    const ci: Entry = { key: ciKey, name: 'ci', userId: 'alice', defaults: ['create_item'] };
    const file = writePolicy(policy([ci]));
    const g = await start(file, []);
    expect(grantsOf((await g.p.register(ciKey, { capabilities: ['create_item'] })).body)).toEqual([
      ['create_item', 'active'],
    ]);

    const second: Entry = { key: secondKey, name: 'second', userId: 'bob', defaults: ['get_item'] };
    writeFileSync(file, policy([{ ...ci, defaults: [] }, second]));
    expect(await g.p.proxy.reload()).toMatchObject({ ok: true });
    expect(grantsOf((await g.p.register(ciKey, { capabilities: ['create_item'] })).body)).toEqual([
      ['create_item', 'pending'],
    ]);
    const fromSecond = await g.p.register(secondKey, { capabilities: ['get_item'] });
    expect({ status: fromSecond.body.status, user: fromSecond.body.user_id }).toEqual({
      status: 'active',
      user: 'bob',
    });

    const before = await hosts(g);
    expect(await g.p.proxy.reload()).toMatchObject({ ok: true });
    expect(await hosts(g)).toEqual(before);
  });

  it('a reload whose hosts and drift cannot be written is refused whole: no host of it is applied', async () => {
    const ciKey = await generateTestKey();
    const newKey = await generateTestKey();
    const ci: Entry = { key: ciKey, name: 'ci', userId: 'alice', defaults: ['create_item'] };
    const file = writePolicy(policy([ci]));
    const g = await start(file, []);
    const before = await hosts(g);

    writeFileSync(
      file,
      policy([
        { ...ci, defaults: [] },
        { key: newKey, name: 'new', userId: 'bob', defaults: [] },
      ]),
    );
    // The database fails in drift's part of the transaction, after the hosts were written in it.
    const store = g.p.proxy.protocol.store;
    const write = store.write.bind(store);
    vi.spyOn(store, 'write').mockImplementation((fn) => write((tx) => fn(failingDrift(tx))));
    const refused = await g.p.proxy.reload();
    expect(refused).toMatchObject({ ok: false, error: expect.stringMatching(/disk I\/O error/) });
    vi.restoreAllMocks();

    expect(await hosts(g)).toEqual(before);
    expect(grantsOf((await g.p.register(ciKey, { capabilities: ['create_item'] })).body)).toEqual([
      ['create_item', 'active'],
    ]);
    expect((await g.p.register(newKey, {})).body.status).toBe('pending');

    // Once the database answers again, the same files apply.
    expect(await g.p.proxy.reload()).toMatchObject({ ok: true });
    // Sorted: the listing's order of hosts made in the same millisecond is not defined.
    const listed = (await hosts(g)).map((h) => [h.name, h.default_capabilities, h.status]);
    expect(listed.sort((x, y) => String(x[0]).localeCompare(String(y[0])))).toEqual([
      ['ci', [], 'active'],
      ['new', [], 'active'],
    ]);
  });
});

/** `tx` whose read of granted capabilities (the first drift makes) fails as a broken disk would. */
function failingDrift(tx: StoreWriter): StoreWriter {
  return new Proxy(tx, {
    get: (target, name, receiver) =>
      name === 'grantedCapabilities'
        ? () => Promise.reject(new Error('disk I/O error'))
        : (Reflect.get(target, name, receiver) as unknown),
  });
}
