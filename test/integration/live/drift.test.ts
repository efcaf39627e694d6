/**
 * Issue 12, §2.12 drift at start-up: every capability has a version (a hash of what an approval
 * covers) kept with each grant. A restart with a removed operation refuses its grants with
 * capability_not_granted saying so; a changed input schema suspends the grant until re-approved;
 * an unchanged capability keeps working; `version` moves exactly when the hashed parts move.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { TestClock } from '../../helpers/protocol.js';
import { notesSpec } from '../../helpers/notes-spec.js';

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

const clock = new TestClock();

async function restart(db: string | undefined, spec: string): Promise<Gateway> {
  await gw?.close();
  gw = await startGateway({ spec, clock, ...(db ? { db } : {}) });
  return gw;
}

async function versions(g: Gateway): Promise<Record<string, string>> {
  const list = await g.p.request('GET', '/capability/list');
  expect(list.status).toBe(200);
  const out: Record<string, string> = {};
  for (const c of list.body.capabilities as { name: string; version: string }[]) {
    const describe = await g.p.request('GET', `/capability/describe?name=${c.name}`);
    expect(describe.body.version).toBe(c.version);
    out[c.name] = c.version;
  }
  return out;
}

describe('drift at start-up (§2.12)', () => {
  it('refuses a removed capability, suspends a changed one until re-approved, keeps the unchanged', async () => {
    let g = await restart(undefined, notesSpec());
    const db = g.db;
    const before = await versions(g);
    const fx = await g.p.activeAgent(['get_note', 'list_notes']);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);

    // Removed: list_notes is gone from the document.
    g = await restart(db, notesSpec({ withList: false }));
    const removed = await g.p.execute(fx.agent, fx.agentId, 'list_notes');
    expect(removed.status).toBe(403);
    expect(removed.body.error).toBe('capability_not_granted');
    expect(removed.body.message).toMatch(/removed/);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);

    // Changed: get_note's input schema; list_notes back unchanged.
    g = await restart(db, notesSpec({ noteInput: '{ type: string, enum: [all, short] }' }));
    const after = await versions(g);
    expect(after.list_notes).toBe(before.list_notes);
    expect(after.get_note).not.toBe(before.get_note);
    expect((await g.p.execute(fx.agent, fx.agentId, 'list_notes')).status).toBe(200);
    const refused = await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('capability_not_granted');
    expect(refused.body.message).toMatch(/re-approval is needed/);
    const status = await g.p.status(fx.host, fx.agentId);
    const grant = status.body.agent_capability_grants.find(
      (x: { capability: string }) => x.capability === 'get_note',
    );
    expect(grant.status).toBe('pending');
    expect(status.body.approval).toBeDefined();
    const approval = await g.p.pendingApproval(fx.agentId);
    expect((await g.p.admin('POST', `/admin/approvals/${approval.id}/approve`, {})).status).toBe(200);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);

    // The same document again: nothing to re-approve.
    g = await restart(db, notesSpec({ noteInput: '{ type: string, enum: [all, short] }' }));
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
  });

  it('moves version with the schemas, not with the description', async () => {
    const base = await versions(await restart(undefined, notesSpec()));
    const reworded = await versions(await restart(undefined, notesSpec({ summary: 'Fetch one note' })));
    expect(reworded).toEqual(base);
    const changed = await versions(await restart(undefined, notesSpec({ noteInput: '{ type: integer }' })));
    expect(changed.get_note).not.toBe(base.get_note);
    expect(changed.list_notes).toBe(base.list_notes);
  });
});
