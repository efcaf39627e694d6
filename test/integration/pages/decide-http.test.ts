/**
 * Deciding over plain HTTP, as an attacker would: a stale session without the password (§8.11),
 * markup in agent-chosen text (§8.10), another user's request, a pre-filled code; and the same
 * for CIBA requests opened from the inbox (a stale session, a binding_message with markup).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestKey } from '../../helpers/keys.js';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';
import {
  ALICE,
  type Answer,
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

/**
 * CIBA on the pages (§7.5): requests addressed to alice by a host linked to her, opened from her
 * inbox by their id. A proxy of their own, with CIBA on and its own clock.
 */
describe('CIBA requests on the approval pages', () => {
  const CIBA_POLICY = `capabilities:\n  public: ["*"]\napproval:\n  methods: [device_authorization, ciba]\n  approvers: [${ALICE}, ${BOB}]\nrate_limits:\n  unknown_host_registration: null\n  per_ip: 100000/1m\n`;
  let q: TestProtocol;
  let qClock: TestClock;
  beforeAll(async () => {
    qClock = new TestClock();
    q = await startPagesProxy('', { clock: qClock, policy: CIBA_POLICY });
  });
  afterAll(async () => {
    await q?.close();
  });

  /** A CIBA registration to alice from a host linked to her; its approval as the operator sees it. */
  async function cibaToAlice(
    body: Record<string, unknown> = {},
  ): Promise<{ host: TestKey; agentId: string; approval: any }> {
    const { key: host } = await q.linkedHost(ALICE);
    const reg = await q.register(host, {
      name: 'Expense reporter',
      capabilities: ['list_pets'],
      login_hint: ALICE,
      ...body,
    });
    expect(reg.status).toBe(200);
    expect(reg.body.approval.method).toBe('ciba');
    const agentId = reg.body.agent_id as string;
    const approval = await q.pendingApproval(agentId);
    expect(approval.method).toBe('ciba');
    expect(approval.login_hint).toBe(ALICE);
    await stillPending(host, agentId, approval.id);
    return { host, agentId, approval };
  }

  /** Opens the request from the card in alice's inbox (POST /device with the card's fields). */
  async function openFromInbox(cookie: string, approvalId: string): Promise<Answer> {
    const inbox = await get(q, '/approvals', cookie);
    expect(inbox.status).toBe(200);
    const card = hiddenFields(inbox.text, `request-${approvalId}`);
    expect(card.approval).toBe(approvalId);
    expect(card).not.toHaveProperty('code');
    const shown = await post(q, '/device', card, cookie);
    expect(shown.status).toBe(200);
    return shown;
  }

  /** The grants of the agent, by capability, from §5.5 status. */
  async function grantsOf(host: TestKey, agentId: string): Promise<Record<string, string>> {
    const status = await q.status(host, agentId);
    expect(status.status).toBe(200);
    return Object.fromEntries(
      (status.body.agent_capability_grants as { capability: string; status: string }[]).map((g) => [
        g.capability,
        g.status,
      ]),
    );
  }

  /**
   * Nothing was decided: the request is still open and list_pets still only asked for. (An agent of
   * a host linked to alice is active from the start, with no grant: its grants are what the
   * request decides.)
   */
  async function stillPending(host: TestKey, agentId: string, approvalId: string): Promise<void> {
    expect(await grantsOf(host, agentId)).toEqual({ list_pets: 'pending' });
    expect((await q.pendingApproval(agentId))?.id).toBe(approvalId);
  }

  it('§8.11 a CIBA approval needs fresh authentication: a stale session without the password, or with a wrong one, is refused', async () => {
    const r = await cibaToAlice();
    const { cookie } = await signIn(q, ALICE, '/approvals');
    expect(cookie).not.toBe('');
    // Opened while the sign-in is fresh: the form asks for no password.
    const fresh = await openFromInbox(cookie, r.approval.id);
    expect(fresh.text).toContain('Request sent to you');
    expect(fresh.text).not.toContain('id="fresh-auth"');
    const fields = hiddenFields(fresh.text, 'approve-form');
    expect(fields.approval).toBe(r.approval.id);
    const approve = { ...fields, cap: '0', expires: 'never' };

    qClock.advance(5 * 60_000 + 1);
    // The page now asks for the password (device-page.ts showRequest)...
    const stale = await openFromInbox(cookie, r.approval.id);
    expect(stale.text).toContain('id="fresh-auth"');
    expect(hiddenFields(stale.text, 'approve-form')).toEqual(fields);
    const approveForm = stale.text.slice(
      stale.text.indexOf('id="approve-form"'),
      stale.text.indexOf('</form>', stale.text.indexOf('id="approve-form"')),
    );
    expect(approveForm).toContain('name="password" type="password"');

    // ...and Approve checks it: the form as it was when fresh, without a password.
    const none = await post(q, '/device/approve', approve, cookie);
    expect(none.status).toBe(400);
    expect(none.text).toContain('That password or one-time code is not right. Nothing was granted.');
    expect(none.text).not.toContain('Approved.');
    expect(none.headers.get('set-cookie')).toBeNull();
    await stillPending(r.host, r.agentId, r.approval.id);

    const empty = await post(q, '/device/approve', { ...approve, password: '' }, cookie);
    expect(empty.status).toBe(400);
    await stillPending(r.host, r.agentId, r.approval.id);

    const wrong = await post(q, '/device/approve', { ...approve, password: `${PASSWORD}x` }, cookie);
    expect(wrong.status).toBe(400);
    expect(wrong.text).toContain('That password or one-time code is not right. Nothing was granted.');
    expect(wrong.headers.get('set-cookie')).toBeNull();
    await stillPending(r.host, r.agentId, r.approval.id);

    // The right password re-authenticates (a new session) and approves.
    const right = await post(q, '/device/approve', { ...approve, password: PASSWORD }, cookie);
    expect(right.status).toBe(200);
    expect(right.text).toContain('Approved.');
    expect(right.headers.get('set-cookie')).toMatch(/=/);
    expect(await grantsOf(r.host, r.agentId)).toEqual({ list_pets: 'active' });
    expect(await q.pendingApproval(r.agentId)).toBeUndefined();
  });

  it('§8.10 binding_message is plain text on the device page and in the inbox (CIBA and device requests)', async () => {
    const evil = '<img src=x onerror=alert(1)><script>alert(2)</script>[click](https://evil.example) Approve';
    // What §8.10 leaves of it (display-text.ts plainText): tags gone, the rest as inert text.
    const cleaned = 'alert(2)[click](https://evil.example) Approve';
    const ciba = await cibaToAlice({ name: 'Binding ciba', binding_message: evil });
    // Stored as sent: the pages are what must make it plain.
    expect(ciba.approval.binding_message).toBe(evil);
    const device = await pendingRegistration(q, { name: 'Binding device', binding_message: evil });
    const deviceApproval = await q.pendingApproval(device.agentId);
    expect(deviceApproval.method).toBe('device_authorization');
    expect(deviceApproval.binding_message).toBe(evil);

    const expectNoMarkup = (html: string): void => {
      expect(html).not.toMatch(/<img/i);
      expect(html).not.toMatch(/<script>alert/i);
      expect(html).not.toMatch(/onerror=/i);
      expect(html).not.toMatch(/<a\b[^>]*evil\.example/i);
      expect(html).not.toMatch(/href\s*=\s*["']?[^"'>]*evil\.example/i);
      expect(html).not.toContain('&lt;img');
      expect(html).not.toContain('&lt;script');
    };

    const { cookie } = await signIn(q, ALICE);
    // The device request, opened by its code (which also puts it in alice's inbox).
    const csrf = await csrfOf(q, cookie);
    const byCode = await post(q, '/device', { csrf, code: device.code }, cookie);
    expect(byCode.status).toBe(200);
    expect(byCode.text).toContain('id="approve-form"');
    expectNoMarkup(byCode.text);
    expect(byCode.text).toContain(`<dd id="binding-message">${cleaned}</dd>`);

    // The CIBA request, opened from the inbox by its id.
    const byId = await openFromInbox(cookie, ciba.approval.id);
    expect(byId.text).toContain('Request sent to you');
    expectNoMarkup(byId.text);
    expect(byId.text).toContain(`<dd id="binding-message">${cleaned}</dd>`);

    const inbox = await get(q, '/approvals', cookie);
    expect(inbox.status).toBe(200);
    expectNoMarkup(inbox.text);
    for (const id of [ciba.approval.id as string, deviceApproval.id as string]) {
      const start = inbox.text.indexOf(`id="request-${id}"`);
      expect(start).toBeGreaterThan(-1);
      const cardHtml = inbox.text.slice(start, inbox.text.indexOf('</li>', start));
      expect(cardHtml).toContain(`<p>Message from the agent: <q>${cleaned}</q></p>`);
    }

    // Looking changed nothing.
    await stillPending(ciba.host, ciba.agentId, ciba.approval.id);
    await stillPending(device.host, device.agentId, deviceApproval.id);
    expect((await q.status(device.host, device.agentId)).body.status).toBe('pending');
  });

  it('§8.10 a binding_message with characters to escape but no tags is kept and escaped', async () => {
    const message = `a < b & "c" > d 'e'`;
    // No tag in it (`< ` opens none), so plainText keeps every character; escapeHtml (html.ts) does the rest.
    const escaped = 'a &lt; b &amp; &quot;c&quot; &gt; d &#39;e&#39;';
    const device = await pendingRegistration(q, { name: 'Escaped device', binding_message: message });
    const approval = await q.pendingApproval(device.agentId);
    expect(approval.binding_message).toBe(message);

    const { cookie } = await signIn(q, ALICE);
    const csrf = await csrfOf(q, cookie);
    const page = await post(q, '/device', { csrf, code: device.code }, cookie);
    expect(page.status).toBe(200);
    const start = page.text.indexOf('<dd id="binding-message">');
    expect(start).toBeGreaterThan(-1);
    const element = page.text.slice(start, page.text.indexOf('</dd>', start) + '</dd>'.length);
    expect(element).toBe(`<dd id="binding-message">${escaped}</dd>`);
    expect(element).not.toContain('< b &');

    const inbox = await get(q, '/approvals', cookie);
    expect(inbox.status).toBe(200);
    const cardStart = inbox.text.indexOf(`id="request-${approval.id as string}"`);
    expect(cardStart).toBeGreaterThan(-1);
    const card = inbox.text.slice(cardStart, inbox.text.indexOf('</li>', cardStart));
    expect(card).toContain(`<p>Message from the agent: <q>${escaped}</q></p>`);
    expect(card).not.toContain('< b &');
    expect(inbox.text).not.toContain(message);
  });
});
