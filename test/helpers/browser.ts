/**
 * Headless Debian Chromium through playwright-core, for the page tests, and a proxy whose issuer
 * is `http://localhost:PORT` (what browsers need for WebAuthn later; cookies and Origin follow it).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    // This machine has no network beyond loopback: keep Chromium from reaching for Google's hosts,
    // and resolve localhost to the IPv4 loopback the test server listens on.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--host-resolver-rules=MAP localhost 127.0.0.1',
    ],
  });
}

/** A port free right now on 127.0.0.1 (the issuer must name it before the server starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Writes a proxy config to a fresh temp directory and returns its path. */
export function writeConfig(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-config-')), 'proxy.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** A page in a fresh browser context (its own cookies), at a desktop size unless told. */
export async function openPage(browser: Browser, width = 1280, height = 800): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height } });
  return context.newPage();
}

/**
 * Clicks `selector` and waits for the document its POST leads to (every form of the pages is a
 * POST answered with a page or a 303, whether the form or the passkey script submits it); the
 * answer's status.
 */
export async function submitForm(page: Page, selector: string): Promise<number> {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().isNavigationRequest() && r.request().method() === 'POST'),
    page.click(selector),
  ]);
  await page.waitForLoadState('load');
  return response.status();
}

const SCREENSHOTS = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));
let scratch: string | undefined;

/**
 * A full-page screenshot named `name`: into docs/screenshots/ (what the README shows) when
 * UPDATE_SCREENSHOTS=1, else into a temp directory, so an ordinary test run renders the page
 * the same way but leaves the repository untouched (times and codes differ on every run).
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir =
    process.env.UPDATE_SCREENSHOTS === '1'
      ? SCREENSHOTS
      : (scratch ??= mkdtempSync(join(tmpdir(), 'aap-screenshots-')));
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}
