/**
 * The approval pages (issue 11) in headless Chromium over real HTTP: local sign-in, the device
 * code confirmed and decided, fresh authentication (§8.11) with the TestClock, the passkey rule
 * for data-changing requests (§8.11), and the attacks: wrong passwords, CSRF, foreign origins, a
 * forged trusted header. Screenshots of the pages go to docs/screenshots/.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, openPage, submitForm as submit, screenshot } from '../../helpers/browser.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { localhostConfig, localSignIn, PASSWORD } from '../../helpers/local-sign-in.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';

const POLICY =
  'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n  approval_requests_per_user: 5/1m\n';

let p: TestProtocol;
let clock: TestClock;
let browser: Browser;
let origin = '';

async function startWith(signIn: string, c = new TestClock()): Promise<TestProtocol> {
  return startProtocol({ policy: POLICY, clock: c, overrides: await localhostConfig(signIn) });
}

beforeAll(async () => {
  const signIn = await localSignIn(['alice@example.com', 'bob@example.com'], '  fresh_auth: 5m\n');
  clock = new TestClock();
  p = await startWith(signIn, clock);
  origin = p.issuer;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
});

const newPage = (width = 1280, height = 800): Promise<Page> => openPage(browser, width, height);

async function signIn(page: Page, user = 'alice@example.com', password = PASSWORD): Promise<void> {
  await page.fill('#user_id', user);
  await page.fill('#password', password);
  await submit(page, 'button[type=submit]');
}

/** A delegated agent registration waiting for approval; its user code. */
async function pending(
  capabilities: string[],
  name = 'Shelter helper',
): Promise<{ code: string; host: TestKey; agent: TestKey; agentId: string }> {
  const host = await generateTestKey();
  const reg = await p.register(host, {
    name,
    host_name: 'Alice laptop',
    capabilities,
    reason: 'Keep the shelter list current',
  });
  expect(reg.status).toBe(200);
  return {
    code: reg.body.approval.user_code as string,
    host,
    agent: reg.agent,
    agentId: reg.body.agent_id as string,
  };
}

/** Signs in through the device page's link and opens the request for `code` (pre-filled, confirmed). */
async function openRequest(page: Page, code: string, user = 'alice@example.com'): Promise<void> {
  await page.goto(`${origin}/device?code=${code}`);
  await Promise.all([page.waitForURL(/\/sign-in/), page.click('#sign-in-link')]);
  await signIn(page, user);
  await page.waitForURL(/\/device\?code=/);
  expect(await page.textContent('#confirm-code')).toContain('Check that this code');
  expect(await page.inputValue('#code')).toBe(code);
  await submit(page, 'button:has-text("Continue")');
  expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
}

describe('sign-in', () => {
  it('local sign-in with the right password lands on the device page, signed in (screenshots)', async () => {
    for (const [width, height, name] of [
      [1280, 800, 'desktop'],
      [390, 844, 'phone'],
    ] as const) {
      const page = await newPage(width, height);
      await page.goto(`${origin}/sign-in`);
      for (const id of ['user_id', 'password', 'totp'])
        expect(await page.locator(`label[for=${id}]`).count()).toBe(1);
      await screenshot(page, `sign-in-${name}`);
      await signIn(page);
      expect(page.url()).toBe(`${origin}/device`);
      expect(await page.textContent('#signed-in-as')).toBe('alice@example.com');
      const [cookie] = await page.context().cookies();
      expect(cookie).toMatchObject({ name: 'aap_session', httpOnly: true, sameSite: 'Lax', path: '/' });
      // No horizontal scrolling on a phone.
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
      await page.context().close();
    }
  });

  it('a wrong password gets a clear message, and the account is throttled after 5 failures', async () => {
    const page = await newPage();
    await page.goto(`${origin}/sign-in`);
    for (let i = 0; i < 5; i++) {
      await signIn(page, 'bob@example.com', `wrong ${i}`);
      expect(await page.textContent('#outcome')).toBe(
        'That user name, password or one-time code is not right.',
      );
    }
    await signIn(page, 'bob@example.com', PASSWORD);
    expect(await page.textContent('#outcome')).toContain('Too many failed sign-ins');
    expect(page.url()).toBe(`${origin}/sign-in`);
    await page.context().close();
  });
});

describe('deciding on the device page', () => {
  it('approves a read-only request after confirming the pre-filled code: the agent becomes active', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    let shown = '';
    for (const [width, height, name] of [
      [1280, 800, 'desktop'],
      [390, 844, 'phone'],
    ] as const) {
      const page = await newPage(width, height);
      await openRequest(page, code);
      await screenshot(page, `device-request-${name}`);
      if (name === 'phone') {
        shown = (await page.getAttribute('#approve-form input[name=shown]', 'value')) ?? '';
        await submit(page, '#approve');
        expect(await page.textContent('#outcome')).toContain(
          'Approved. The agent Shelter helper may now use: list_pets.',
        );
      }
      await page.context().close();
    }
    const status = await p.status(host, agentId);
    expect(status.body.status).toBe('active');
    // The decision records who decided, how they authenticated, from where, and what they saw
    // (issue 16 §2): the content hash the approve form carried.
    const decided = (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find(
      (r) => r.type === 'approval.approved',
    );
    expect(shown).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(decided?.detail).toMatchObject({
      by: 'alice@example.com',
      auth_method: 'password',
      client_ip: '127.0.0.1',
      content_hash: shown,
    });
    expect(decided?.detail?.user_agent).toMatch(/HeadlessChrome/);
  });

  it('the agent listening on notification_url hears the decision made on the page: one approval event (§10.10.2)', async () => {
    const host = await generateTestKey();
    const reg = await p.register(host, { name: 'Listening helper', capabilities: ['list_pets'] });
    expect(reg.status).toBe(200);
    const res = await fetch(reg.body.approval.notification_url as string, {
      headers: { authorization: `Bearer ${await p.hostToken(host)}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const page = await newPage();
    await openRequest(page, reg.body.approval.user_code as string);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Approved.');
    await page.context().close();
    // The stream sends its one event and ends.
    const events = (await res.text()).split('\n\n').filter((b) => b.startsWith('event: approval'));
    expect(events).toHaveLength(1);
    const data = JSON.parse(
      (events[0] ?? '')
        .split('\n')
        .find((l) => l.startsWith('data: '))
        ?.slice(6) ?? '{}',
    );
    expect(data).toMatchObject({ status: 'approved', agent_id: reg.body.agent_id });
  });

  it("shows the host's key thumbprint (short form), when and from where it registered (RFC 8628 §5.4)", async () => {
    // The host registers with a user agent of its choosing: markup and control characters in it
    // are stripped or escaped, and it is capped.
    const host = await generateTestKey();
    const agentKey = await generateTestKey();
    const reg = await p.request('POST', '/agent/register', {
      token: await p.hostToken(host, { agent_public_key: agentKey.publicJwk }),
      body: { name: 'Shelter helper', capabilities: ['list_pets'] },
      headers: { 'user-agent': `ShelterBot/2.1 <b>bold</b>\t${'x'.repeat(400)}` },
    });
    expect(reg.status).toBe(200);
    const page = await newPage();
    await openRequest(page, reg.body.approval.user_code as string);
    expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
    const shown = (await page.textContent('#host-key')) ?? '';
    const groups = host.thumbprint.slice(0, 16).match(/.{4}/g) ?? [];
    expect(shown).toContain(`${groups.join(' ')}…`);
    expect(shown).toMatch(/first seen \d{4}-\d{2}-\d{2}T/);
    const origin = (await page.textContent('#host-origin')) ?? '';
    expect(origin).toMatch(
      /^registered \d{4}-\d{2}-\d{2}T\S+ from 127\.0\.0\.1 \(ShelterBot\/2\.1 <b>bold<\/b> x+…\)$/,
    );
    expect(origin.length).toBeLessThan(360);
    expect(await page.locator('#host-origin b').count()).toBe(0);
    await page.context().close();
  });

  it('denies with a reason: the agent is rejected (§7.1)', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    const page = await newPage();
    await openRequest(page, code);
    await page.fill('#deny-reason', 'Not this week');
    await submit(page, '#deny');
    expect(await page.textContent('#outcome')).toContain('Denied.');
    const status = await p.status(host, agentId);
    expect(status.body.status).toBe('rejected');
    const decided = (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find(
      (r) => r.type === 'approval.denied',
    );
    expect(decided?.detail).toMatchObject({
      by: 'alice@example.com',
      auth_method: 'password',
      reason: 'Not this week',
    });
    await page.context().close();
  });

  it('refuses to approve a data-changing request without a passkey, and grants nothing', async () => {
    const { code, host, agentId } = await pending(['list_pets', 'create_pet']);
    const page = await newPage();
    await openRequest(page, code);
    expect(await page.textContent('#passkey-required')).toContain(
      'A passkey is required to approve create_pet',
    );
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('A passkey is required');
    expect(await page.textContent('#outcome')).toContain('Nothing was granted.');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await page.context().close();
  });

  it('asks for the password again when the sign-in is older than fresh_auth, before approving', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    const page = await newPage();
    await openRequest(page, code);
    clock.advance(5 * 60_000 + 1);
    // Reopen the request: the approve form now asks for the password.
    await page.goto(`${origin}/device?code=${code}`);
    await submit(page, 'button:has-text("Continue")');
    expect(await page.textContent('#fresh-auth')).toContain('enter your password again');
    await page.fill('#reauth-password', 'not my password');
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Nothing was granted.');
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    await page.fill('#reauth-password', PASSWORD);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('Approved.');
    expect((await p.status(host, agentId)).body.status).toBe('active');
    await page.context().close();
  });
});

describe('attacks on the forms', () => {
  /** A signed-in session's cookie and the hidden fields of the approve form for `code`. */
  async function formFields(
    code: string,
    user = 'alice@example.com',
  ): Promise<{ cookie: string; fields: Record<string, string> }> {
    const page = await newPage();
    await openRequest(page, code, user);
    const fields: Record<string, string> = {};
    for (const input of await page.locator('#approve-form input[type=hidden]').all()) {
      fields[(await input.getAttribute('name')) ?? ''] = (await input.getAttribute('value')) ?? '';
    }
    const [c] = await page.context().cookies();
    await page.context().close();
    return { cookie: `${c?.name}=${c?.value}`, fields };
  }

  async function post(
    path: string,
    cookie: string,
    fields: Record<string, string>,
    from = origin,
  ): Promise<number> {
    const res = await fetch(`${p.proxy.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: from, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    await res.text();
    return res.status;
  }

  it('an approve POST without the CSRF token, with a wrong one, or from a foreign Origin changes nothing', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    const { cookie, fields } = await formFields(code);
    const { csrf: _csrf, ...noToken } = fields;
    expect(await post('/device/approve', cookie, noToken)).toBe(403);
    expect(await post('/device/approve', cookie, { ...fields, csrf: 'A'.repeat(43) })).toBe(403);
    expect(await post('/device/approve', cookie, fields, 'http://evil.example')).toBe(403);
    expect(await post('/device/deny', cookie, fields, 'null')).toBe(403);
    expect((await p.status(host, agentId)).body.status).toBe('pending');
    // The same form, untouched and from the right origin, does work: the refusals were the attacks'.
    expect(await post('/device/approve', cookie, fields)).toBe(200);
    expect((await p.status(host, agentId)).body.status).toBe('active');
  });

  it('a decision on a request that changed since it was shown is refused and the request shown again', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    const { cookie, fields } = await formFields(code);
    expect(await post('/device/approve', cookie, { ...fields, shown: 'x'.repeat(43) })).toBe(409);
    expect((await p.status(host, agentId)).body.status).toBe('pending');
  });

  it('an agent of a host linked to alice: bob sees why he cannot decide, his hand-made approve and deny are refused (§2.9), alice can', async () => {
    const { key: host } = await p.linkedHost('alice@example.com');
    const reg = await p.register(host, { name: 'Alice helper', capabilities: ['list_pets'] });
    expect(reg.status).toBe(200);
    const code = reg.body.approval.user_code as string;
    const agentId = reg.body.agent_id as string;

    const bobPage = await newPage();
    await openRequest(bobPage, code, 'bob@example.com');
    expect(await bobPage.textContent('#cannot-decide')).toContain('This agent acts for another user');
    expect(await bobPage.locator('#approve-form, #deny-form').count()).toBe(0);
    const bobCsrf = (await bobPage.locator('input[name=csrf]').first().getAttribute('value')) ?? '';
    const [c] = await bobPage.context().cookies();
    await bobPage.context().close();
    const bobCookie = `${c?.name}=${c?.value}`;

    const alice = await formFields(code);
    const asBob = { ...alice.fields, csrf: bobCsrf };
    const grantOf = async (): Promise<unknown> =>
      (await p.status(host, agentId)).body.agent_capability_grants.find(
        (g: { capability: string }) => g.capability === 'list_pets',
      )?.status;
    // A linked host's agent starts active (§2.9); what waits for alice is its grant.
    expect(await grantOf()).toBe('pending');
    expect(await post('/device/approve', bobCookie, asBob)).toBe(403);
    expect(await post('/device/deny', bobCookie, asBob)).toBe(403);
    expect(await grantOf()).toBe('pending');
    expect(await post('/device/approve', alice.cookie, alice.fields)).toBe(200);
    expect(await grantOf()).toBe('active');
  });

  it('constraints changed by a re-request while the page is open: Approve is refused by the content hash, the new request shown (§2.13, §7.2)', async () => {
    // An agent of a host linked to alice asks for create_pet limited to cats.
    const { agent, agentId } = await pending(['list_pets']);
    const approval = await p.pendingApproval(agentId);
    const linked = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
      user_id: 'alice@example.com',
    });
    expect(linked.status).toBe(200);
    const ask = async (species: string) =>
      p.request('POST', '/agent/request-capability', {
        token: await p.agentToken(agent, agentId),
        body: { capabilities: [{ name: 'create_pet', constraints: { species } }] },
      });
    const cats = await ask('cat');
    expect(cats.status).toBe(200);
    const page = await newPage();
    await openRequest(page, cats.body.approval.user_code as string);
    expect(await page.textContent('#request')).toContain('cat');
    // Between showing and approving, the agent asks again with other terms (same code).
    const dogs = await ask('dog');
    expect(dogs.body.approval.user_code).toBe(cats.body.approval.user_code);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain('This request changed since you saw it.');
    const request = (await page.textContent('#request')) ?? '';
    expect(request).toContain('dog');
    expect(request).not.toContain('cat');
    const grant = (await p.proxy.protocol.store.grants(agentId)).find((g) => g.capability === 'create_pet');
    expect(grant?.status).toBe('pending');
    await page.context().close();
  });

  it('a repeated request leaves the open page valid; past 5 new requests a minute for alice the agent gets 429 and the page keeps the last one (issue 16 §3)', async () => {
    clock.advance(60_000); // a fresh per-user window, whatever earlier tests asked alice
    const { agent, agentId } = await pending(['list_pets']);
    const approval = await p.pendingApproval(agentId);
    await p.admin('POST', `/admin/approvals/${approval.id}/approve`, { user_id: 'alice@example.com' });
    const ask = async (capabilities: unknown) =>
      p.request('POST', '/agent/request-capability', {
        token: await p.agentToken(agent, agentId),
        body: { capabilities },
      });
    const first = await ask(['get_pet']);
    const page = await newPage();
    await openRequest(page, first.body.approval.user_code as string);
    for (let i = 0; i < 3; i++) {
      const again = await ask(['get_pet']);
      expect(again.body.approval).toEqual(first.body.approval);
    }
    // The repeats changed nothing: the page's form still matches and approves.
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Shelter helper may now use: get_pet.',
    );

    // Four more new requests are accepted (5 in the minute), the sixth is refused.
    let last: Awaited<ReturnType<typeof ask>> | undefined;
    for (let max = 1; max <= 4; max++) {
      last = await ask([
        { name: 'create_pet', constraints: { species: ['dog', 'cat', 'bird', 'fish'][max - 1] } },
      ]);
      expect(last.status).toBe(200);
    }
    const refused = await ask([{ name: 'delete_pet' }]);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await p.proxy.protocol.store.grants(agentId)).map((g) => g.capability)).not.toContain(
      'delete_pet',
    );
    await page.goto(`${origin}/device?code=${last?.body.approval.user_code as string}`);
    await submit(page, 'button:has-text("Continue")');
    const request = (await page.textContent('#request')) ?? '';
    expect(request).toContain('fish');
    expect(request).not.toContain('delete_pet');
    await page.context().close();
  });

  it('no session: an approve POST is refused and nothing changes', async () => {
    const { code, host, agentId } = await pending(['list_pets']);
    const { fields } = await formFields(code);
    expect(await post('/device/approve', 'aap_session=forged', fields)).toBe(403);
    expect((await p.status(host, agentId)).body.status).toBe('pending');
  });
});

describe('trusted header', () => {
  async function signInWithHeader(
    t: TestProtocol,
    user = 'carol@example.com',
    cookie?: string,
  ): Promise<{ status: number; cookie: string | null }> {
    const res = await fetch(`${t.proxy.url}/sign-in?return=/device`, {
      redirect: 'manual',
      headers: { 'x-forwarded-email': user, ...(cookie ? { cookie } : {}) },
    });
    await res.text();
    return { status: res.status, cookie: res.headers.get('set-cookie') };
  }

  /** The device page as a browser with `cookie` behind the authenticating proxy sees it. */
  async function devicePage(t: TestProtocol, cookie: string, user?: string) {
    const res = await fetch(`${t.proxy.url}/device`, {
      redirect: 'manual',
      headers: { cookie, ...(user ? { 'x-forwarded-email': user } : {}) },
    });
    return { status: res.status, html: await res.text() };
  }

  it('signs in without a form when the peer is trusted (127.0.0.1 here)', async () => {
    const t = await startWith(
      'sign_in:\n  trusted_header:\n    name: X-Forwarded-Email\n    from: [127.0.0.1/32]\n',
    );
    try {
      const signed = await signInWithHeader(t);
      expect(signed.status).toBe(303);
      expect(signed.cookie).toMatch(/^aap_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax/);
      const page = await devicePage(t, (signed.cookie ?? '').split(';')[0] ?? '', 'carol@example.com');
      expect(page.html).toContain('carol@example.com');
    } finally {
      await t.close();
    }
  });

  it('a session is not used once the header names someone else, or no one (a shared browser)', async () => {
    const t = await startWith(
      'sign_in:\n  trusted_header:\n    name: X-Forwarded-Email\n    from: [127.0.0.1/32]\n',
    );
    try {
      const carol = ((await signInWithHeader(t)).cookie ?? '').split(';')[0] ?? '';
      expect((await devicePage(t, carol, 'carol@example.com')).html).toContain('carol@example.com');
      // Carol signed out at the proxy in front; Dave signed in there on the same browser.
      for (const user of ['dave@example.com', undefined]) {
        const seen = await devicePage(t, carol, user);
        expect(seen.status).toBe(200);
        expect(seen.html).not.toContain('carol@example.com');
        expect(seen.html).toContain('id="sign-in-link"');
      }
      // Following the page's sign-in link signs Dave in with a new session; Carol's ends.
      const dave = await signInWithHeader(t, 'dave@example.com', carol);
      expect(dave.status).toBe(303);
      const daveCookie = (dave.cookie ?? '').split(';')[0] ?? '';
      expect(daveCookie).not.toBe(carol);
      expect((await devicePage(t, daveCookie, 'dave@example.com')).html).toContain('dave@example.com');
      expect((await devicePage(t, carol, 'carol@example.com')).html).toContain('id="sign-in-link"');
    } finally {
      await t.close();
    }
  });

  it('ignores the header from any other peer: no session, no sign-in', async () => {
    const t = await startWith(
      'sign_in:\n  trusted_header:\n    name: X-Forwarded-Email\n    from: [10.0.0.0/8]\n',
    );
    try {
      const signed = await signInWithHeader(t);
      expect(signed.status).toBe(200);
      expect(signed.cookie).toBeNull();
    } finally {
      await t.close();
    }
  });
});
