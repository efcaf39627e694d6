/**
 * Per-call approval in headless Chromium (issue 16 §1, §5.11, §8.11): an agent's execute through
 * the real proxy answers 202; the user signs in, opens the call from the inbox, reads the exact
 * arguments and approves with Chromium's virtual passkey; the agent's poll (a fresh JWT each time)
 * gets the upstream's result, and the recording upstream received exactly the approved
 * arguments exactly once. Also: deny, a revoked agent, and an assertion captured for one call
 * replayed on another. One server and one browser for the file. Screenshot:
 * docs/screenshots/per-call-approval.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshot, submitForm } from '../../helpers/browser.js';
import type { TestKey } from '../../helpers/keys.js';
import {
  callIdOf,
  PASSWORD,
  startPerCallProxy,
  type PerCallProxy,
  perCallPolicy,
} from '../../helpers/per-call.js';
import { enrolOnPage, pageWithAuthenticator, signInOnPage } from '../../helpers/virtual-authenticator.js';

const ALICE = 'alice@example.com';
const POLICY = perCallPolicy('send_transfer');

let s: PerCallProxy;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  s = await startPerCallProxy({ policy: POLICY, users: [ALICE] });
  browser = await launchChromium();
  page = await pageWithAuthenticator(browser);
  await signInOnPage(page, s.p.issuer, ALICE, PASSWORD);
  await enrolOnPage(page, s.p.issuer, 'This browser');
});
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

interface Agent {
  readonly agent: TestKey;
  readonly agentId: string;
}

async function poll(a: Agent, statusUrl: string): Promise<{ status: number; body: any }> {
  return s.p.request('GET', new URL(statusUrl).pathname, { token: await s.p.agentToken(a.agent, a.agentId) });
}

async function pending(a: Agent, args: Record<string, unknown>): Promise<string> {
  const reply = await s.p.execute(a.agent, a.agentId, 'send_transfer', args);
  expect(reply.status).toBe(202);
  expect(reply.body.status).toBe('pending');
  return reply.body.status_url as string;
}

async function openCall(id: string): Promise<void> {
  await page.goto(`${s.p.issuer}/approvals/calls/${id}`);
  expect(await page.textContent('#call-title')).toBe('Approve one call');
}

describe('per-call approval in the browser', () => {
  it('execute → 202 → approve from the inbox with the passkey → the poll returns the result; the upstream got exactly these arguments once', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    s.upstream.reset();
    const memo = `Deposit for the flat at 12 Rue des Lilas. ${'Keep this note. '.repeat(20)}`;
    const args = { to: 'acct-42', amount: 125000, memo };
    const statusUrl = await pending(a, args);
    const id = callIdOf(statusUrl);

    await page.goto(`${s.p.issuer}/approvals`);
    const card = page.locator(`#call-${id}`);
    expect(await card.textContent()).toContain('send_transfer');
    await Promise.all([page.waitForEvent('load'), card.locator('a.button').click()]);
    const shown = (await page.textContent('#arguments')) ?? '';
    expect(shown).toContain('Destination account');
    expect(shown).toContain('acct-42');
    expect(shown).toContain('Amount in cents');
    expect(shown).toContain('125000');
    // The long memo is folded, with the whole value one click away (no script needed).
    expect(await page.textContent('#all-memo summary')).toBe(`Show all ${memo.length} characters`);
    expect(await page.locator('#all-memo pre').textContent()).toBe(memo);
    expect(s.upstream.requests).toHaveLength(0);
    await screenshot(page, 'per-call-approval');

    // The first Approve only unfolds what is still folded: the passkey confirms the whole value.
    expect(await page.locator('#all-memo').getAttribute('open')).toBeNull();
    await page.click('#approve-form button');
    expect(await page.locator('#all-memo').getAttribute('open')).toBe('');
    expect(await page.textContent('#passkey-status')).toContain('Read them, then approve again');
    expect(await s.p.proxy.protocol.store.perCall(id)).toMatchObject({ status: 'pending' });
    expect(s.upstream.requests).toHaveLength(0);
    expect(await submitForm(page, '#approve-form button')).toBe(200);
    expect(await page.textContent('#outcome')).toContain('ran once');
    const sent = s.upstream.received('/transfers');
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]?.body.toString('utf8') ?? '')).toEqual(args);

    const done = await poll(a, statusUrl);
    expect(done.body.status).toBe('completed');
    expect(JSON.parse(done.body.result.body)).toEqual(args);
    // Delivered once; the page and a second poll find nothing; the upstream saw one call.
    expect((await poll(a, statusUrl)).status).toBe(404);
    await page.goto(`${s.p.issuer}/approvals/calls/${id}`);
    expect(await page.textContent('#outcome')).toContain('No open call of yours');
    expect(s.upstream.requests).toHaveLength(1);
  });

  it('deny → the poll says failed with approval_denied, and nothing reached the upstream', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-13', amount: 999 });
    await openCall(callIdOf(statusUrl));
    await page.fill('#deny-reason', 'Not a payee I know');
    expect(await submitForm(page, '#deny-form button')).toBe(200);
    expect(await page.textContent('#outcome')).toContain('Denied');
    const done = await poll(a, statusUrl);
    expect(done.body).toEqual({
      status: 'failed',
      error: { error: 'approval_denied', message: expect.any(String) },
    });
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('expiry (test clock) → the page no longer offers it, the poll says failed with approval_expired', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    s.upstream.reset();
    const statusUrl = await pending(a, { to: 'acct-16', amount: 3 });
    const id = callIdOf(statusUrl);
    await openCall(id);
    expect(await page.textContent('#time-left')).toContain('5 minutes left');
    s.clock.advance(5 * 60_000);
    await page.reload();
    expect(await page.textContent('#outcome')).toContain('No open call of yours');
    const done = await poll(a, statusUrl);
    expect(done.body).toEqual({
      status: 'failed',
      error: { error: 'approval_expired', message: expect.any(String) },
    });
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('an agent revoked before the approval: its call is closed with agent_revoked, nothing left to approve or execute', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    s.upstream.reset();
    const id = callIdOf(await pending(a, { to: 'acct-14', amount: 5 }));
    expect((await s.p.admin('POST', `/admin/agents/${a.agentId}/revoke`, {})).status).toBe(200);
    const shown = await page.goto(`${s.p.issuer}/approvals/calls/${id}`);
    expect(shown?.status()).toBe(404);
    expect(await page.locator('#approve-form').count()).toBe(0);
    expect(s.upstream.requests).toHaveLength(0);
    const listed = await s.p.admin('GET', '/admin/per-call-approvals?status=failed&limit=200');
    const row = listed.body.per_call_approvals.find((r: { id: string }) => r.id === id);
    expect(row.error.error).toBe('agent_revoked');
  });

  it('a passkey assertion captured for one call is refused for another: the challenge commits to what was shown', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    s.upstream.reset();
    const first = callIdOf(await pending(a, { to: 'acct-15', amount: 1 }));
    const second = callIdOf(await pending(a, { to: 'acct-evil', amount: 100000 }));
    // The ceremony for the first call, run as the page script would, but kept instead of sent.
    await openCall(first);
    const captured = await page.evaluate<string>(`(async () => {
      const form = document.getElementById('approve-form');
      const res = await fetch(form.getAttribute('data-options'), { method: 'POST', body: new URLSearchParams(new FormData(form)) });
      const json = await res.json();
      const answer = await window.SimpleWebAuthnBrowser.startAuthentication({ optionsJSON: json.assertion });
      return JSON.stringify(answer);
    })()`);
    // …posted with the second call's own form (its CSRF token and shown hash).
    await openCall(second);
    const status = await page.evaluate<number>(`(async () => {
      const form = document.getElementById('approve-form');
      const body = new URLSearchParams(new FormData(form));
      body.set('assertion', ${JSON.stringify(captured)});
      const res = await fetch(form.getAttribute('action'), { method: 'POST', body });
      return res.status;
    })()`);
    expect(status).toBe(403);
    expect((await s.p.proxy.protocol.store.perCall(second))?.status).toBe('pending');
    expect((await s.p.proxy.protocol.store.perCall(first))?.status).toBe('pending');
    expect(s.upstream.requests).toHaveLength(0);
  });

  it('a value is drawn in the order it is sent: right-to-left letters cannot reorder digits, and are flagged with lookalikes', async () => {
    const a = await s.p.activeAgent(['send_transfer'], { userId: ALICE });
    // U+05C0 (Hebrew paseq) looks like "|" and, unisolated, reversed the digit groups after it.
    const id = callIdOf(
      await pending(a, { to: 'IBAN DE89\u05C0 1111 2222 3333', amount: 100, memo: 'асct-42' }),
    );
    await openCall(id);
    // Where each digit group is drawn, read in the page (a string: the test compiles without DOM types).
    const drawn = await page.evaluate<{ x1111: number; x2222: number; x3333: number }>(`(() => {
      const pre = [...document.querySelectorAll('#arguments pre.value')].find((e) => e.textContent.includes('1111'));
      const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
      let node = walker.nextNode();
      while (!node.data.includes('1111')) node = walker.nextNode();
      const left = (piece) => {
        const range = document.createRange();
        const at = node.data.indexOf(piece);
        range.setStart(node, at);
        range.setEnd(node, at + piece.length);
        return range.getBoundingClientRect().left;
      };
      return { x1111: left('1111'), x2222: left('2222'), x3333: left('3333') };
    })()`);
    expect(drawn.x1111).toBeLessThan(drawn.x2222);
    expect(drawn.x2222).toBeLessThan(drawn.x3333);
    const risks = await page.locator('#arguments .risk').allTextContents();
    expect(risks).toEqual([
      expect.stringContaining('right-to-left letters'),
      expect.stringMatching(/Mixes alphabets in асct.*Cyrillic, Latin/),
    ]);
    // The inbox card draws the same way, and counts the flagged values as warnings.
    await page.goto(`${s.p.issuer}/approvals`);
    const card = page.locator(`#call-${id}`);
    expect(await card.locator('.risk').textContent()).toBe('2 warnings: review it carefully.');
    expect(await card.locator('bdo[dir="ltr"]').count()).toBeGreaterThanOrEqual(2);
  });
});
