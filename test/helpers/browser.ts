/**
 * Headless Debian Chromium through playwright-core, for the page tests, and a proxy whose issuer
 * is `http://localhost:PORT` (what browsers need for WebAuthn later; cookies and Origin follow it).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
