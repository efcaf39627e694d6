/**
 * What a reload's drift (§2.12) does with decisions already made: a person's expiry (§3.3
 * `expires_at`) and narrowing (§2.13) outlive the re-approval drift asks for, and a grant policy
 * made is held to the policy in force, so that what it no longer grants (high-risk now, out of
 * the defaults) goes to a person. Regression tests, one per defect found in review.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { approve } from '../../../src/protocol/approval-decisions.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { notesSpec } from '../../helpers/notes-spec.js';
import { TestClock, writePolicy } from '../../helpers/protocol.js';

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

const HOUR = 3_600_000;
const NO_IDLE_EXPIRY = [
  'rate_limits:',
  '  unknown_host_registration: null',
  'lifetimes:',
  '  session_ttl: null',
];

interface Grant {
  capability: string;
  status: string;
  granted_by?: string;
  expires_at?: string;
  reason?: string;
}

/** get_note's input changes: its grants drift (§2.12). */
async function changeGetNote(g: Gateway, spec: string): Promise<void> {
  writeFileSync(spec, readFileSync(notesSpec({ noteInput: '{ type: string, enum: [all, short] }' }), 'utf8'));
  expect((await g.p.proxy.reload()).ok).toBe(true);
}

async function grantOf(g: Gateway, host: TestKey, agentId: string, capability: string): Promise<Grant> {
  const status = await g.p.status(host, agentId);
  const grant = (status.body.agent_capability_grants as Grant[]).find((x) => x.capability === capability);
  if (!grant) throw new Error(`no grant of ${capability}: ${JSON.stringify(status.body)}`);
  return grant;
}

/** A delegated agent of a host linked to alice, get_note approved by alice for `lifetimeMs`. */
async function timeLimited(
  g: Gateway,
  lifetimeMs: number,
): Promise<{ host: TestKey; agent: TestKey; agentId: string }> {
  const { key } = await g.p.linkedHost('alice');
  const reg = await g.p.register(key, { capabilities: ['get_note'] });
  const agentId: string = reg.body.agent_id;
  const approval = await g.p.pendingApproval(agentId);
  await approve(g.p.proxy.protocol, approval.id, {
    userId: 'alice',
    actor: 'alice',
    grantLifetimeMs: lifetimeMs,
  });
  expect((await g.p.execute(reg.agent, agentId, 'get_note', { id: 'a' })).status).toBe(200);
  return { host: key, agent: reg.agent, agentId };
}

describe('drift and a grant a person time-limited (§3.3)', () => {
  it('leaves a grant that lapsed before the change alone: no re-approval revives it', async () => {
    const clock = new TestClock();
    const spec = notesSpec();
    gw = await startGateway({ spec, clock, policy: NO_IDLE_EXPIRY.join('\n') });
    const fx = await timeLimited(gw, HOUR);
    clock.advance(HOUR + 1);

    await changeGetNote(gw, spec);
    // Observed before: the lapsed grant went pending under "Changed since approved, re-approval
    // needed", and approving that gave an active grant with no expiry at all.
    const status = await gw.p.status(fx.host, fx.agentId);
    expect(status.body.approval).toBeUndefined();
    expect((await grantOf(gw, fx.host, fx.agentId, 'get_note')).status).toBe('denied');
    expect((await gw.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(403);
  });

  it('keeps the person’s expiry through a re-approval that gives none, or a later one', async () => {
    const clock = new TestClock();
    const spec = notesSpec();
    gw = await startGateway({ spec, clock, policy: NO_IDLE_EXPIRY.join('\n') });
    const plain = await timeLimited(gw, HOUR);
    const longer = await timeLimited(gw, HOUR);
    const ends = (await grantOf(gw, plain.host, plain.agentId, 'get_note')).expires_at;
    expect(ends).toBeDefined();
    clock.advance(10 * 60_000);

    await changeGetNote(gw, spec);
    const asked = await gw.p.pendingApproval(plain.agentId);
    expect(asked.reason).toMatch(/re-approval needed/);
    expect((await gw.p.admin('POST', `/admin/approvals/${asked.id}/approve`, {})).status).toBe(200);
    const again = await gw.p.pendingApproval(longer.agentId);
    const decision = await approve(gw.p.proxy.protocol, again.id, {
      userId: 'alice',
      actor: 'alice',
      grantLifetimeMs: 24 * HOUR,
    });
    // What the person is shown ("This access ends at …") is when the grant really ends.
    expect(decision.grantsExpireAt).toBe(Date.parse(ends as string));

    for (const fx of [plain, longer]) {
      expect(await grantOf(gw, fx.host, fx.agentId, 'get_note')).toMatchObject({
        status: 'active',
        expires_at: ends,
      });
      expect((await gw.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    }
    clock.advance(HOUR);
    for (const fx of [plain, longer]) {
      expect((await gw.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(403);
    }
  });

  it('does not activate a grant whose expiry passed while it waited for re-approval', async () => {
    const clock = new TestClock();
    const spec = notesSpec();
    gw = await startGateway({ spec, clock, policy: NO_IDLE_EXPIRY.join('\n') });
    const fx = await timeLimited(gw, HOUR);
    clock.advance(55 * 60_000);
    await changeGetNote(gw, spec);
    const asked = await gw.p.pendingApproval(fx.agentId);
    clock.advance(6 * 60_000); // the grant's hour is over; the request (10 minutes) is still open

    expect((await gw.p.admin('POST', `/admin/approvals/${asked.id}/approve`, {})).status).toBe(200);
    const grant = (await gw.p.proxy.protocol.store.grants(fx.agentId)).find(
      (g) => g.capability === 'get_note',
    );
    expect(grant).toMatchObject({
      status: 'denied',
      deniedBy: 'system',
      reason: expect.stringMatching(/waited/),
    });
    expect((await gw.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(403);
  });
});

describe('drift and a default capability a person narrowed (§2.13)', () => {
  it('goes back to a person once the re-approval expires unanswered, not to policy unconstrained', async () => {
    const clock = new TestClock();
    const spec = notesSpec();
    gw = await startGateway({
      spec,
      clock,
      policy: [...NO_IDLE_EXPIRY, 'capabilities:', '  defaults: [get_note]'].join('\n'),
    });
    const host = await generateTestKey();
    const reg = await gw.p.register(host, {
      capabilities: [{ name: 'get_note', constraints: { id: { in: ['a', 'b'] } } }],
    });
    const agentId: string = reg.body.agent_id;
    const approval = await gw.p.pendingApproval(agentId);
    const narrowed = await gw.p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
      user_id: 'alice',
      constraints: { get_note: { id: { in: ['a'] } } },
    });
    expect(narrowed.status).toBe(200);
    expect((await gw.p.execute(reg.agent, agentId, 'get_note', { id: 'b' })).status).toBe(403);

    await changeGetNote(gw, spec);
    clock.advance(11 * 60_000); // the re-approval (10 minutes) expires unanswered
    const ask = await gw.p.request('POST', '/agent/request-capability', {
      token: await gw.p.agentToken(reg.agent, agentId),
      body: { capabilities: ['get_note'] },
    });
    // Observed before: 200 with get_note active, granted_by policy, unconstrained; id b then ran.
    expect(ask.status).toBe(200);
    expect(ask.body.agent_capability_grants).toEqual([{ capability: 'get_note', status: 'pending' }]);
    expect(ask.body.approval).toBeDefined();
    expect((await gw.p.execute(reg.agent, agentId, 'get_note', { id: 'b' })).status).toBe(403);
  });
});

describe('a reload and the grants policy made', () => {
  const policyWith = (...lines: string[]): string =>
    [...NO_IDLE_EXPIRY, 'modes: [delegated, autonomous]', ...lines].join('\n');

  it('sends a capability made high-risk to a person; a person’s own grant of it stays', async () => {
    const file = writePolicy(policyWith('capabilities:', '  defaults: [get_note, list_notes]'));
    gw = await startGateway({ spec: notesSpec(), policyFile: file });
    const { key } = await gw.p.linkedHost('alice');
    const byPolicy = await gw.p.register(key, { capabilities: ['get_note', 'list_notes'] });
    const agentId: string = byPolicy.body.agent_id;
    expect(await grantOf(gw, key, agentId, 'get_note')).toMatchObject({
      status: 'active',
      granted_by: 'policy',
    });
    // A person's own approval of get_note (bob's, for an agent of a host linked to nobody).
    const other = await generateTestKey();
    const byAlice = await gw.p.register(other, { capabilities: ['get_note'] });
    const asked = await gw.p.pendingApproval(byAlice.body.agent_id);
    expect(
      (await gw.p.admin('POST', `/admin/approvals/${asked.id}/approve`, { user_id: 'bob' })).status,
    ).toBe(200);

    writeFileSync(
      file,
      policyWith('capabilities:', '  defaults: [get_note, list_notes]', '  high_risk: [get_note]'),
    );
    expect((await gw.p.proxy.reload()).ok).toBe(true);

    // Observed before: still active, granted_by policy; high_risk is never auto-approved.
    expect((await gw.p.execute(byPolicy.agent, agentId, 'get_note', { id: 'a' })).status).toBe(403);
    expect((await grantOf(gw, key, agentId, 'get_note')).status).toBe('pending');
    expect(await grantOf(gw, key, agentId, 'list_notes')).toMatchObject({
      status: 'active',
      granted_by: 'policy',
    });
    const reapproval = await gw.p.pendingApproval(agentId);
    expect(reapproval.reason).toMatch(/No longer granted by the server's policy.*get_note/);
    expect((await gw.p.execute(byAlice.agent, byAlice.body.agent_id, 'get_note', { id: 'a' })).status).toBe(
      200,
    );

    expect(
      (await gw.p.admin('POST', `/admin/approvals/${reapproval.id}/approve`, { user_id: 'alice' })).status,
    ).toBe(200);
    expect(await grantOf(gw, key, agentId, 'get_note')).toMatchObject({
      status: 'active',
      granted_by: 'alice',
    });
    expect((await gw.p.execute(byPolicy.agent, agentId, 'get_note', { id: 'a' })).status).toBe(200);
  });

  it('a restart with a policy that made a capability high-risk sends its policy grants to a person too', async () => {
    const file = writePolicy(policyWith('capabilities:', '  defaults: [get_note, list_notes]'));
    gw = await startGateway({ spec: notesSpec(), policyFile: file });
    const db = gw.db;
    const { key } = await gw.p.linkedHost('alice');
    const byPolicy = await gw.p.register(key, { capabilities: ['get_note', 'list_notes'] });
    const agentId: string = byPolicy.body.agent_id;
    expect((await gw.p.execute(byPolicy.agent, agentId, 'get_note', { id: 'a' })).status).toBe(200);
    await gw.close();

    // The operator edits the policy and restarts (a ConfigMap rolled out), with no reload between.
    writeFileSync(
      file,
      policyWith('capabilities:', '  defaults: [get_note, list_notes]', '  high_risk: [get_note]'),
    );
    gw = await startGateway({ spec: notesSpec(), policyFile: file, db });
    expect((await gw.p.execute(byPolicy.agent, agentId, 'get_note', { id: 'a' })).status).toBe(403);
    expect((await grantOf(gw, key, agentId, 'get_note')).status).toBe('pending');
    expect(await grantOf(gw, key, agentId, 'list_notes')).toMatchObject({ status: 'active' });
    expect((await gw.p.pendingApproval(agentId)).reason).toMatch(
      /No longer granted by the server's policy.*get_note/,
    );
  });

  it('sends an autonomous grant taken out of autonomous.grants to the operator', async () => {
    const file = writePolicy(policyWith('autonomous:', '  grants: [get_note, list_notes]'));
    gw = await startGateway({ spec: notesSpec(), policyFile: file });
    const host = await generateTestKey();
    await gw.p.admin('POST', '/admin/hosts', { name: 'bot', public_key: host.publicJwk });
    const reg = await gw.p.register(host, { mode: 'autonomous', capabilities: ['get_note', 'list_notes'] });
    const agentId: string = reg.body.agent_id;
    expect(reg.body.status).toBe('active');
    expect(await grantOf(gw, host, agentId, 'list_notes')).toMatchObject({
      status: 'active',
      granted_by: 'policy',
    });

    writeFileSync(file, policyWith('autonomous:', '  grants: [get_note]'));
    expect((await gw.p.proxy.reload()).ok).toBe(true);

    expect((await gw.p.execute(reg.agent, agentId, 'list_notes')).status).toBe(403);
    expect((await grantOf(gw, host, agentId, 'list_notes')).status).toBe('pending');
    expect((await grantOf(gw, host, agentId, 'get_note')).status).toBe('active');
    const asked = await gw.p.pendingApproval(agentId);
    expect((await gw.p.admin('POST', `/admin/approvals/${asked.id}/approve`, {})).status).toBe(200);
    expect((await gw.p.execute(reg.agent, agentId, 'list_notes')).status).toBe(200);
  });

  it('sends a capability taken out of a policy host’s defaults to a person', async () => {
    const hostKey = await generateTestKey();
    const x = (hostKey.publicJwk as { x: string }).x;
    const withDefaults = (defaults: string): string =>
      policyWith(
        'hosts:',
        '  - name: ci',
        `    public_key: { kty: OKP, crv: Ed25519, x: ${x} }`,
        '    user_id: alice',
        `    default_capabilities: ${defaults}`,
      );
    const file = writePolicy(withDefaults('[get_note, list_notes]'));
    gw = await startGateway({ spec: notesSpec(), policyFile: file });
    const reg = await gw.p.register(hostKey, { capabilities: ['get_note', 'list_notes'] });
    const agentId: string = reg.body.agent_id;
    expect(await grantOf(gw, hostKey, agentId, 'get_note')).toMatchObject({
      status: 'active',
      granted_by: 'policy',
    });

    writeFileSync(file, withDefaults('[list_notes]'));
    expect((await gw.p.proxy.reload()).ok).toBe(true);

    expect((await grantOf(gw, hostKey, agentId, 'get_note')).status).toBe('pending');
    expect((await grantOf(gw, hostKey, agentId, 'list_notes')).status).toBe('active');
    expect((await gw.p.pendingApproval(agentId)).reason).toMatch(/No longer granted.*get_note/);
  });
  // Found in review: the stored policy named only capabilities in the catalog, so removing X and
  // taking it out of the defaults in one change forgot that policy had granted it.
  for (const how of ['a reload', 'a restart'] as const) {
    it(`after ${how} that removes a default and takes it out of the defaults, its policy grants go to a person when it comes back`, async () => {
      const spec = notesSpec();
      const original = readFileSync(spec, 'utf8');
      const file = writePolicy(policyWith('capabilities:', '  defaults: [get_note, list_notes]'));
      gw = await startGateway({ spec, policyFile: file });
      const db = gw.db;
      const { key } = await gw.p.linkedHost('alice');
      const reg = await gw.p.register(key, { capabilities: ['get_note', 'list_notes'] });
      const agentId: string = reg.body.agent_id;
      expect((await gw.p.execute(reg.agent, agentId, 'list_notes')).status).toBe(200);

      const apply = async (): Promise<void> => {
        if (how === 'a reload') {
          expect((await gw!.p.proxy.reload()).ok).toBe(true);
        } else {
          await gw!.close();
          gw = await startGateway({ spec, policyFile: file, db });
        }
      };
      writeFileSync(spec, readFileSync(notesSpec({ withList: false }), 'utf8'));
      writeFileSync(file, policyWith('capabilities:', '  defaults: [get_note]'));
      await apply();
      writeFileSync(spec, original);
      await apply();

      // Observed before: 200, the grant still active and granted_by policy.
      expect((await gw.p.execute(reg.agent, agentId, 'list_notes')).status).toBe(403);
      expect((await grantOf(gw, key, agentId, 'list_notes')).status).toBe('pending');
      expect((await grantOf(gw, key, agentId, 'get_note')).status).toBe('active');
      expect((await gw.p.pendingApproval(agentId)).reason).toMatch(/No longer granted.*list_notes/);
    });
  }
});

describe('approving a request for a capability a reload blocked meanwhile', () => {
  it('denies that grant, and unblocking it later does not make it work', async () => {
    const file = writePolicy([...NO_IDLE_EXPIRY, 'capabilities:', '  defaults: [get_note]'].join('\n'));
    gw = await startGateway({ spec: notesSpec(), policyFile: file });
    const { key } = await gw.p.linkedHost('alice');
    const reg = await gw.p.register(key, { capabilities: ['get_note', 'list_notes'] });
    const agentId: string = reg.body.agent_id;
    const asked = await gw.p.pendingApproval(agentId);

    writeFileSync(
      file,
      [...NO_IDLE_EXPIRY, 'capabilities:', '  defaults: [get_note]', '  blocked: [list_notes]'].join('\n'),
    );
    expect((await gw.p.proxy.reload()).ok).toBe(true);
    const answer = await gw.p.admin('POST', `/admin/approvals/${asked.id}/approve`, { user_id: 'alice' });
    // Observed before: approved ["list_notes"], an active grant by alice.
    expect(answer.status).toBe(200);
    expect(answer.body.approved).not.toContain('list_notes');
    expect(await grantOf(gw, key, agentId, 'list_notes')).toMatchObject({
      status: 'denied',
      reason: expect.stringMatching(/blocked by the server's policy/),
    });

    writeFileSync(file, [...NO_IDLE_EXPIRY, 'capabilities:', '  defaults: [get_note]'].join('\n'));
    expect((await gw.p.proxy.reload()).ok).toBe(true);
    expect((await gw.p.execute(reg.agent, agentId, 'list_notes')).status).toBe(403);
  });
});
