/**
 * Passkeys and proof of presence (issue 11, §8.11) in headless Chromium with its virtual
 * authenticator (CDP WebAuthn domain: ctap2, internal transport, resident keys, user
 * verification), over real HTTP against a real proxy whose issuer is http://localhost:PORT.
 *
 * Covered: enrolment on /account, usernameless sign-in with a passkey, approving a data-changing
 * request with the required assertion, and the attacks: no passkey, an assertion without user
 * verification, a replayed, forged or misdirected assertion, a form changed after the passkey
 * confirmed it, CSRF on removal, enrolment without a fresh sign-in or without confirming with the
 * passkey one already has. Screenshots: docs/screenshots/account-passkeys.png and
 * docs/screenshots/device-passkey-required.png.
 */
import { createHash } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../../src/util/password.js';
import {
  freePort,
  launchChromium,
  submitForm as submit,
  writeConfig,
  screenshot,
} from '../../helpers/browser.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { pageAndAuthenticator, type VirtualAuthenticator } from '../../helpers/virtual-authenticator.js';
import { PASSWORD } from '../../helpers/local-sign-in.js';

// CIBA to alice (§7.5) for the inbox test; requests without a login_hint use the device flow.
const POLICY =
  'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n' +
  'approval:\n  methods: [device_authorization, ciba]\n  approvers: [alice@example.com]\n';
const USERS = ['alice', 'bob', 'carol', 'dave', 'erin'].map((u) => `${u}@example.com`);

let p: TestProtocol;
let clock: TestClock;
let browser: Browser;
let origin = '';
let users = '';

async function startWith(policy: string, c: TestClock, signIn = ''): Promise<TestProtocol> {
  const port = await freePort();
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\nsign_in:\n  fresh_auth: 5m\n${signIn}  local:\n    users:\n${users}`,
  );
  return startProtocol({ policy, clock: c, overrides: { config, port } });
}

beforeAll(async () => {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  users = USERS.map((u) => `      - user_id: ${u}\n        password_hash: "${hash}"\n`).join('');
  clock = new TestClock();
  p = await startWith(POLICY, clock);
  origin = p.issuer;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
});

type Authenticator = VirtualAuthenticator;

/** A page with Chromium's virtual platform authenticator: resident keys, user verification. */
const newPage = (width = 1280, height = 800): Promise<{ page: Page; authenticator: Authenticator }> =>
  pageAndAuthenticator(browser, width, height);

async function signIn(page: Page, user: string, back = '/account'): Promise<void> {
  await page.goto(`${origin}/sign-in?return=${encodeURIComponent(back)}`);
  await page.fill('#user_id', user);
  await page.fill('#password', PASSWORD);
  await submit(page, 'form[action="/sign-in"] button[type=submit]');
  expect(await page.textContent('#signed-in-as')).toBe(user);
}

/**
 * Passkeys enrolled so far, as Chromium's authenticator holds them (private keys included): a
 * later page of the same user gets them in its own authenticator, like a passkey synced to
 * another browser.
 */
const wallets = new Map<string, Credential[]>();

async function credentialsOf(authenticator: Authenticator) {
  const { credentials } = await authenticator.cdp.send('WebAuthn.getCredentials', {
    authenticatorId: authenticator.id,
  });
  return credentials;
}
type Credential = Awaited<ReturnType<typeof credentialsOf>>[number];

/** Adds a passkey on /account through the page (the script runs the ceremony) and keeps it. */
async function enrol(page: Page, authenticator: Authenticator, user: string, name: string): Promise<void> {
  await page.goto(`${origin}/account`);
  await page.fill('#passkey-name', name);
  await submit(page, '#add-passkey');
  expect(await page.textContent('#outcome')).toBe(`Passkey "${name}" added.`);
  wallets.set(user, await credentialsOf(authenticator));
}

/** A signed-in page of `user` whose authenticator holds the user's passkey (enrolled if need be). */
async function pageWithPasskey(user: string): Promise<{ page: Page; authenticator: Authenticator }> {
  const opened = await newPage();
  await signIn(opened.page, user);
  const wallet = wallets.get(user);
  if (!wallet) {
    await enrol(opened.page, opened.authenticator, user, 'This browser');
    return opened;
  }
  for (const credential of wallet) {
    // The server refuses a signature counter that went backwards: start from the one it knows.
    const stored = await p.proxy.protocol.store.passkey(
      Buffer.from(credential.credentialId, 'base64').toString('base64url'),
    );
    await opened.authenticator.cdp.send('WebAuthn.addCredential', {
      authenticatorId: opened.authenticator.id,
      credential: { ...credential, signCount: stored?.counter ?? credential.signCount },
    });
  }
  return opened;
}

/** A delegated agent registration waiting for approval. */
async function pending(capabilities: string[]): Promise<{ code: string; host: TestKey; agentId: string }> {
  const host = await generateTestKey();
  const reg = await p.register(host, {
    name: 'Shelter helper',
    host_name: 'Alice laptop',
    capabilities,
    reason: 'Keep the shelter list current',
  });
  expect(reg.status).toBe(200);
  return { code: reg.body.approval.user_code as string, host, agentId: reg.body.agent_id as string };
}

/** With a signed-in page, opens the request for `code` (the code confirmed on the page). */
async function openRequest(page: Page, code: string): Promise<void> {
  await page.goto(`${origin}/device?code=${code}`);
  await submit(page, 'button:has-text("Continue")');
  expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
}

async function agentStatus(host: TestKey, agentId: string): Promise<{ status: string; grants: string[] }> {
  const reply = await p.status(host, agentId);
  const grants = (reply.body.agent_capability_grants ?? []) as { capability: string; status: string }[];
  return {
    status: reply.body.status as string,
    grants: grants.filter((g) => g.status === 'active').map((g) => g.capability),
  };
}

/** The session row behind the page's cookie (the store keeps only the id's SHA-256). */
async function sessionOf(page: Page): Promise<{ userId: string; authMethod: string } | undefined> {
  const [cookie] = await page.context().cookies();
  const idHash = createHash('sha256')
    .update(cookie?.value ?? '')
    .digest('base64url');
  return p.proxy.protocol.store.session(idHash);
}

/** The detail of the agent's newest activity record of `type` (approval.approved / .denied). */
async function decisionRecord(
  agentId: string,
  type: string,
): Promise<Readonly<Record<string, unknown>> | null | undefined> {
  return (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find((r) => r.type === type)?.detail;
}

/** The approve form's fields as the page has them, and the session cookie. */
async function approveForm(page: Page): Promise<{ cookie: string; fields: Record<string, string> }> {
  const fields: Record<string, string> = {};
  for (const input of await page.locator('#approve-form input[type=hidden]').all()) {
    fields[(await input.getAttribute('name')) ?? ''] = (await input.getAttribute('value')) ?? '';
  }
  return { cookie: await cookieOf(page), fields };
}

/**
 * Runs the approval ceremony in the page exactly as the page script would, but hands the
 * assertion back instead of submitting it: what an attacker holding one would have.
 */
async function assertionOnPage(page: Page, optionsUrl = '/device/passkey-options'): Promise<string> {
  return await page.evaluate<string>(`(async () => {
    const form = document.getElementById('approve-form');
    const res = await fetch(${JSON.stringify(optionsUrl)}, { method: 'POST', body: new URLSearchParams(new FormData(form)) });
    const json = await res.json();
    if (!res.ok) throw new Error(json.message);
    const answer = await window.SimpleWebAuthnBrowser.startAuthentication({ optionsJSON: json.assertion });
    return JSON.stringify(answer);
  })()`);
}

/** The JSON body of the page's next response from `path` (read before the page navigates on). */
async function capture(page: Page, path: string): Promise<{ readonly json: Promise<any> }> {
  let resolve: (json: unknown) => void = () => undefined;
  // why: the tests read a few fields of the WebAuthn options JSON; their shape is the library's.
  const json = new Promise<any>((r) => (resolve = r));
  await page.route(`**${path}`, async (route) => {
    const response = await route.fetch();
    const body: unknown = await response.json();
    resolve(body);
    await route.fulfill({ response, json: body });
  });
  return { json };
}

/** The page's session cookie, as a Cookie header. */
async function cookieOf(page: Page): Promise<string> {
  const [c] = await page.context().cookies();
  return `${c?.name}=${c?.value}`;
}

/** A page POST from this site's origin, sent by the attacker's own HTTP client. */
async function post(
  path: string,
  cookie: string,
  fields: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${p.proxy.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, text: await res.text() };
}

describe('enrolment and sign-in', () => {
  it('adds a passkey on /account: registration requires user verification, the page runs only its own script (screenshot)', async () => {
    const { page, authenticator } = await newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    await signIn(page, 'alice@example.com');
    expect(await page.textContent('#no-passkeys')).toBe('You have no passkey yet.');
    expect(await page.content()).not.toMatch(/<script(?![^>]*\bsrc=)/);
    await page.fill('#passkey-name', 'Work laptop');
    const options = await capture(page, '/account/passkeys/options');
    await submit(page, '#add-passkey');
    const registration = (await options.json).registration;
    expect(registration.authenticatorSelection).toMatchObject({
      userVerification: 'required',
      residentKey: 'preferred',
    });
    expect(registration.rp.id).toBe('localhost');
    expect(await page.textContent('#outcome')).toBe('Passkey "Work laptop" added.');
    expect(await page.textContent('#passkey-list')).toContain('Work laptop');
    const stored = await p.proxy.protocol.store.passkeys('alice@example.com');
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ name: 'Work laptop', transports: ['internal'] });
    expect(problems).toEqual([]);
    await screenshot(page, 'account-passkeys');
    wallets.set('alice@example.com', await credentialsOf(authenticator));
    await page.context().close();
  });

  it('signs in with the passkey alone (usernameless): the new session records auth method passkey', async () => {
    const { page } = await pageWithPasskey('carol@example.com');
    await page.goto(`${origin}/account`);
    await submit(page, 'button:has-text("Sign out")');
    await page.waitForURL(`${origin}/sign-in`);
    await page.goto(`${origin}/sign-in?return=%2Faccount`);
    await page.waitForSelector('#sign-in-passkey', { state: 'visible' });
    await submit(page, '#sign-in-passkey');
    // A 303 to the return address: wait for that page, not just the POST's answer.
    await page.waitForURL(`${origin}/account`);
    expect(await page.textContent('#signed-in-as')).toBe('carol@example.com');
    expect(await sessionOf(page)).toMatchObject({ userId: 'carol@example.com', authMethod: 'passkey' });
    await page.context().close();
  });

  it('refuses a replayed sign-in assertion: each challenge is good once', async () => {
    const { page } = await pageWithPasskey('dave@example.com');
    await page.goto(`${origin}/sign-in`);
    const assertion = await page.evaluate<string>(`(async () => {
      const res = await fetch('/sign-in/passkey/options', { method: 'POST', body: new URLSearchParams() });
      const json = await res.json();
      return JSON.stringify(await window.SimpleWebAuthnBrowser.startAuthentication({ optionsJSON: json.assertion }));
    })()`);
    const first = await post('/sign-in/passkey', '', { assertion, return: '/account' });
    expect(first.status).toBe(303);
    const replayed = await post('/sign-in/passkey', '', { assertion, return: '/account' });
    expect(replayed.status).toBe(400);
    expect(replayed.text).toContain('unknown, was already used, or has expired');
    await page.context().close();
  });

  it('adding a first passkey needs a fresh sign-in: a stale session gets no form and no options', async () => {
    const { page } = await newPage();
    await signIn(page, 'bob@example.com');
    clock.advance(5 * 60_000 + 1);
    await page.goto(`${origin}/account`);
    expect(await page.textContent('#enrol-sign-in')).toContain('sign-in must be recent');
    expect(await page.locator('#add-passkey').count()).toBe(0);
    const csrf = (await page.locator('input[name=csrf]').first().getAttribute('value')) ?? '';
    const options = await post('/account/passkeys/options', await cookieOf(page), { csrf, name: 'x' });
    expect(options.status).toBe(403);
    expect(await p.proxy.protocol.store.passkeys('bob@example.com')).toHaveLength(0);
    await page.context().close();
  });

  it('with first_passkey: operator_code the first passkey takes the code the operator gave (keyboard only)', async () => {
    const coded = await startWith(POLICY, clock, '  first_passkey: operator_code\n');
    try {
      const { page } = await newPage(390, 844);
      await page.goto(`${coded.issuer}/sign-in?return=%2Faccount`);
      await page.fill('#user_id', 'dave@example.com');
      await page.fill('#password', PASSWORD);
      await submit(page, 'form[action="/sign-in"] button[type=submit]');
      const code = page.locator('#enrolment-code');
      expect(await page.locator('label[for="enrolment-code"]').textContent()).toBe(
        'Enrolment code from your administrator',
      );
      expect(await code.getAttribute('autocomplete')).toBe('one-time-code');

      // A code nobody issued: the page says so and no passkey prompt runs.
      await page.focus('#passkey-name');
      await page.keyboard.type('Phone');
      await page.keyboard.press('Tab');
      await page.keyboard.type('ABCD-EFGH-JKMN-PQRS');
      await page.keyboard.press('Enter');
      await expect
        .poll(() => page.textContent('#passkey-status'))
        .toContain('The enrolment code is not right');
      expect(await coded.proxy.protocol.store.passkeys('dave@example.com')).toHaveLength(0);

      const issued = await coded.admin('POST', '/admin/users/dave@example.com/passkeys/enrolment-code', {});
      expect(issued.status).toBe(200);
      await code.fill(String(issued.body.enrolment_code).toLowerCase());
      await submit(page, '#add-passkey');
      expect(await page.textContent('#outcome')).toBe('Passkey "Phone" added.');
      expect(await coded.proxy.protocol.store.passkeys('dave@example.com')).toHaveLength(1);
      expect(await page.locator('#enrolment-code').count()).toBe(0); // the next one confirms with this one
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await page.context().close();
    } finally {
      await coded.close();
    }
  });

  it("an agent cannot add its own passkey next to the user's without confirming with the existing one", async () => {
    const { page } = await newPage();
    await signIn(page, 'alice@example.com');
    expect(await p.proxy.protocol.store.passkeys('alice@example.com')).toHaveLength(1);
    // The agent driving the browser creates a credential in an authenticator of its own and
    // posts it without the confirmation the page would have asked for first.
    const registration = await page.evaluate<string>(`(async () => {
      const form = document.getElementById('add-passkey-form');
      const res = await fetch('/account/passkeys/options', { method: 'POST', body: new URLSearchParams(new FormData(form)) });
      const json = await res.json();
      return JSON.stringify(await window.SimpleWebAuthnBrowser.startRegistration({ optionsJSON: json.registration }));
    })()`);
    const csrf = (await page.locator('#add-passkey-form input[name=csrf]').getAttribute('value')) ?? '';
    const added = await post('/account/passkeys', await cookieOf(page), { csrf, name: '', registration });
    expect(added.status).toBe(403);
    expect(added.text).toContain('needs a confirmation with one you already have');
    expect(await p.proxy.protocol.store.passkeys('alice@example.com')).toHaveLength(1);
    await page.context().close();
  });
});

describe('proof of presence at approval (§8.11)', () => {
  it('unchecking every data-changing capability approves the rest without a passkey prompt', async () => {
    const { code, host, agentId } = await pending(['list_pets', 'create_pet']);
    // alice has a passkey, but this browser's authenticator holds none: a prompt would fail.
    expect(await p.proxy.protocol.store.passkeys('alice@example.com')).not.toHaveLength(0);
    const { page } = await newPage();
    await signIn(page, 'alice@example.com', '/device');
    await openRequest(page, code);
    await page.uncheck('#cap-1');
    const options = await capture(page, '/device/passkey-options');
    await submit(page, '#approve');
    expect(await options.json).toEqual({});
    expect(await page.textContent('#outcome')).toContain(
      'The agent Shelter helper may now use: list_pets. Not approved: create_pet.',
    );
    expect(await agentStatus(host, agentId)).toEqual({ status: 'active', grants: ['list_pets'] });
    await page.context().close();
  });

  it('options without a prompt for a read-only choice cannot then approve a data-changing one (over HTTP)', async () => {
    const { code, host, agentId } = await pending(['list_pets', 'create_pet']);
    const { page } = await newPage();
    await signIn(page, 'alice@example.com', '/device');
    await openRequest(page, code);
    await page.uncheck('#cap-1');
    const fields = await page.evaluate<[string, string][]>(
      "[...new FormData(document.getElementById('approve-form')).entries()]",
    );
    const cookie = await cookieOf(page);
    const readOnly = new URLSearchParams(fields);
    const options = await post('/device/passkey-options', cookie, Object.fromEntries(readOnly));
    expect(options.status).toBe(200);
    expect(JSON.parse(options.text)).toEqual({});
    // The same form with create_pet checked again, and no assertion: refused, nothing granted.
    const widened = new URLSearchParams(fields);
    widened.append('cap', '1');
    const res = await fetch(`${p.proxy.url}/device/approve`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: widened.toString(),
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('A passkey is required to approve this request');
    expect(await agentStatus(host, agentId)).toEqual({ status: 'pending', grants: [] });
    await page.context().close();
  });
  it('clicking Approve on a data-changing request asks for the passkey, then grants (screenshot)', async () => {
    const { code, host, agentId } = await pending(['list_pets', 'create_pet']);
    const { page } = await pageWithPasskey('alice@example.com');
    await openRequest(page, code);
    expect(await page.textContent('#passkey-required')).toContain(
      'A passkey is required to approve create_pet: these can change data or act for you (§8.11).',
    );
    await screenshot(page, 'device-passkey-required');
    const options = await capture(page, '/device/passkey-options');
    await submit(page, '#approve');
    expect((await options.json).assertion.userVerification).toBe('required');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Shelter helper may now use: list_pets, create_pet.',
    );
    expect(await agentStatus(host, agentId)).toEqual({
      status: 'active',
      grants: ['list_pets', 'create_pet'],
    });
    // The verified passkey is a fresh authentication: the session was rotated and says so.
    expect(await sessionOf(page)).toMatchObject({ authMethod: 'passkey' });
    // The decision records who decided and how they authenticated.
    expect(await decisionRecord(agentId, 'approval.approved')).toMatchObject({
      by: 'alice@example.com',
      auth_method: 'passkey',
    });
    await page.context().close();
  });

  it('a data-changing CIBA request opened from the inbox is approved with the passkey too (§7.5, §8.11)', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, {
      name: 'Pet filer',
      capabilities: ['create_pet'],
      login_hint: 'alice@example.com',
      binding_message: 'File the new dog',
    });
    expect(reg.status).toBe(200);
    expect(reg.body.approval.method).toBe('ciba');
    const agentId = reg.body.agent_id as string;
    const approvalId = (await p.pendingApproval(agentId)).id as string;
    const { page } = await pageWithPasskey('alice@example.com');
    await page.goto(`${origin}/approvals`);
    await submit(page, `#request-${approvalId} button`);
    expect(await page.textContent('#passkey-required')).toContain(
      'A passkey is required to approve create_pet',
    );
    const options = await capture(page, '/device/passkey-options');
    await submit(page, '#approve');
    expect((await options.json).assertion.userVerification).toBe('required');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Pet filer may now use: create_pet.',
    );
    expect(await agentStatus(host, agentId)).toEqual({ status: 'active', grants: ['create_pet'] });
    expect(await decisionRecord(agentId, 'approval.approved')).toMatchObject({ auth_method: 'passkey' });
    await page.context().close();
  });

  it('a stale sign-in is made fresh by the passkey itself: no password asked, approval granted', async () => {
    const { code, host, agentId } = await pending(['create_pet']);
    const { page } = await pageWithPasskey('carol@example.com');
    clock.advance(5 * 60_000 + 1);
    await openRequest(page, code);
    expect(await page.locator('#reauth-password').count()).toBe(0);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Approved.');
    expect((await agentStatus(host, agentId)).status).toBe('active');
    await page.context().close();
  });

  it('without a passkey the page says so, and Approve grants nothing', async () => {
    const { code, host, agentId } = await pending(['create_pet']);
    const { page } = await newPage();
    await signIn(page, 'bob@example.com');
    await openRequest(page, code);
    expect(await page.textContent('#passkey-required')).toContain(
      'You have no passkey yet, so this request cannot be approved here',
    );
    expect(await page.getAttribute('#passkey-required a', 'href')).toBe('/account');
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'A passkey is required to approve this request, and you have no passkey yet',
    );
    expect(await page.textContent('#outcome')).toContain('Nothing was granted.');
    expect(await agentStatus(host, agentId)).toEqual({ status: 'pending', grants: [] });
    await page.context().close();
  });

  it('refuses an assertion without user verification (options weakened in the page, isUserVerified false)', async () => {
    const { code, host, agentId } = await pending(['create_pet']);
    const { page, authenticator } = await pageWithPasskey('dave@example.com');
    await openRequest(page, code);
    // An agent controlling the page asks for no verification, and the authenticator does not
    // verify the user: the assertion carries UV = 0 but is otherwise genuine.
    await authenticator.cdp.send('WebAuthn.setUserVerified', {
      authenticatorId: authenticator.id,
      isUserVerified: false,
    });
    await page.route('**/device/passkey-options', async (route) => {
      const response = await route.fetch();
      const json = await response.json();
      json.assertion.userVerification = 'discouraged';
      await route.fulfill({ response, json });
    });
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Your passkey confirmation was not accepted.');
    expect(await page.textContent('#outcome')).toContain('User verification required');
    expect(await page.textContent('#outcome')).toContain('Nothing was granted.');
    expect(await agentStatus(host, agentId)).toEqual({ status: 'pending', grants: [] });
    await page.context().close();
  });

  it('over HTTP: a replayed assertion, one for another approval, a forged one and one for a changed form grant nothing', async () => {
    const first = await pending(['create_pet']);
    const second = await pending(['create_pet']);
    const third = await pending(['create_pet']);
    const { page } = await pageWithPasskey('alice@example.com');

    // The page approves the first request; the attacker has seen the assertion it sent.
    await openRequest(page, first.code);
    const [sent] = await Promise.all([
      page.waitForRequest((r) => r.url().endsWith('/device/approve') && r.method() === 'POST'),
      submit(page, '#approve'),
    ]);
    expect(await page.textContent('#outcome')).toContain('Approved.');
    const used = new URLSearchParams(sent.postData() ?? '').get('assertion') ?? '';
    expect(used).not.toBe('');

    // Replayed on the second request: refused.
    await openRequest(page, second.code);
    const b = await approveForm(page);
    const replay = await post('/device/approve', b.cookie, { ...b.fields, assertion: used });
    expect(replay.status).toBe(403);
    expect(replay.text).toContain('unknown, was already used, or has expired');

    // An assertion issued for the third request, sent with the second's form: refused, and the
    // attempt used it up, so it cannot approve the third afterwards either.
    await openRequest(page, third.code);
    const c = await approveForm(page);
    const forThird = await assertionOnPage(page);
    const misdirected = await post('/device/approve', c.cookie, { ...b.fields, assertion: forThird });
    expect(misdirected.status).toBe(403);
    const retried = await post('/device/approve', c.cookie, { ...c.fields, assertion: forThird });
    expect(retried.status).toBe(403);
    expect(retried.text).toContain('unknown, was already used, or has expired');

    // A fresh assertion with one bit of its signature flipped: refused.
    await openRequest(page, second.code);
    const d = await approveForm(page);
    const genuine = JSON.parse(await assertionOnPage(page));
    const signature = Buffer.from(genuine.response.signature, 'base64url');
    signature[signature.length - 1] = (signature[signature.length - 1] ?? 0) ^ 1;
    genuine.response.signature = signature.toString('base64url');
    const forged = await post('/device/approve', d.cookie, {
      ...d.fields,
      assertion: JSON.stringify(genuine),
    });
    expect(forged.status).toBe(403);
    expect(forged.text).toContain('Your passkey confirmation was not accepted.');

    // A genuine assertion for the form as shown, posted with a field added afterwards: refused.
    await openRequest(page, second.code);
    const e = await approveForm(page);
    const forE = await assertionOnPage(page);
    const changed = await post('/device/approve', e.cookie, {
      ...e.fields,
      expires_in: '365d',
      assertion: forE,
    });
    expect(changed.status).toBe(403);

    expect((await agentStatus(first.host, first.agentId)).status).toBe('active');
    expect(await agentStatus(second.host, second.agentId)).toEqual({ status: 'pending', grants: [] });
    expect(await agentStatus(third.host, third.agentId)).toEqual({ status: 'pending', grants: [] });
    await page.context().close();
  });

  it("refuses another user's assertion, and a sign-in assertion offered as an approval's", async () => {
    const target = await pending(['create_pet']);
    const carol = await pageWithPasskey('carol@example.com');
    await openRequest(carol.page, target.code);
    const carols = await assertionOnPage(carol.page);
    // Carol's genuine assertion, posted with Alice's session and Alice's form for the same request.
    const alice = await newPage();
    await signIn(alice.page, 'alice@example.com');
    await openRequest(alice.page, target.code);
    const a = await approveForm(alice.page);
    const foreign = await post('/device/approve', a.cookie, { ...a.fields, assertion: carols });
    expect(foreign.status).toBe(403);
    // A sign-in ceremony's assertion is no approval's, even from the right person and session.
    const c = await approveForm(carol.page);
    const signInAssertion = await assertionOnPage(carol.page, '/sign-in/passkey/options');
    const wrongPurpose = await post('/device/approve', c.cookie, { ...c.fields, assertion: signInAssertion });
    expect(wrongPurpose.status).toBe(403);
    expect(await agentStatus(target.host, target.agentId)).toEqual({ status: 'pending', grants: [] });
    await alice.page.context().close();
    await carol.page.context().close();
  });
});

describe('removing a passkey', () => {
  it('needs the CSRF token and a confirmation with a passkey; the page does both', async () => {
    const { page } = await pageWithPasskey('erin@example.com');
    await page.goto(`${origin}/account`);
    const id = (await p.proxy.protocol.store.passkeys('erin@example.com'))[0]?.id ?? '';
    const cookie = await cookieOf(page);
    const csrf = (await page.locator('input[name=csrf]').first().getAttribute('value')) ?? '';
    // Without the CSRF token, or with a wrong one: refused before anything is looked at.
    expect((await post('/account/passkeys/remove', cookie, { id })).status).toBe(403);
    expect((await post('/account/passkeys/remove', cookie, { id, csrf: 'A'.repeat(43) })).status).toBe(403);
    // With the token but without a passkey's confirmation: refused too.
    expect((await post('/account/passkeys/remove', cookie, { id, csrf })).status).toBe(403);
    expect(await p.proxy.protocol.store.passkeys('erin@example.com')).toHaveLength(1);
    // Through the page: Remove asks for the passkey, then removes it.
    await submit(page, '#passkey-list button:has-text("Remove")');
    expect(await page.textContent('#outcome')).toBe('Passkey "This browser" removed.');
    expect(await p.proxy.protocol.store.passkeys('erin@example.com')).toHaveLength(0);
    expect(await page.textContent('#no-passkeys')).toBe('You have no passkey yet.');
    await page.context().close();
  });
});

describe('policy approval.require_presence: always', () => {
  it('asks for a passkey even for a read-only request, and grants nothing without one (over HTTP)', async () => {
    const strict = await startWith(
      POLICY.replace('approval:\n', 'approval:\n  require_presence: always\n'),
      new TestClock(),
    );
    try {
      const host = await generateTestKey();
      const reg = await strict.register(host, { name: 'Reader', capabilities: ['list_pets'] });
      const code = reg.body.approval.user_code as string;
      const form = (fields: Record<string, string>, cookie = ''): RequestInit => ({
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, origin: strict.issuer, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
      const signedIn = await fetch(
        `${strict.proxy.url}/sign-in`,
        form({ user_id: 'bob@example.com', password: PASSWORD, return: '/device' }),
      );
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      const device = await (await fetch(`${strict.proxy.url}/device`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(device)?.[1] ?? '';
      const html = await (await fetch(`${strict.proxy.url}/device`, form({ csrf, code }, cookie))).text();
      expect(html).toContain(
        'A passkey is required to approve list_pets: this server asks for one for every approval',
      );
      const shown = /name="shown" value="([^"]+)"/.exec(html)?.[1] ?? '';
      const approve = await fetch(`${strict.proxy.url}/device/approve`, form({ csrf, code, shown }, cookie));
      expect(approve.status).toBe(403);
      expect(await approve.text()).toContain('Nothing was granted.');
      expect((await strict.status(host, reg.body.agent_id as string)).body.status).toBe('pending');
    } finally {
      await strict.close();
    }
  });
});
