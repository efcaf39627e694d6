/**
 * Accessibility of the approval pages (issue 16, §5): axe-core's WCAG 2.0/2.1/2.2 A and AA rules
 * run in headless Chromium on every page a person meets (sign-in, the device page signed out and
 * signed in, a request with its decision form, the inbox, the account page, a per-call approval
 * with its arguments, issue 16 §1), at desktop and phone
 * width; each must have 0 violations. axe is injected into the page, so these contexts bypass the
 * pages' CSP (which allows no such script); everything else is the real server.
 */
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../../src/util/password.js';
import { freePort, launchChromium, submitForm as submit, writeConfig } from '../../helpers/browser.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { softPasskey } from '../../helpers/per-call.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { PASSWORD } from '../../helpers/local-sign-in.js';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const WCAG_AA = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa'];
const ALICE = 'alice@example.com';
const POLICY = `capabilities:
  public: ["*"]
  per_call: [place_order]
approval:
  methods: [device_authorization, ciba]
  approvers: [${ALICE}]
  # Short enough that every open request is near its end: the pages show Extend (WCAG 2.2.1).
  expires_in: 2m
rate_limits:
  unknown_host_registration: null
`;

let p: TestProtocol;
let browser: Browser;
let origin = '';
let code = '';
let callPath = '';

beforeAll(async () => {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const port = await freePort();
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\nsign_in:\n  fresh_auth: 5m\n  local:\n    users:\n      - user_id: ${ALICE}\n        password_hash: "${hash}"\n`,
  );
  p = await startProtocol({ policy: POLICY, clock: new TestClock(), overrides: { config, port } });
  origin = p.issuer;
  browser = await launchChromium();
  // A device request (with constraints, so the decision form has its narrowing inputs) and a CIBA
  // request for alice's inbox.
  const device = await p.register(await generateTestKey(), {
    name: 'Shelter helper',
    host_name: 'Alice laptop',
    capabilities: [{ name: 'list_pets', constraints: { limit: { min: 1, max: 10 } } }, 'create_pet'],
    reason: 'Keep the shelter list current',
  });
  expect(device.status).toBe(200);
  code = device.body.approval.user_code as string;
  const ciba = await p.register(await generateTestKey(), {
    name: 'Expense reporter',
    capabilities: ['list_pets'],
    login_hint: ALICE,
    binding_message: 'Confirm code 4471',
  });
  expect(ciba.body.approval.method).toBe('ciba');
  // A per-call execution waiting for alice (issue 16 §1).
  const buyer = await p.activeAgent(['place_order'], { userId: ALICE });
  const call = await p.execute(buyer.agent, buyer.agentId, 'place_order', { petId: 7, quantity: 2 });
  expect(call.status).toBe(202);
  callPath = `/approvals/calls/${String(call.body.status_url).split('/').pop() ?? ''}`;
  // With a passkey the call page shows its Approve form (the passkey prompt), which is checked too.
  await softPasskey(p, ALICE);
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
});

interface Violation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: readonly { readonly target: readonly string[] }[];
}

/** axe's WCAG A/AA violations on the page as it stands, one line each (rule: selectors). */
async function violations(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async (tags) => {
    // why: axe is a global the injected script defines; the test's types do not know it.
    const axe = (
      globalThis as unknown as { axe: { run: (...a: unknown[]) => Promise<{ violations: unknown[] }> } }
    ).axe;
    const result = await axe.run({ runOnly: { type: 'tag', values: tags } });
    return result.violations;
  }, WCAG_AA);
  return (found as Violation[]).map(
    (v) => `${v.id} (${v.impact ?? '?'}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
  );
}

/** Whether the page is wider than the viewport (WCAG 1.4.10 reflow: nothing scrolls sideways). */
async function scrollsSideways(page: Page): Promise<boolean> {
  return page.evaluate(() => {
    // why: the page's DOM, reached through the test's untyped global; no DOM lib in this project.
    const root = (
      globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }
    ).document.documentElement;
    return root.scrollWidth > root.clientWidth;
  });
}

/** Presses Tab until `selector` has the focus (at most `max` times); false if it never does. */
async function tabTo(page: Page, selector: string, max = 40): Promise<boolean> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (
      await page
        .locator(selector)
        .evaluate((el) => el === (el.ownerDocument as { activeElement: unknown }).activeElement)
    )
      return true;
  }
  return false;
}

async function signedInPage(width: number, height: number, back: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height }, bypassCSP: true });
  const page = await context.newPage();
  await page.goto(`${origin}/sign-in?return=${encodeURIComponent(back)}`);
  await page.fill('#user_id', ALICE);
  await page.fill('#password', PASSWORD);
  await submit(page, 'button[type=submit]');
  return page;
}

it('the check itself finds a violation when there is one (an unlabelled input added to a page)', async () => {
  const context = await browser.newContext({ bypassCSP: true });
  const page = await context.newPage();
  await page.goto(`${origin}/sign-in`);
  await page.evaluate(() => {
    // why: the page's DOM, reached through the test's untyped global; no DOM lib in this project.
    const doc = (
      globalThis as unknown as { document: { body: { insertAdjacentHTML: (w: string, h: string) => void } } }
    ).document;
    doc.body.insertAdjacentHTML('beforeend', '<input type="text" name="unlabelled">');
  });
  expect((await violations(page)).join('\n')).toContain('label');
  await context.close();
});

describe.each([
  ['desktop', 1280, 800],
  ['phone', 390, 844],
] as const)('WCAG 2.2 AA, %s', (_, width, height) => {
  it('the sign-in page and the device page signed out have 0 violations', async () => {
    const context = await browser.newContext({ viewport: { width, height }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${origin}/sign-in`);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.goto(`${origin}/device?code=${code}`);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await context.close();
  });

  it('the code form, the request with its decision form, the inbox and the account page have 0 violations', async () => {
    const page = await signedInPage(width, height, `/device?code=${code}`);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await submit(page, 'button:has-text("Continue")');
    expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
    expect(await page.locator('#time-left-extend').count()).toBe(1);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.goto(`${origin}/approvals`);
    expect(await page.locator('#inbox li.card').count()).toBeGreaterThan(0);
    expect(await page.locator('#inbox li.card button:has-text("Extend")').count()).toBeGreaterThan(0);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.goto(`${origin}/account`);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.context().close();
  });

  it('a per-call approval with its arguments, and its inbox card, have 0 violations', async () => {
    const page = await signedInPage(width, height, '/approvals');
    expect(await page.locator('#calls li.card').count()).toBeGreaterThan(0);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.goto(`${origin}${callPath}`);
    expect(await page.textContent('#arguments')).toContain('quantity');
    expect(await page.locator('#approve-form button').count()).toBe(1);
    expect(await violations(page)).toEqual([]);
    expect(await scrollsSideways(page)).toBe(false);
    await page.context().close();
  });
});

it('the whole approve flow works with the keyboard alone: sign in, confirm the code, approve', async () => {
  const host = await generateTestKey();
  const reg = await p.register(host, { name: 'Keyboard helper', capabilities: ['list_pets'] });
  const userCode = reg.body.approval.user_code as string;
  const agentId = reg.body.agent_id as string;
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${origin}/device?code=${userCode}`);
  const navigated = (): Promise<unknown> => page.waitForEvent('load');
  expect(await tabTo(page, '#sign-in-link')).toBe(true);
  await Promise.all([navigated(), page.keyboard.press('Enter')]);
  expect(await tabTo(page, '#user_id')).toBe(true);
  await page.keyboard.type(ALICE);
  await page.keyboard.press('Tab');
  await page.keyboard.type(PASSWORD);
  await Promise.all([navigated(), page.keyboard.press('Enter')]);
  expect(await page.inputValue('#code')).toBe(userCode);
  // The code field takes paste and autofill of one-time codes (WCAG 3.3.8: no transcribing test).
  expect(await page.getAttribute('#code', 'autocomplete')).toBe('one-time-code');
  expect(await tabTo(page, 'button:has-text("Continue")')).toBe(true);
  await Promise.all([navigated(), page.keyboard.press('Enter')]);
  expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
  expect(await tabTo(page, '#approve')).toBe(true);
  await Promise.all([navigated(), page.keyboard.press('Enter')]);
  expect(await page.textContent('#outcome')).toContain(
    'Approved. The agent Keyboard helper may now use: list_pets.',
  );
  expect((await p.status(host, agentId)).body.status).toBe('active');
  await context.close();
});
