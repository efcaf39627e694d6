/**
 * Deciding over plain HTTP, as an attacker would: a stale session without the password (§8.11),
 * markup in agent-chosen text (§8.10), another user's request, a pre-filled code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';
import {
  ALICE,
  BOB,
  csrfOf,
  get,
  hiddenFields,
  PASSWORD,
  pendingRegistration,
  post,
  signIn,
  startPagesProxy,
} from '../../helpers/page-http.js';

let p: TestProtocol;
let clock: TestClock;
beforeAll(async () => {
  clock = new TestClock();
  p = await startPagesProxy('', { clock });
});
afterAll(async () => {
  await p?.close();
});

async function openForm(
  cookie: string,
  code: string,
): Promise<{ html: string; fields: Record<string, string> }> {
  const csrf = await csrfOf(p, cookie);
  const shown = await post(p, '/device', { csrf, code }, cookie);
  expect(shown.status).toBe(200);
  return { html: shown.text, fields: hiddenFields(shown.text, 'approve-form') };
}

describe('fresh authentication (§8.11)', () => {
  it('a stale session cannot approve without the password', async () => {
    const r = await pendingRegistration(p);
    const { cookie } = await signIn(p);
    const { fields } = await openForm(cookie, r.code);
    clock.advance(6 * 60_000);
    const a = await post(p, '/device/approve', { ...fields, cap: '0', expires: 'never' }, cookie);
    expect(a.status).toBe(400);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
    const b = await post(
      p,
      '/device/approve',
      { ...fields, cap: '0', expires: 'never', password: 'wrong' },
      cookie,
    );
    expect(b.status).toBe(400);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
  });
});

describe('markup in agent-chosen text (§8.10)', () => {
  const evil = `"><img src=x onerror=alert(1)><script>alert(2)</script>'`;
  it('agent name, host name, reason: no markup in the device page and the inbox', async () => {
    const r = await pendingRegistration(p, { name: evil, host_name: evil, reason: evil });
    const { cookie } = await signIn(p);
    const { html } = await openForm(cookie, r.code);
    expect(html).not.toMatch(/<img|<script>alert|onerror=alert/i);
    const inbox = await get(p, '/approvals', cookie);
    expect(inbox.text).not.toMatch(/<img|<script>alert|onerror=alert/i);
  });
});

describe("another user's request", () => {
  it("bob cannot decide a request of alice's agent by its code (linked host)", async () => {
    const linked = await p.linkedHost(ALICE);
    const reg = await p.register(linked.key, { name: 'x', capabilities: ['list_pets'] });
    const code = reg.body.approval?.user_code as string | undefined;
    if (!code) return; // CIBA / auto; covered elsewhere
    const { cookie } = await signIn(p, BOB);
    const csrf = await csrfOf(p, cookie);
    const shown = await post(p, '/device', { csrf, code }, cookie);
    expect(shown.text).toContain('cannot-decide');
    const a = await post(
      p,
      '/device/approve',
      { csrf, code, shown: 'x', cap: '0', expires: 'never', password: PASSWORD },
      cookie,
    );
    expect(a.status).not.toBe(200);
  });
});

describe('user codes', () => {
  it('a pre-filled ?code= never opens or records the request', async () => {
    const r = await pendingRegistration(p);
    const { cookie } = await signIn(p, BOB);
    const a = await get(p, `/device?code=${r.code}`, cookie);
    expect(a.text).not.toContain('id="approve-form"');
    const inbox = await get(p, '/approvals', cookie);
    expect(inbox.text).not.toContain(r.code);
  });
});
