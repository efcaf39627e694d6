/**
 * A rolling update of the policy on PostgreSQL: for a while replicas run the old policy beside
 * the new one. Found in review: once the first new replica had run drift (and stored its policy),
 * a replica still on the old one went on granting, without asking, what the new policy no longer
 * grants; its own restart onto the new policy then found nothing changed, and those grants stayed
 * active everywhere. Policy now grants only what both its own policy and the stored one allow
 * (protocol/stored-policy.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

const LIMITS = 'rate_limits:\n  unknown_host_registration: null\n';
const policy = (lines: string): string => `modes: [delegated, autonomous]\n${lines}${LIMITS}`;
const OLD = policy(
  'capabilities:\n  defaults: [list_pets, get_pet, get_inventory]\nautonomous:\n  grants: [list_pets, get_pet]\n',
);
// list_pets out of the defaults and the autonomous grants; get_inventory high-risk.
const NEW = policy(
  'capabilities:\n  defaults: [get_pet, get_inventory]\n  high_risk: [get_inventory]\nautonomous:\n  grants: [get_pet]\n',
);

let postgres: TestPostgres;
const running: TestProtocol[] = [];
beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  for (const p of running) await p.close().catch(() => undefined);
  await postgres?.stop();
});

async function replica(db: string, text: string): Promise<TestProtocol> {
  const p = await startProtocol({ policy: text, overrides: { db, mockUpstream: true } });
  running.push(p);
  return p;
}

interface Grant {
  readonly capability: string;
  readonly status: string;
}
const grantsOf = (body: { agent_capability_grants: Grant[] }): Record<string, Grant> =>
  Object.fromEntries(body.agent_capability_grants.map((g) => [g.capability, g]));

describe('a rolling update of the policy (PostgreSQL replicas)', () => {
  it('a replica still on the old policy grants without asking only what the new one also grants', async () => {
    const db = await postgres.createDatabase();
    const old = await replica(db, OLD);
    const alice = (await old.linkedHost('alice')).key;
    const before = await old.register(alice, {
      capabilities: ['list_pets', 'get_pet', 'get_inventory'],
    });
    expect(grantsOf(before.body)).toMatchObject({
      list_pets: { status: 'active' },
      get_inventory: { status: 'active' },
    });

    const fresh = await replica(db, NEW);
    // Drift on the new replica sent the old replica's policy grants to a person.
    const drifted = await fresh.status(alice, before.body.agent_id);
    expect(grantsOf(drifted.body).list_pets?.status).toBe('pending');

    // Observed before: list_pets and get_inventory active, granted_by policy.
    const late = await old.register((await old.linkedHost('bob')).key, {
      capabilities: ['list_pets', 'get_pet', 'get_inventory'],
    });
    expect(late.status).toBe(200);
    expect(grantsOf(late.body)).toMatchObject({
      list_pets: { status: 'pending' },
      get_pet: { status: 'active' },
      get_inventory: { status: 'pending' },
    });
    expect((await old.execute(late.agent, late.body.agent_id, 'list_pets')).status).toBe(403);
    expect((await fresh.execute(late.agent, late.body.agent_id, 'list_pets')).status).toBe(403);

    // An autonomous agent of a host the operator registered: the same for autonomous.grants.
    const botHost = await generateTestKey();
    await old.admin('POST', '/admin/hosts', { name: 'bot', public_key: botHost.publicJwk });
    const bot = await old.register(botHost, { mode: 'autonomous', capabilities: ['list_pets', 'get_pet'] });
    expect(grantsOf(bot.body)).toMatchObject({
      list_pets: { status: 'pending' },
      get_pet: { status: 'active' },
    });

    // The old replica rolled onto the new policy: still nothing granted that nobody asked for.
    await old.close();
    const rolled = await replica(db, NEW);
    expect((await rolled.execute(late.agent, late.body.agent_id, 'list_pets')).status).toBe(403);
  }, 60_000);
});
