/**
 * A reload on PostgreSQL while approvals are being decided: drift is one SERIALIZABLE transaction
 * over the grants it may change, and approvals write those grants. Found in review: with six
 * approvals decided at once, one reload in three was refused ("database busy: the write
 * conflicted with concurrent ones 6 times"), and with --watch the change stayed unapplied until
 * the next edit. Drift now outlasts the conflicts (storage/conflicts.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notesSpec } from '../../helpers/notes-spec.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startProtocol, writePolicy, type TestProtocol } from '../../helpers/protocol.js';

const ROUNDS = 3;
const APPROVALS = 40;
const DECIDING_AT_ONCE = 6;

let postgres: TestPostgres;
let p: TestProtocol | undefined;
beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  await p?.close();
  await postgres?.stop();
});

describe('a reload while approvals are decided (PostgreSQL)', () => {
  it('is applied every time', async () => {
    const spec = notesSpec();
    p = await startProtocol({
      overrides: {
        specs: [spec],
        mockUpstream: true,
        db: await postgres.createDatabase(),
        policy: writePolicy(
          'rate_limits:\n  unknown_host_registration: null\n  approval_requests_per_user: null\n',
        ),
      },
    });
    const proxy = p;
    const outcomes: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const pending: string[] = [];
      for (let i = 0; i < APPROVALS; i++) {
        const { key } = await proxy.linkedHost(`user-${round}-${i}`);
        const reg = await proxy.register(key, { capabilities: ['get_note'] });
        pending.push((await proxy.pendingApproval(reg.body.agent_id)).id as string);
      }
      writeFileSync(
        spec,
        readFileSync(notesSpec({ noteInput: `{ type: string, maxLength: ${round + 5} }` }), 'utf8'),
      );
      let reloaded = false;
      const reload = proxy.proxy.reload().finally(() => {
        reloaded = true;
      });
      const decide = async (): Promise<void> => {
        while (pending.length > 0 && !reloaded) {
          await proxy.admin('POST', `/admin/approvals/${pending.shift()}/approve`, {});
        }
      };
      await Promise.all(Array.from({ length: DECIDING_AT_ONCE }, decide));
      const result = await reload;
      outcomes.push(result.ok ? 'ok' : `refused: ${result.error}`);
    }
    expect(outcomes).toEqual(Array.from({ length: ROUNDS }, () => 'ok'));
  }, 120_000);
});
