/**
 * Chromium's virtual platform authenticator (CDP WebAuthn domain: ctap2, internal transport,
 * resident keys, user verification), and the page steps around it: sign in with a password,
 * add a passkey on /account through the page script. For browser tests that approve with a
 * passkey.
 */
import type { Browser, CDPSession, Page } from 'playwright-core';
import { expect } from 'vitest';
import { submitForm } from './browser.js';

/** The virtual authenticator of a page: its CDP session and id (to read its credentials). */
export interface VirtualAuthenticator {
  readonly cdp: CDPSession;
  readonly id: string;
}

/** A page in a fresh context with a virtual authenticator that verifies the user, and that authenticator. */
export async function pageAndAuthenticator(
  browser: Browser,
  width = 1280,
  height = 800,
): Promise<{ page: Page; authenticator: VirtualAuthenticator }> {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { page, authenticator: { cdp, id: authenticatorId } };
}

/** A page in a fresh context with a virtual authenticator that verifies the user. */
export async function pageWithAuthenticator(browser: Browser, width = 1280, height = 800): Promise<Page> {
  return (await pageAndAuthenticator(browser, width, height)).page;
}

export async function signInOnPage(
  page: Page,
  origin: string,
  user: string,
  password: string,
): Promise<void> {
  await page.goto(`${origin}/sign-in?return=${encodeURIComponent('/account')}`);
  await page.fill('#user_id', user);
  await page.fill('#password', password);
  await submitForm(page, 'form[action="/sign-in"] button[type=submit]');
  expect(await page.textContent('#signed-in-as')).toBe(user);
}

/** Adds a passkey on /account through the page (its script runs the ceremony). */
export async function enrolOnPage(page: Page, origin: string, name: string): Promise<void> {
  await page.goto(`${origin}/account`);
  await page.fill('#passkey-name', name);
  await submitForm(page, '#add-passkey');
  expect(await page.textContent('#outcome')).toBe(`Passkey "${name}" added.`);
}
