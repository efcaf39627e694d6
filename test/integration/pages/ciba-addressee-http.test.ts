/**
 * §7.2 with a host linked to nobody: any login_hint gets CIBA (so the answer tells a stranger
 * nothing), and a hint that names no approver reaches nobody. Bob can sign in here but is not one
 * of `approval.approvers`: a stranger's CIBA request naming him is neither in his inbox nor his to
 * open or decide. Over plain HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { ALICE, BOB, csrfOf, get, post, signIn, startPagesProxy } from '../../helpers/page-http.js';
import type { TestProtocol } from '../../helpers/protocol.js';

const POLICY = `capabilities:\n  public: ["*"]\napproval:\n  methods: [device_authorization, ciba]\n  approvers: [${ALICE}]\nrate_limits:\n  unknown_host_registration: null\n  per_ip: 100000/1m\n`;

let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy('', { policy: POLICY });
});
afterAll(() => p.close());

/** A stranger's registration with `hint` as login_hint: its approval id. */
async function strangerAsks(hint: string): Promise<{ id: string; agentId: string }> {
  const reg = await p.register(await generateTestKey(), { capabilities: ['list_pets'], login_hint: hint });
  expect(reg.body.approval.method).toBe('ciba');
  return { id: (await p.pendingApproval(reg.body.agent_id)).id as string, agentId: reg.body.agent_id };
}

describe('a CIBA request reaches only an approver it names', () => {
  it("one naming a user who is no approver is not in that user's inbox, nor theirs to open", async () => {
    const toBob = await strangerAsks(BOB);
    const { cookie } = await signIn(p, BOB);
    const inbox = await get(p, '/approvals', cookie);
    expect(inbox.status).toBe(200);
    expect(inbox.text).not.toContain(toBob.id);
    const opened = await post(p, '/device', { csrf: await csrfOf(p, cookie), approval: toBob.id }, cookie);
    expect(opened.status).toBe(404);
    expect(opened.text).not.toContain('id="approve-form"');
  });

  it("one naming an approver is in that approver's inbox", async () => {
    const toAlice = await strangerAsks(ALICE);
    const { cookie } = await signIn(p, ALICE);
    expect((await get(p, '/approvals', cookie)).text).toContain(toAlice.id);
  });
});
