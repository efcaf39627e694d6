/**
 * Approvers signing in at an OpenID Connect provider (issue 11), in headless Chromium over real
 * HTTP: a real `oidc-provider` (test/helpers/oidc-provider.ts) whose login and consent forms the
 * browser fills in, and real proxies with a TestClock. Covered: sign-in then approving a
 * read-only request; the attacks on the callback (unknown state, replay, another browser, a
 * disallowed acr); fresh authentication through the provider (§8.11: max_age=0, auth_time
 * checked); a user_id from another claim; a provider that is down; nothing secret in the log.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { PENDING_TTL_MS } from '../../../src/protocol/oidc-outcomes.js';
import { hashPassword } from '../../../src/util/password.js';
import {
  freePort,
  launchChromium,
  openPage,
  submitForm as submit,
  writeConfig,
  screenshot,
} from '../../helpers/browser.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { IDP_PASSWORD, startTestIdp, type TestIdp } from '../../helpers/oidc-provider.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';

const POLICY = 'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n';
const ACCOUNTS = {
  alice: { email: 'alice@example.com', email_verified: true, preferred_username: 'alice', name: 'Alice' },
  mallory: {
    email: 'mallory@example.com',
    email_verified: false,
    preferred_username: 'mallory',
    name: 'Mallory',
  },
};

let clock: TestClock;
let idp: TestIdp;
/** OIDC (acr urn:example:mfa required) plus one local account. */
let p: TestProtocol;
/** OIDC only, user_id from preferred_username. */
let q: TestProtocol;
let browser: Browser;
let origin = '';
const logLines: string[] = [];

async function startWith(port: number, signIn: string, c: TestClock, log?: string[]): Promise<TestProtocol> {
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\n${signIn}`,
  );
  return startProtocol({
    policy: POLICY,
    clock: c,
    overrides: { config, port },
    env: { IDP_CLIENT_SECRET: idp.clientSecret },
    ...(log ? { logger: createLogger('debug', (line) => log.push(line)) } : {}),
  });
}

const oidcBlock = (extra = ''): string =>
  `  oidc:\n    issuer: ${idp.issuer}\n    client_id: ${idp.clientId}\n    client_secret: { env: IDP_CLIENT_SECRET }\n    name: Example SSO\n${extra}`;

beforeAll(async () => {
  clock = new TestClock();
  const [portP, portQ] = [await freePort(), await freePort()];
  idp = await startTestIdp({
    redirectUris: [portP, portQ].map((port) => `http://localhost:${port}/sign-in/oidc/callback`),
    accounts: ACCOUNTS,
    now: () => clock.now(),
  });
  const hash = await hashPassword('correct horse battery staple', { N: 2 ** 14, r: 8, p: 1 });
  p = await startWith(
    portP,
    `sign_in:\n  fresh_auth: 5m\n${oidcBlock('    acr_values: [urn:example:mfa]\n')}  local:\n    users:\n      - user_id: bob@example.com\n        password_hash: "${hash}"\n`,
    clock,
    logLines,
  );
  q = await startWith(portQ, `sign_in:\n${oidcBlock('    user_id_claim: preferred_username\n')}`, clock);
  origin = p.issuer;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
  await q?.close();
  await idp?.close();
});

const newPage = (width = 1280, height = 800): Promise<Page> => openPage(browser, width, height);

/** At the provider: the login form, and the consent form when it asks, until back at `until`. */
async function atProvider(page: Page, until: RegExp, login = 'alice'): Promise<void> {
  await page.waitForURL((u) => u.href.startsWith(`${idp.issuer}/interaction/`));
  const loginPage = page.url();
  await page.fill('#idp-login', login);
  await page.fill('#idp-password', IDP_PASSWORD);
  await Promise.all([page.waitForURL((u) => u.href !== loginPage), page.click('#idp-submit')]);
  if (page.url().startsWith(`${idp.issuer}/interaction/`)) {
    const consentPage = page.url();
    await Promise.all([page.waitForURL((u) => u.href !== consentPage), page.click('#idp-allow')]);
  }
  await page.waitForURL(until);
}

/** Any page of the proxy under test (where a refused or accepted sign-in lands). */
const atProxy = (): RegExp => new RegExp(`^${origin}/`);

/** Signs in at the provider from the device page's link; lands back on /device?code=. */
async function signInForCode(page: Page, code: string, login = 'alice', base = origin): Promise<void> {
  await page.goto(`${base}/device?code=${code}`);
  await Promise.all([page.waitForURL(/\/sign-in\?/), page.click('#sign-in-link')]);
  await page.click('#oidc-sign-in');
  await atProvider(page, /\/device\?code=/, login);
}

/** A delegated agent registration waiting for approval. */
async function pending(
  t: TestProtocol,
  capabilities: string[],
): Promise<{ code: string; host: TestKey; agentId: string }> {
  const host = await generateTestKey();
  const reg = await t.register(host, {
    name: 'Shelter helper',
    host_name: 'Alice laptop',
    capabilities,
    reason: 'Keep the shelter list current',
  });
  expect(reg.status).toBe(200);
  return { code: reg.body.approval.user_code as string, host, agentId: reg.body.agent_id as string };
}

async function openRequest(page: Page): Promise<void> {
  await submit(page, 'button:has-text("Continue")');
  expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
}

async function sessionCookie(context: BrowserContext): Promise<string | undefined> {
  return (await context.cookies()).find((c) => c.name === 'aap_session')?.value;
}

describe('OIDC sign-in', () => {
  it('signs in at the provider (login and consent forms), then approves a read-only request (screenshot)', async () => {
    const { code, host, agentId } = await pending(p, ['list_pets']);
    const page = await newPage();
    await page.goto(`${origin}/device?code=${code}`);
    await Promise.all([page.waitForURL(/\/sign-in\?/), page.click('#sign-in-link')]);
    expect(await page.textContent('#oidc-sign-in')).toBe('Sign in with Example SSO');
    await screenshot(page, 'sign-in-oidc');
    await page.click('#oidc-sign-in');
    await page.waitForURL((u) => u.href.startsWith(`${idp.issuer}/interaction/`));
    // Authorization code + PKCE (S256), state and nonce, and the acr values asked for.
    await atProvider(page, /\/device\?code=/);
    expect(page.url()).toBe(`${origin}/device?code=${code}`);
    expect(await page.textContent('#signed-in-as')).toBe('alice@example.com');
    const cookie = (await page.context().cookies()).find((c) => c.name === 'aap_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    await openRequest(page);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Shelter helper may now use: list_pets.',
    );
    expect((await p.status(host, agentId)).body.status).toBe('active');
    // The decision record keeps how the provider authenticated the approver (issue 16 §2).
    const decided = (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find(
      (r) => r.type === 'approval.approved',
    );
    expect(decided?.detail).toMatchObject({
      by: 'alice@example.com',
      auth_method: 'oidc',
      acr: 'urn:example:mfa',
      amr: ['pwd', 'otp'],
      client_ip: '127.0.0.1',
    });
    expect(decided?.detail?.content_hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await page.context().close();
  });

  it('sends the authorization request with PKCE S256, state, nonce and acr_values to the provider', async () => {
    const page = await newPage();
    const [request] = await Promise.all([
      page.waitForRequest((r) => r.url().startsWith(`${idp.issuer}/auth`)),
      page.goto(`${origin}/sign-in/oidc?return=/device`),
    ]);
    const params = new URL(request.url()).searchParams;
    expect(params.get('response_type')).toBe('code');
    expect(params.get('code_challenge_method')).toBe('S256');
    expect(params.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('acr_values')).toBe('urn:example:mfa');
    expect(params.get('redirect_uri')).toBe(`${origin}/sign-in/oidc/callback`);
    expect(params.get('max_age')).toBeNull();
    await page.context().close();
  });
});

describe('attacks on the callback', () => {
  /**
   * Runs a sign-in up to the provider's redirect back to the proxy, which is held: the consent
   * form's POST is answered here (Playwright cannot intercept a redirect, only a first request),
   * following the provider's redirects with the browser's cookies up to the callback URL.
   */
  async function heldCallback(page: Page): Promise<string> {
    let held = '';
    await page.route('**/interaction/*/confirm', async (route) => {
      let res = await route.fetch({ maxRedirects: 0 });
      let location = res.headers().location ?? '';
      while (location.startsWith(idp.issuer) || location.startsWith('/')) {
        res = await page.context().request.get(new URL(location, idp.issuer).href, { maxRedirects: 0 });
        location = res.headers().location ?? '';
      }
      held = location;
      await route.fulfill({ status: 200, contentType: 'text/plain', body: 'held' });
    });
    await page.goto(`${origin}/sign-in/oidc?return=/device`);
    await atProvider(page, /\/confirm$/);
    await page.unroute('**/interaction/*/confirm');
    expect(held).toMatch(/\/sign-in\/oidc\/callback\?.*code=/);
    return held;
  }

  it('refuses a callback with an unknown state, and a replayed one: no session is started', async () => {
    const page = await newPage();
    const callback = await heldCallback(page);
    const forged = new URL(callback);
    forged.searchParams.set('state', 'A'.repeat(43));
    let res = await page.goto(forged.href);
    expect(res?.status()).toBe(400);
    expect(await page.textContent('#outcome')).toContain(
      'expired, was already used, or was not started in this browser',
    );
    expect(await sessionCookie(page.context())).toBeUndefined();
    // The real one works once …
    res = await page.goto(callback);
    expect(page.url()).toBe(`${origin}/device`);
    expect(await page.textContent('#signed-in-as')).toBe('alice@example.com');
    const first = await sessionCookie(page.context());
    // … and a replay is refused, starting no new session.
    res = await page.goto(callback);
    expect(res?.status()).toBe(400);
    expect(await page.textContent('#outcome')).toContain('already used');
    expect(await sessionCookie(page.context())).toBe(first);
    await page.context().close();
  });

  it('refuses a callback that comes back after the pending sign-in expired (10 minutes)', async () => {
    const page = await newPage();
    const callback = await heldCallback(page);
    clock.advance(PENDING_TTL_MS + 1);
    const res = await page.goto(callback);
    expect(res?.status()).toBe(400);
    expect(await page.textContent('#outcome')).toContain('This sign-in has expired');
    expect(await sessionCookie(page.context())).toBeUndefined();
    await page.context().close();
  });

  it('refuses a callback opened in another browser (login CSRF): only the starting browser can finish it', async () => {
    const victim = await newPage();
    const attacker = await newPage();
    const callback = await heldCallback(attacker);
    const res = await victim.goto(callback);
    expect(res?.status()).toBe(400);
    expect(await sessionCookie(victim.context())).toBeUndefined();
    // The refusal did not use up the sign-in of the browser that started it.
    await attacker.goto(callback);
    expect(await attacker.textContent('#signed-in-as')).toBe('alice@example.com');
    await victim.context().close();
    await attacker.context().close();
  });

  it('refuses an ID token whose acr is not in acr_values, and signs nobody in', async () => {
    idp.acr = 'urn:example:pwd';
    try {
      const page = await newPage();
      await page.goto(`${origin}/sign-in?return=/device`);
      await page.click('#oidc-sign-in');
      await atProvider(page, atProxy());
      expect(await page.textContent('#outcome')).toContain('did not use a method this server accepts');
      expect(await sessionCookie(page.context())).toBeUndefined();
      await page.context().close();
    } finally {
      idp.acr = 'urn:example:mfa';
    }
    expect(logLines.join('')).toContain('"reason":"acr_not_allowed","acr":"urn:example:pwd"');
  });

  it('refuses an unverified e-mail address as the user_id', async () => {
    const page = await newPage();
    await page.goto(`${origin}/sign-in/oidc?return=/device`);
    await atProvider(page, atProxy(), 'mallory');
    expect(await page.textContent('#outcome')).toContain('has not verified your e-mail address');
    expect(await sessionCookie(page.context())).toBeUndefined();
    await page.context().close();
  });

  it("shows the provider's refusal (access_denied) and signs nobody in", async () => {
    const page = await newPage();
    await page.goto(`${origin}/sign-in/oidc?return=/device`);
    await page.waitForURL((u) => u.href.startsWith(`${idp.issuer}/interaction/`));
    await page.fill('#idp-login', 'alice');
    await page.fill('#idp-password', IDP_PASSWORD);
    await Promise.all([page.waitForSelector('#idp-deny'), page.click('#idp-submit')]);
    await Promise.all([page.waitForURL(atProxy()), page.click('#idp-deny')]);
    expect(await page.textContent('#outcome')).toContain('Example SSO did not sign you in (access_denied)');
    expect(await sessionCookie(page.context())).toBeUndefined();
    await page.context().close();
  });

  it('refuses a return path to another site: the sign-in comes back to a local page only', async () => {
    const page = await newPage();
    await page.goto(`${origin}/sign-in/oidc?return=${encodeURIComponent('//evil.example/x')}`);
    await atProvider(page, /^http:\/\/localhost:\d+\/device$/);
    expect(page.url()).toBe(`${origin}/device`);
    await page.context().close();
  });
});

describe('fresh authentication through the provider (§8.11)', () => {
  it('a stale OIDC session pressing Approve is sent to the provider with max_age=0, then approves', async () => {
    const { code, host, agentId } = await pending(p, ['list_pets']);
    const page = await newPage();
    await signInForCode(page, code);
    clock.advance(5 * 60_000 + 1);
    await openRequest(page);
    expect(await page.textContent('#fresh-auth')).toContain('Approve sends you to Example SSO');
    const logins = idp.logins;
    // Approve: nothing granted yet, and the page moves on to the provider by itself.
    const [authorize] = await Promise.all([
      page.waitForRequest((r) => r.url().startsWith(`${idp.issuer}/auth`)),
      page.click('#approve'),
    ]);
    expect(new URL(authorize.url()).searchParams.get('max_age')).toBe('0');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await atProvider(page, /\/device\?code=/);
    expect(idp.logins).toBe(logins + 1);
    await openRequest(page);
    expect(await page.locator('#fresh-auth').count()).toBe(0);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Approved.');
    expect((await p.status(host, agentId)).body.status).toBe('active');
    await page.context().close();
  });

  it('refuses a fresh sign-in whose auth_time is older than fresh_auth (a provider that did not ask again)', async () => {
    const { code, host, agentId } = await pending(p, ['list_pets']);
    const page = await newPage();
    await signInForCode(page, code);
    clock.advance(5 * 60_000 + 1);
    idp.authTimeOffsetSec = 10 * 60;
    try {
      await openRequest(page);
      await page.click('#oidc-fresh');
      await atProvider(page, atProxy());
      expect(await page.textContent('#outcome')).toContain('does not count as a fresh sign-in');
    } finally {
      idp.authTimeOffsetSec = 0;
    }
    // Still the stale session: Approve still sends to the provider and grants nothing.
    await page.goto(`${origin}/device?code=${code}`);
    await openRequest(page);
    expect(await page.textContent('#fresh-auth')).toContain('older than allowed');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await page.context().close();
  });

  it("dates the session by the provider's auth_time: a sign-in riding on an old provider session is not fresh", async () => {
    const { code, host, agentId } = await pending(p, ['list_pets']);
    const page = await newPage();
    idp.authTimeOffsetSec = 10 * 60;
    try {
      await signInForCode(page, code);
    } finally {
      idp.authTimeOffsetSec = 0;
    }
    await openRequest(page);
    expect(await page.textContent('#fresh-auth')).toContain('older than allowed');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await page.context().close();
  });

  it('a stale OIDC session cannot approve by posting the form without the provider', async () => {
    const { code, host, agentId } = await pending(p, ['list_pets']);
    const page = await newPage();
    await signInForCode(page, code);
    await openRequest(page);
    const fields: Record<string, string> = {};
    for (const input of await page.locator('#approve-form input[type=hidden]').all()) {
      fields[(await input.getAttribute('name')) ?? ''] = (await input.getAttribute('value')) ?? '';
    }
    clock.advance(5 * 60_000 + 1);
    const res = await fetch(`${p.proxy.url}/device/approve`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: `aap_session=${await sessionCookie(page.context())}`,
        origin,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ ...fields, password: 'anything' }).toString(),
    });
    expect(res.headers.get('refresh')).toMatch(/^0; url=\/sign-in\/oidc\?return=.*&fresh=1$/);
    expect(await res.text()).toContain('nothing was approved yet');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await page.context().close();
  });
});

describe('configuration', () => {
  it('takes the user_id from another claim (preferred_username), on an OIDC-only sign-in page', async () => {
    const { code, host, agentId } = await pending(q, ['list_pets']);
    const page = await newPage();
    await page.goto(`${q.issuer}/sign-in`);
    expect(await page.locator('#password').count()).toBe(0);
    await signInForCode(page, code, 'alice', q.issuer);
    expect(await page.textContent('#signed-in-as')).toBe('alice');
    await openRequest(page);
    // The request is addressed to nobody in particular: alice (by username) may decide it.
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Approved.');
    expect((await q.status(host, agentId)).body.status).toBe('active');
    await page.context().close();
  });

  it('a provider that is down does not stop the proxy; signing in there says so on a page', async () => {
    const port = await freePort();
    const deadIssuer = `http://127.0.0.1:${await freePort()}`;
    const log: string[] = [];
    const t = await startProtocol({
      policy: POLICY,
      overrides: {
        config: writeConfig(
          `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\nsign_in:\n  oidc:\n    issuer: ${deadIssuer}\n    client_id: x\n    client_secret: { value: not-used-here }\n`,
        ),
        port,
      },
      logger: createLogger('debug', (line) => log.push(line)),
    });
    try {
      expect((await fetch(`${t.proxy.url}/readyz`)).status).toBe(200);
      const res = await fetch(`${t.proxy.url}/sign-in/oidc?return=/device`, { redirect: 'manual' });
      expect(res.status).toBe(503);
      expect(await res.text()).toContain('127.0.0.1 could not be reached');
      expect(log.join('')).toContain('oidc discovery failed');
    } finally {
      await t.close();
    }
  });

  it('logs no token, code or client secret of any sign-in above', () => {
    const all = logLines.join('\n');
    expect(all).toContain('oidc sign-in refused');
    expect(all).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
    expect(all).not.toContain(idp.clientSecret);
    expect(all).not.toMatch(/[?&]code=/);
  });
});
