/**
 * §2.12 drift at the edges of a reload: under the approver's per-user rate limit, for a grant
 * approved while its capability was absent, and a grant whose version is not the capability's
 * before drift has suspended it. In each, a capability that changed since approved runs only
 * after someone approves it again, and nothing is left that can never be decided.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { notesSpec } from '../../helpers/notes-spec.js';
import { startProtocol, writePolicy, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

const ask = async (
  t: TestProtocol,
  fx: { agent: Parameters<TestProtocol['agentToken']>[0]; agentId: string },
  capabilities: string[],
) =>
  t.request('POST', '/agent/request-capability', {
    token: await t.agentToken(fx.agent, fx.agentId),
    body: { capabilities },
  });

describe('drift under the approver’s per-user rate limit', () => {
  it('leaves the open request as it was, and the suspended grant can be asked for again', async () => {
    const spec = notesSpec();
    const policy = writePolicy(
      'rate_limits:\n  unknown_host_registration: null\n  approval_requests_per_user: 2/1m\n',
    );
    p = await startProtocol({ overrides: { specs: [spec], policy, mockUpstream: true } });
    const fx = await p.activeAgent(['get_note']); // alice's first request of two
    expect((await ask(p, fx, ['list_notes'])).status).toBe(200); // her second: the budget is spent
    const open = await p.pendingApproval(fx.agentId);

    // get_note changes; drift's approval request is refused by the limit.
    writeFileSync(spec, readFileSync(notesSpec({ noteInput: '{ type: integer }' }), 'utf8'));
    expect((await p.proxy.reload()).ok).toBe(true);

    // Observed before: the open request had been superseded (expired) before the limit refused,
    // and both grants were pending with no request that could decide them: 409 already_granted.
    const store = p.proxy.protocol.store;
    expect((await store.approval(open.id as string))?.status).toBe('pending');
    const grants = Object.fromEntries((await store.grants(fx.agentId)).map((g) => [g.capability, g]));
    expect(grants.list_notes).toMatchObject({ status: 'pending', approvalId: open.id });
    expect(grants.get_note).toMatchObject({ status: 'pending', approvalId: null });
    const refused = await p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' });
    expect(refused.status).toBe(403);

    p.clock.advance(60_000);
    const again = await ask(p, fx, ['get_note']);
    expect(again.status).toBe(200);
    const reapproval = await p.pendingApproval(fx.agentId);
    expect(reapproval.capabilities.map((c: { name: string }) => c.name).sort()).toEqual([
      'get_note',
      'list_notes',
    ]);
    expect((await p.admin('POST', `/admin/approvals/${reapproval.id as string}/approve`, {})).status).toBe(
      200,
    );
    expect((await p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
  });
});

describe('approving a capability the catalog no longer has', () => {
  it('denies its grant, so that when it comes back changed it runs only once approved again', async () => {
    const spec = notesSpec();
    const original = readFileSync(spec, 'utf8');
    p = await startProtocol({
      overrides: {
        specs: [spec],
        mockUpstream: true,
        policy: writePolicy('rate_limits:\n  unknown_host_registration: null\n'),
      },
    });
    const fx = await p.activeAgent(['get_note']);
    expect((await ask(p, fx, ['list_notes'])).status).toBe(200);
    const approval = await p.pendingApproval(fx.agentId);

    writeFileSync(spec, readFileSync(notesSpec({ withList: false }), 'utf8'));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect((await p.admin('POST', `/admin/approvals/${approval.id as string}/approve`, {})).status).toBe(200);
    const grant = (await p.proxy.protocol.store.grants(fx.agentId)).find(
      (g) => g.capability === 'list_notes',
    );
    // Observed before: active, with no version, which drift took for a grant older than versions.
    expect(grant).toMatchObject({ status: 'denied', reason: expect.stringMatching(/removed/) });

    writeFileSync(
      spec,
      original.replace(
        'operationId: listNotes',
        'operationId: listNotes\n      parameters: [{ name: owner, in: query, schema: { type: string } }]',
      ),
    );
    expect((await p.proxy.reload()).ok).toBe(true);
    const run = await p.execute(fx.agent, fx.agentId, 'list_notes', { owner: 'bob' });
    expect(run.status).toBe(403);
    expect(run.body.error).toBe('capability_not_granted');
    expect((await ask(p, fx, ['list_notes'])).status).toBe(200);
  });
});

describe('a grant approved at another version, before drift has suspended it', () => {
  it('is refused at execution: re-approval is needed', async () => {
    // On PostgreSQL an execution does not wait for drift's transaction after a reload
    // (test/integration/postgres/drift-race.test.ts); the version check at execution covers it.
    p = await startProtocol({ overrides: { specs: [notesSpec()], mockUpstream: true } });
    const fx = await p.activeAgent(['get_note']);
    expect((await p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    const grant = (await p.proxy.protocol.store.grants(fx.agentId)).find((g) => g.capability === 'get_note');
    await p.proxy.protocol.store.write((tx) =>
      tx.updateGrant(grant!.id, { capabilityVersion: 'another-version' }),
    );
    p.proxy.protocol.cache.clear();
    const refused = await p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      error: 'capability_not_granted',
      message: expect.stringMatching(/re-approval is needed/),
    });
  });
});
