/**
 * The §7.1 verification page in a real browser: headless Debian Chromium driven by playwright-core
 * (scripts/ensure-chromium.sh installs it before `npm test`). A user types the code the way people
 * do, submits the form, and reads the request; markup in text an agent chose is stripped and can
 * run nothing (§8.10), even when it is built to execute.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../helpers/browser.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

const HOSTILE_NAME = `<img src=x onerror="document.title='pwned'">Helper`;

let p: TestProtocol;
let browser: Browser;
beforeAll(async () => {
  p = await startProtocol({
    policy: 'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n',
  });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
});

async function openPage(): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { page, problems };
}

describe('the device page in Chromium', () => {
  it('a user types the code, submits, and reads what the agent asks for', async () => {
    const reg = await p.register(await generateTestKey(), {
      name: HOSTILE_NAME,
      host_name: 'Alice laptop',
      capabilities: ['list_pets', 'create_pet'],
      reason: 'Keep <b>the</b> shelter list current',
    });
    const code = reg.body.approval.user_code as string;
    const { page, problems } = await openPage();
    try {
      await page.goto(`${p.proxy.url}/device`);
      expect(await page.title()).toBe('Agent requests — petstore');
      await page.fill('#code', code.replace('-', ' ').toLowerCase());
      await Promise.all([page.waitForURL(/\/device\?code=/), page.click('button[type=submit]')]);

      // §8.10 "strip HTML": the markup is gone, only its text is left, and nothing of it ran.
      expect(await page.textContent('#agent-name')).toBe('Helper');
      expect(await page.textContent('#host-name')).toBe('Alice laptop');
      expect(await page.textContent('#reason')).toBe('Keep the shelter list current');
      const items = await page.locator('#capabilities li').allTextContents();
      expect(items).toEqual(['list_pets — List pets (GET)', 'create_pet — Add a pet (POST)']);
      // No image element, no handler ran, the title is untouched.
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('b').count()).toBe(0);
      expect(await page.title()).toBe('Agent requests — petstore');
      // The form keeps the code, canonical, for a second look.
      expect(await page.inputValue('#code')).toBe(code);
      // Nothing on the page decides the request (§8.11).
      expect(await page.locator('button').allTextContents()).toEqual(['Look up']);
      expect(await page.textContent('#next-step')).toContain(code);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('a mistyped code gets a clear message and the form again', async () => {
    const { page, problems } = await openPage();
    try {
      await page.goto(`${p.proxy.url}/device`);
      await page.fill('#code', 'AAAA-0000');
      await Promise.all([page.waitForURL(/\/device\?code=/), page.click('button[type=submit]')]);
      expect(await page.getByRole('alert').textContent()).toContain('That is not a code of this server');
      expect(await page.locator('#code').count()).toBe(1);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('refuses to be framed by another page (clickjacking)', async () => {
    const { page } = await openPage();
    try {
      // 'load' waits for the frame too, whether it shows the page or Chromium's refusal.
      await page.setContent(`<iframe src="${p.proxy.url}/device"></iframe>`, { waitUntil: 'load' });
      const frame = page.frames().find((f) => f !== page.mainFrame());
      expect(frame).toBeDefined();
      expect(await frame?.locator('#code').count()).toBe(0);
      // The same page opened directly does have the form: the frame was refused, not broken.
      await page.goto(`${p.proxy.url}/device`);
      expect(await page.locator('#code').count()).toBe(1);
    } finally {
      await page.close();
    }
  });
});
