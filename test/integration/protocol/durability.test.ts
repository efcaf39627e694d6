/**
 * Crash durability of the built CLI (`node dist/cli.js`) on a SQLite file: every acknowledged
 * change survives a SIGKILL sent the moment its response arrives, and a kill in the middle of a
 * burst leaves nothing half-written (README "Storage": synchronous=FULL, one transaction per
 * change). Between a kill and the restart the database file is inspected directly for the
 * invariants a torn write would break.
 */
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/cli-process.js';
import { CliProxy, cliWorkspace, type Reply } from '../../helpers/cli-restarts.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';

const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
const ADMIN_TOKEN = 'durability-admin-token-0123456789abcdef';

// list_pets and get_pet are granted to linked hosts without asking; create_pet needs a human.
// Rate limits are off: bursts of unknown hosts are the point here, not what is tested.
const POLICY = `
capabilities:
  defaults: [list_pets, get_pet]
  high_risk: [create_pet, delete_pet, place_order]
rate_limits:
  per_ip: null
  per_host: null
  per_agent: null
  unknown_host_registration: null
  approval_requests_per_user: null
`;

const workspace = cliWorkspace('aap-durability-', POLICY);

/** One running proxy process and a small client for it. */
class Proxy extends CliProxy {
  static async boot(db: string): Promise<Proxy> {
    return new Proxy(
      await CliProxy.serve(
        workspace,
        ['--spec', PETSTORE, '--db', db, '--policy', workspace.policyFile],
        ADMIN_TOKEN,
      ),
    );
  }

  admin(method: string, path: string, body?: unknown): Promise<Reply> {
    return this.request(method, path, ADMIN_TOKEN, body);
  }

  hostToken(host: TestKey, extra: Record<string, unknown> = {}): Promise<string> {
    return hostJwt(host, this.url, extra);
  }

  async register(host: TestKey, agent: TestKey, body: Record<string, unknown>): Promise<Reply> {
    const token = await this.hostToken(host, { agent_public_key: agent.publicJwk });
    return this.request('POST', '/agent/register', token, { name: 'durable agent', ...body });
  }

  async status(host: TestKey, agentId: string): Promise<Reply> {
    return this.request('GET', `/agent/status?agent_id=${agentId}`, await this.hostToken(host));
  }

  async hostCall(host: TestKey, path: string, body?: unknown): Promise<Reply> {
    return this.request('POST', path, await this.hostToken(host), body);
  }

  async use(agent: TestKey, agentId: string): Promise<Reply> {
    return this.request('GET', '/capability/list', await agentJwt(agent, agentId, this.url));
  }

  async approvals(agentId: string): Promise<any[]> {
    const reply = await this.admin('GET', `/admin/approvals?agent_id=${agentId}`);
    return reply.body.approvals as any[];
  }
}

function grantSummary(grants: { capability: string; status: string }[]): string[] {
  return grants.map((g) => `${g.capability}:${g.status}`).sort();
}

type Row = Record<string, any>;

/**
 * Reads the database of a dead process and checks what a torn transaction would break. Returns
 * grant counts per agent for further checks.
 */
function checkInvariants(db: string): { grantsPerAgent: Map<string, string[]>; agents: Row[] } {
  const conn = new Database(db, { fileMustExist: true });
  try {
    expect(conn.pragma('integrity_check', { simple: true })).toBe('ok');
    const agents = conn.prepare('SELECT * FROM agents').all() as Row[];
    const hosts = new Map((conn.prepare('SELECT * FROM hosts').all() as Row[]).map((h) => [h.id, h]));
    const approvals = conn.prepare('SELECT * FROM approvals').all() as Row[];
    const grants = conn.prepare('SELECT * FROM grants').all() as Row[];
    const grantsPerAgent = new Map<string, string[]>();
    for (const g of grants) {
      grantsPerAgent.set(g.agent_id, [
        ...(grantsPerAgent.get(g.agent_id) ?? []),
        `${g.capability}:${g.status}`,
      ]);
    }
    const byId = new Map(agents.map((a) => [a.id, a]));
    for (const a of agents) {
      const host = hosts.get(a.host_id);
      expect(host, `agent ${a.id} without its host`).toBeDefined();
      if (a.status === 'active' && a.mode === 'delegated') {
        // An approved delegated agent carries its user, and its host is linked to that user.
        expect(a.user_id, `active delegated agent ${a.id} without a user`).not.toBeNull();
        expect(host?.user_id).toBe(a.user_id);
        expect(host?.status).toBe('active');
      }
      if (a.status === 'pending') {
        const open = approvals.filter((x) => x.agent_id === a.id && x.status === 'pending');
        expect(open.length, `pending agent ${a.id} without an open approval`).toBe(1);
      }
      if (a.status === 'revoked') {
        const live = grants.filter((g) => g.agent_id === a.id && g.status === 'active');
        expect(live, `revoked agent ${a.id} still holds grants`).toEqual([]);
      }
    }
    for (const approval of approvals) {
      const mine = grants.filter((g) => g.approval_id === approval.id);
      const agent = byId.get(approval.agent_id);
      if (approval.status === 'approved' || approval.status === 'denied') {
        // A decided approval has decided every grant it was asked for.
        expect(
          mine.filter((g) => g.status === 'pending'),
          `grants of ${approval.status} approval ${approval.id} still pending`,
        ).toEqual([]);
        expect(approval.decided_at).not.toBeNull();
      }
      if (approval.status === 'approved' && approval.kind === 'registration') {
        expect(agent?.status, `approved registration ${approval.id}`).not.toBe('pending');
      }
      if (approval.status === 'pending') {
        expect(agent?.status === 'pending' || agent?.status === 'active').toBe(true);
        // Every capability it asks about has its pending grant row.
        const asked = (JSON.parse(approval.capabilities) as { name: string }[]).map((c) => c.name).sort();
        expect(
          mine
            .filter((g) => g.status === 'pending')
            .map((g) => String(g.capability))
            .sort(),
        ).toEqual(asked);
      }
    }
    for (const g of grants) {
      expect(byId.has(g.agent_id), `grant ${g.id} of a missing agent`).toBe(true);
    }
    return { grantsPerAgent, agents };
  } finally {
    conn.close();
  }
}

describe('every acknowledged change survives SIGKILL right after its response', () => {
  it('pre-registration, registration, approval, revocation, key rotation, host revocation', async () => {
    const db = join(mkdtempSync(join(workspace.tmp, 'seq-')), 'proxy.db');
    let proxy = await Proxy.boot(db);
    /** Crash now, check the file, start again on it. */
    const restart = async (): Promise<void> => {
      await proxy.crash();
      checkInvariants(db);
      proxy = await Proxy.boot(db);
    };

    // 1. Operator pre-registration of a linked host (§2.8).
    const h1 = await generateTestKey();
    const pre = await proxy.admin('POST', '/admin/hosts', {
      name: 'laptop',
      public_key: h1.publicJwk,
      user_id: 'alice',
      default_capabilities: ['list_pets'],
    });
    expect(pre.status).toBe(201);
    const h1Id: string = pre.body.host_id;
    await restart();
    expect((await proxy.admin('GET', `/admin/hosts/${h1Id}`)).body).toMatchObject({
      host_id: h1Id,
      name: 'laptop',
      status: 'active',
      user_id: 'alice',
      default_capabilities: ['list_pets'],
      pre_registered: true,
    });

    // 2. A registration under the linked host: two grants auto-approved, one pending approval.
    const a1 = await generateTestKey();
    const reg1 = await proxy.register(h1, a1, { capabilities: ['list_pets', 'get_pet', 'create_pet'] });
    expect(reg1.status).toBe(200);
    expect(reg1.body.status).toBe('active');
    const a1Id: string = reg1.body.agent_id;
    await restart();
    const s1 = await proxy.status(h1, a1Id);
    expect(s1.body).toMatchObject({ agent_id: a1Id, status: 'active', user_id: 'alice' });
    expect(grantSummary(s1.body.agent_capability_grants)).toEqual(
      grantSummary(reg1.body.agent_capability_grants),
    );
    expect(grantSummary(s1.body.agent_capability_grants)).toEqual([
      'create_pet:pending',
      'get_pet:active',
      'list_pets:active',
    ]);
    const apr1 = await proxy.approvals(a1Id);
    expect(apr1).toHaveLength(1);
    expect(apr1[0]).toMatchObject({ kind: 'registration', user_code: reg1.body.approval.user_code });
    expect((await proxy.use(a1, a1Id)).status).toBe(200);

    // 3. An unknown host registers: pending host, pending agent, pending grants, open approval.
    const h2 = await generateTestKey();
    const a2 = await generateTestKey();
    const reg2 = await proxy.register(h2, a2, { capabilities: ['list_pets', 'create_pet'] });
    expect(reg2.body.status).toBe('pending');
    const a2Id: string = reg2.body.agent_id;
    const h2Id: string = reg2.body.host_id;
    await restart();
    const s2 = await proxy.status(h2, a2Id);
    expect(s2.body.status).toBe('pending');
    expect(grantSummary(s2.body.agent_capability_grants)).toEqual([
      'create_pet:pending',
      'list_pets:pending',
    ]);
    expect(s2.body.approval.user_code).toBe(reg2.body.approval.user_code);
    expect((await proxy.admin('GET', `/admin/hosts/${h2Id}`)).body.status).toBe('pending');

    // 4. A partial approval links the host to bob (§2.9): all of it, or none of it.
    const apr2 = (await proxy.approvals(a2Id))[0];
    const ok2 = await proxy.admin('POST', `/admin/approvals/${apr2.id}/approve`, {
      user_id: 'bob',
      capabilities: ['list_pets'],
      reason: 'read only',
    });
    expect(ok2.status).toBe(200);
    await restart();
    const s2b = await proxy.status(h2, a2Id);
    expect(s2b.body).toMatchObject({ status: 'active', user_id: 'bob' });
    expect(grantSummary(s2b.body.agent_capability_grants)).toEqual(['create_pet:denied', 'list_pets:active']);
    expect((await proxy.admin('GET', `/admin/hosts/${h2Id}`)).body).toMatchObject({
      status: 'active',
      user_id: 'bob',
    });
    expect(await proxy.approvals(a2Id)).toEqual([]);
    const listing = await proxy.use(a2, a2Id);
    expect(listing.status).toBe(200);
    expect(
      (listing.body.capabilities as { name: string; grant_status: string }[])
        .filter((c) => c.grant_status === 'granted')
        .map((c) => c.name),
    ).toEqual(['list_pets']);

    // 5. The escalation of the linked host's agent is approved.
    const ok1 = await proxy.admin('POST', `/admin/approvals/${apr1[0].id}/approve`, {});
    expect(ok1.status).toBe(200);
    await restart();
    expect(grantSummary((await proxy.status(h1, a1Id)).body.agent_capability_grants)).toEqual([
      'create_pet:active',
      'get_pet:active',
      'list_pets:active',
    ]);

    // 6. Agent revocation (§5.7).
    expect((await proxy.hostCall(h1, '/agent/revoke', { agent_id: a1Id })).body.status).toBe('revoked');
    await restart();
    const revoked = await proxy.use(a1, a1Id);
    expect(revoked.status).toBe(403);
    expect(revoked.body.error).toBe('agent_revoked');

    // 7. Agent key rotation (§5.8): the old key stays dead after a crash.
    const a2New = await generateTestKey();
    const rot = await proxy.hostCall(h2, '/agent/rotate-key', {
      agent_id: a2Id,
      public_key: a2New.publicJwk,
    });
    expect(rot.status).toBe(200);
    await restart();
    expect((await proxy.use(a2New, a2Id)).status).toBe(200);
    const old = await proxy.use(a2, a2Id);
    expect(old.status).toBe(401);
    expect(old.body.error).toBe('invalid_jwt');

    // 8. Host key rotation (§5.9).
    const h2New = await generateTestKey();
    const proof = await proxy.hostToken(h2New);
    expect(
      (await proxy.hostCall(h2, '/host/rotate-key', { public_key: h2New.publicJwk, proof })).status,
    ).toBe(200);
    await restart();
    expect((await proxy.status(h2New, a2Id)).body.status).toBe('active');
    expect((await proxy.status(h2, a2Id)).status).toBe(401);

    // 9. Host revocation with its cascade (§5.10): all of it survives.
    const hr = await proxy.hostCall(h2New, '/host/revoke');
    expect(hr.body).toEqual({ host_id: h2Id, status: 'revoked', agents_revoked: 1 });
    await restart();
    expect((await proxy.admin('GET', `/admin/hosts/${h2Id}`)).body.status).toBe('revoked');
    expect((await proxy.admin('GET', `/admin/agents/${a2Id}`)).body).toMatchObject({
      status: 'revoked',
      agent_capability_grants: [],
    });
    const again = await proxy.register(h2New, await generateTestKey(), { capabilities: ['list_pets'] });
    expect(again.status).toBe(403);
    expect(again.body.error).toBe('host_revoked');
    await proxy.crash();
  }, 90_000);
});

describe('a kill in the middle of a burst leaves nothing half-written', () => {
  it('concurrent registrations, then concurrent approvals, each killed after a few acknowledgements', async () => {
    const db = join(mkdtempSync(join(workspace.tmp, 'burst-')), 'proxy.db');
    let proxy = await Proxy.boot(db);
    const linked = await generateTestKey();
    const pre = await proxy.admin('POST', '/admin/hosts', { public_key: linked.publicJwk, user_id: 'alice' });
    expect(pre.status).toBe(201);
    const linkedId: string = pre.body.host_id;
    const capabilities = ['list_pets', 'get_pet', 'create_pet'];

    // Burst 1: 40 registrations at once, half under the linked host, half from unknown hosts. The
    // kills come early in each burst (16 of 40, then 4 of at least 16), so that requests are still
    // in flight when they land even on a loaded machine: with 8 approvals, the 4 after the kill
    // were once all answered before it took effect.
    interface Sent {
      host: TestKey;
      agent: TestKey;
    }
    const sent: Sent[] = [];
    for (let i = 0; i < 40; i++) {
      sent.push({ host: i % 2 === 0 ? linked : await generateTestKey(), agent: await generateTestKey() });
    }
    const tokens = await Promise.all(
      sent.map((s) => proxy.hostToken(s.host, { agent_public_key: s.agent.publicJwk })),
    );
    const acked: { sent: Sent; body: any }[] = [];
    const KILL_AFTER = 16;
    const victim = proxy;
    const results = await Promise.allSettled(
      sent.map(async (s, i) => {
        const reply = await victim.request('POST', '/agent/register', tokens[i], {
          name: `burst ${i}`,
          capabilities,
        });
        if (reply.status === 200) {
          acked.push({ sent: s, body: reply.body });
          if (acked.length === KILL_AFTER) victim.child.kill('SIGKILL');
        }
        return reply.status;
      }),
    );
    await victim.exited;
    // Everything answered before the kill was a success; the rest never got an answer.
    for (const r of results) if (r.status === 'fulfilled') expect(r.value).toBe(200);
    expect(acked.length).toBeGreaterThanOrEqual(KILL_AFTER);
    expect(acked.length, 'the kill landed after the burst: nothing was interrupted').toBeLessThan(
      sent.length,
    );

    const { grantsPerAgent, agents } = checkInvariants(db);
    // Each agent that exists has all of its grant rows, none more.
    for (const a of agents) {
      expect(
        (grantsPerAgent.get(a.id) ?? []).map((g) => g.split(':')[0]).sort(),
        `grants of ${a.id}`,
      ).toEqual([...capabilities].sort());
    }
    // At least the acknowledged ones exist (a commit may have beaten the kill to the response).
    expect(agents.length).toBeGreaterThanOrEqual(acked.length);
    expect(agents.length).toBeLessThanOrEqual(sent.length);

    proxy = await Proxy.boot(db);
    for (const { sent: s, body } of acked) {
      const status = await proxy.status(s.host, body.agent_id);
      expect(status.status, JSON.stringify(status.body)).toBe(200);
      expect(status.body.status).toBe(body.status);
      expect(grantSummary(status.body.agent_capability_grants)).toEqual(
        grantSummary(body.agent_capability_grants),
      );
      if (s.host === linked) {
        expect(body.status).toBe('active');
        expect(grantSummary(body.agent_capability_grants)).toEqual([
          'create_pet:pending',
          'get_pet:active',
          'list_pets:active',
        ]);
      } else {
        expect(body.status).toBe('pending');
      }
      expect(status.body.approval?.user_code).toBe(body.approval.user_code);
    }

    // Burst 2: approve every open approval at once; unknown hosts get linked to their own user.
    const open: any[] = (await proxy.admin('GET', '/admin/approvals')).body.approvals;
    expect(open.length).toBe(agents.length);
    const approvedAcks: any[] = [];
    const victim2 = proxy;
    const APPROVE_KILL_AFTER = 4;
    const outcomes = await Promise.allSettled(
      open.map(async (a) => {
        const reply = await victim2.admin(
          'POST',
          `/admin/approvals/${a.id}/approve`,
          a.host_id === linkedId ? {} : { user_id: `user-of-${a.host_id}` },
        );
        if (reply.status === 200) {
          approvedAcks.push(reply.body);
          if (approvedAcks.length === APPROVE_KILL_AFTER) victim2.child.kill('SIGKILL');
        }
        return reply.status;
      }),
    );
    await victim2.exited;
    for (const r of outcomes) if (r.status === 'fulfilled') expect(r.value).toBe(200);
    expect(approvedAcks.length).toBeGreaterThanOrEqual(APPROVE_KILL_AFTER);
    expect(approvedAcks.length).toBeLessThan(open.length);
    checkInvariants(db);

    proxy = await Proxy.boot(db);
    for (const ack of approvedAcks) {
      const view = (await proxy.admin('GET', `/admin/agents/${ack.agent.agent_id}`)).body;
      expect(view.status).toBe('active');
      expect(grantSummary(view.agent_capability_grants)).toEqual([
        'create_pet:active',
        'get_pet:active',
        'list_pets:active',
      ]);
      const host = (await proxy.admin('GET', `/admin/hosts/${view.host_id}`)).body;
      expect(host.user_id).toBe(view.host_id === linkedId ? 'alice' : `user-of-${view.host_id}`);
      expect(host.status).toBe('active');
      expect(await proxy.approvals(ack.agent.agent_id)).toEqual([]);
    }
    // What was not approved before the kill is still exactly as it was, and can still be approved.
    const left: any[] = (await proxy.admin('GET', '/admin/approvals')).body.approvals;
    expect(left.length).toBeLessThanOrEqual(open.length - approvedAcks.length);
    for (const a of left) {
      const view = (await proxy.admin('GET', `/admin/agents/${a.agent_id}`)).body;
      expect(view.status).toBe(a.host_id === linkedId ? 'active' : 'pending');
      expect(
        (view.agent_capability_grants as { status: string }[]).filter((g) => g.status === 'pending').length,
      ).toBe(a.capabilities.length);
    }
    if (left.length > 0) {
      const a = left[0];
      const ok = await proxy.admin(
        'POST',
        `/admin/approvals/${a.id}/approve`,
        a.host_id === linkedId ? {} : { user_id: 'late' },
      );
      expect(ok.status).toBe(200);
    }
    await proxy.crash();
    checkInvariants(db);
  }, 90_000);
});
