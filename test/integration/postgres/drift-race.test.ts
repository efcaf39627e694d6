/**
 * §2.12 drift on PostgreSQL, while a reload applies it: the new catalog is in force before drift's
 * transaction commits, and executions read grants from the pool without waiting for it. A grant
 * approved at the old version still read as active must not run the changed capability
 * (execute.ts compares versions). Before that check, 132 of 155 executions during one reload ran
 * the changed capability on the old approval.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notesSpec } from '../../helpers/notes-spec.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startProtocol, writePolicy, type TestProtocol } from '../../helpers/protocol.js';

let postgres: TestPostgres;
let p: TestProtocol | undefined;
beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  await p?.close();
  await postgres?.stop();
});

describe('drift on PostgreSQL', () => {
  it('no execution of a changed capability runs on the old approval while the reload applies drift', async () => {
    const spec = notesSpec();
    const original = readFileSync(spec, 'utf8');
    const policy = writePolicy(
      'rate_limits:\n  unknown_host_registration: null\n  per_agent: null\n  per_host: null\n  per_user: null\n',
    );
    p = await startProtocol({
      overrides: { specs: [spec], mockUpstream: true, policy, db: await postgres.createDatabase() },
    });
    const proto = p;
    const target = await proto.activeAgent(['get_note']);
    // More holders of get_note: drift's transaction has work to do for each.
    for (let i = 0; i < 15; i++) await proto.activeAgent(['get_note'], { userId: `user${i}` });

    // Under the document in force, `owner` is no argument of get_note.
    const before = await proto.execute(target.agent, target.agentId, 'get_note', { id: 'a', owner: 'bob' });
    expect(before.status).toBe(400);

    // get_note changes: a new query parameter `owner` (another version).
    writeFileSync(
      spec,
      original.replace(
        '        - { name: fields, in: query, schema: { type: string } }',
        '        - { name: fields, in: query, schema: { type: string } }\n        - { name: owner, in: query, schema: { type: string } }',
      ),
    );
    let done = false;
    const reload = proto.proxy.reload().finally(() => {
      done = true;
    });
    const statuses: number[] = [];
    const worker = async (): Promise<void> => {
      for (let i = 0; i < 400 && !done; i++) {
        const r = await proto.execute(target.agent, target.agentId, 'get_note', { id: 'a', owner: 'bob' });
        statuses.push(r.status);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker(), worker(), worker()]);
    expect((await reload).ok).toBe(true);
    const after = await proto.execute(target.agent, target.agentId, 'get_note', { id: 'a', owner: 'bob' });
    expect(after.status).toBe(403);
    // 400: old catalog; 403: drift applied. 200: the new capability ran on the old approval.
    expect(statuses.filter((s) => s === 200).length).toBe(0);
  }, 120_000);
});
