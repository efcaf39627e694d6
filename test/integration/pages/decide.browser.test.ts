/**
 * What the approver sees and decides (issue 11), in headless Chromium over real HTTP against a
 * real recording upstream: partial approval, narrowing that only tightens (§2.13), a grant
 * expiry (§3.3), the §8.10 warnings (mixed scripts, brand lookalikes, markup, broad requests),
 * and the inbox at /approvals with CIBA requests (§7.5) that only their addressee can see or
 * decide. The attacks: widening by editing the page's HTML or by a hand-made POST, and another
 * user's POSTs against a CIBA request. Screenshots go to docs/screenshots/.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INBOX_PAGE_SIZE } from '../../../src/protocol/inbox.js';
import { launchChromium, openPage, submitForm as submit, screenshot } from '../../helpers/browser.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { localhostConfig, localSignIn, PASSWORD } from '../../helpers/local-sign-in.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { TestUpstream } from '../../helpers/upstream.js';

const ALICE = 'alice@example.com';
const BOB = 'bob@example.com';
/** An approver of her own, so her inbox holds only what the paging test puts there. */
const CAROL = 'carol@example.com';
// CIBA to listed approvers (§7.5); agents idle for a day stay active, so a grant's own expiry
// can be seen running out before the agent's.
const POLICY = `capabilities:
  public: ["*"]
approval:
  methods: [device_authorization, ciba]
  approvers: [${ALICE}, ${BOB}, ${CAROL}]
lifetimes:
  session_ttl: 1d
  max_lifetime: 7d
  absolute_lifetime: 30d
rate_limits:
  unknown_host_registration: null
`;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let p: TestProtocol;
let upstream: TestUpstream;
let clock: TestClock;
let browser: Browser;
let origin = '';

beforeAll(async () => {
  const signIn = await localSignIn([ALICE, BOB, CAROL], '  fresh_auth: 5m\n');
  upstream = await TestUpstream.start();
  clock = new TestClock();
  p = await startProtocol({
    policy: POLICY,
    clock,
    overrides: await localhostConfig(signIn, `${upstream.url}/v1`),
  });
  origin = p.issuer;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
  await upstream?.close();
});

const newPage = (width = 1280, height = 800): Promise<Page> => openPage(browser, width, height);

async function signIn(page: Page, back: string, user = ALICE): Promise<void> {
  await page.goto(`${origin}/sign-in?return=${encodeURIComponent(back)}`);
  await page.fill('#user_id', user);
  await page.fill('#password', PASSWORD);
  await submit(page, 'button[type=submit]');
}

interface Pending {
  readonly host: TestKey;
  readonly agent: TestKey;
  readonly agentId: string;
  readonly code: string;
}

/** A delegated registration waiting for a human; `extra` adds to the register body. */
async function pending(
  capabilities: unknown[],
  extra: Record<string, unknown> = {},
): Promise<Pending & { approval: Record<string, unknown> }> {
  const host = await generateTestKey();
  const reg = await p.register(host, {
    name: 'Shelter helper',
    host_name: 'Alice laptop',
    capabilities,
    reason: 'Keep the shelter list current',
    ...extra,
  });
  expect(reg.status).toBe(200);
  return {
    host,
    agent: reg.agent,
    agentId: reg.body.agent_id as string,
    code: (reg.body.approval.user_code as string | undefined) ?? '',
    approval: reg.body.approval as Record<string, unknown>,
  };
}

/** Signs in as `user` and opens the device request behind `code` (confirmed, then shown). */
async function openRequest(page: Page, code: string, user = ALICE): Promise<void> {
  await signIn(page, `/device?code=${code}`, user);
  expect(await page.inputValue('#code')).toBe(code);
  await submit(page, 'button:has-text("Continue")');
  expect(await page.textContent('#request')).toContain('You are authorizing an AI agent.');
}

/** The agent's grants by capability, from the §5.5 status endpoint. */
async function grants(r: Pending): Promise<Record<string, any>> {
  const status = await p.status(r.host, r.agentId);
  expect(status.status).toBe(200);
  return Object.fromEntries(
    (status.body.agent_capability_grants as any[]).map((g) => [g.capability as string, g]),
  );
}

const LIST_PETS = {
  name: 'list_pets',
  constraints: { limit: { min: 1, max: 10 }, status: { in: ['available', 'pending', 'sold'] } },
};

describe('the inbox at /approvals', () => {
  /** A CIBA registration addressed to `user` (§7.5) and its approval id (operator API). */
  async function ciba(user: string, name = 'Expense reporter'): Promise<Pending & { approvalId: string }> {
    const r = await pending(['list_pets', 'get_inventory'], {
      name,
      login_hint: user,
      binding_message: 'Confirm code 4471',
    });
    expect(r.approval.method).toBe('ciba');
    const approval = await p.pendingApproval(r.agentId);
    return { ...r, approvalId: approval.id as string };
  }

  it('lists a CIBA request for alice and not for bob; a device request alice opened joins her inbox (screenshot)', async () => {
    const forAlice = await ciba(ALICE);
    const opened = await pending(['get_pet'], { name: 'Vet scheduler' });
    const alice = await newPage();
    await openRequest(alice, opened.code);
    await alice.goto(`${origin}/approvals`);
    const cards = await alice.locator('#inbox li.card').allTextContents();
    expect(cards.some((c) => c.includes('Expense reporter') && c.includes('Sent to you'))).toBe(true);
    expect(cards.some((c) => c.includes('Vet scheduler') && c.includes(`code ${opened.code}`))).toBe(true);
    expect(await alice.locator(`#request-${forAlice.approvalId}`).count()).toBe(1);
    await screenshot(alice, 'approvals-inbox');

    const bob = await newPage();
    await signIn(bob, '/approvals', BOB);
    expect(bob.url()).toBe(`${origin}/approvals`);
    expect(await bob.textContent('#signed-in-as')).toBe(BOB);
    expect(await bob.locator(`#request-${forAlice.approvalId}`).count()).toBe(0);
    expect(await bob.textContent('body')).not.toContain('Expense reporter');
    expect(await bob.textContent('body')).not.toContain('Vet scheduler');
    await alice.context().close();
    await bob.context().close();
  });

  it('alice decides a CIBA request from her inbox with the same forms: partial approval, the agent becomes active', async () => {
    const r = await ciba(ALICE, 'Inbox agent');
    const page = await newPage();
    await signIn(page, '/approvals');
    await submit(page, `#request-${r.approvalId} button`);
    expect(await page.textContent('#request-title')).toBe('Request sent to you');
    expect(await page.textContent('#binding-message')).toBe('Confirm code 4471');
    await page.uncheck('#cap-1');
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Inbox agent may now use: list_pets. Not approved: get_inventory.',
    );
    const g = await grants(r);
    expect(g.list_pets.status).toBe('active');
    expect(g.get_inventory.status).toBe('denied');
    expect((await p.status(r.host, r.agentId)).body.user_id).toBe(ALICE);
    // Decided: it leaves the inbox.
    await page.goto(`${origin}/approvals`);
    expect(await page.locator(`#request-${r.approvalId}`).count()).toBe(0);
    await page.context().close();
  });

  it('alice denies a CIBA request from her inbox with a reason', async () => {
    const r = await ciba(ALICE, 'Unwanted agent');
    const page = await newPage();
    await signIn(page, '/approvals');
    await submit(page, `#request-${r.approvalId} button`);
    await page.fill('#deny-reason', 'Not mine');
    await submit(page, '#deny');
    expect(await page.textContent('#outcome')).toContain('Denied.');
    expect((await p.status(r.host, r.agentId)).body.status).toBe('rejected');
    await page.context().close();
  });

  describe('another user’s CIBA request', () => {
    /** Alice's approve form for `r` as hidden fields, and bob's signed-in cookie and CSRF token. */
    async function setUp(r: { approvalId: string }): Promise<{
      aliceFields: Record<string, string>;
      bob: { cookie: string; csrf: string };
    }> {
      const alice = await newPage();
      await signIn(alice, '/approvals');
      await submit(alice, `#request-${r.approvalId} button`);
      const aliceFields: Record<string, string> = {};
      for (const input of await alice.locator('#approve-form input[type=hidden]').all()) {
        aliceFields[(await input.getAttribute('name')) ?? ''] = (await input.getAttribute('value')) ?? '';
      }
      await alice.context().close();
      const bobPage = await newPage();
      await signIn(bobPage, '/device', BOB);
      const csrf = (await bobPage.locator('input[name=csrf]').first().getAttribute('value')) ?? '';
      const [c] = await bobPage.context().cookies();
      await bobPage.context().close();
      return { aliceFields, bob: { cookie: `${c?.name}=${c?.value}`, csrf } };
    }

    async function post(
      path: string,
      cookie: string,
      fields: Record<string, string>,
    ): Promise<{ status: number; html: string }> {
      const res = await fetch(`${p.proxy.url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
      return { status: res.status, html: await res.text() };
    }

    it('bob cannot open, approve or deny alice’s CIBA request, even with her form’s fields: 404, nothing changes', async () => {
      const r = await ciba(ALICE, 'Alice only');
      const { aliceFields, bob } = await setUp(r);
      const asBob: Record<string, string> = { ...aliceFields, csrf: bob.csrf };
      const opened = await post('/device', bob.cookie, { csrf: bob.csrf, approval: r.approvalId });
      expect(opened.status).toBe(404);
      expect(opened.html).not.toContain('Alice only');
      expect((await post('/device/approve', bob.cookie, asBob)).status).toBe(404);
      expect((await post('/device/deny', bob.cookie, asBob)).status).toBe(404);
      // Nor by the request's user code, which CIBA never hands out: it is not a device request.
      const approval = await p.admin('GET', `/admin/approvals?agent_id=${r.agentId}`);
      const code = approval.body.approvals.at(-1).user_code as string;
      expect((await post('/device', bob.cookie, { csrf: bob.csrf, code })).status).toBe(404);
      const { approval: _id, ...byCode } = asBob;
      expect((await post('/device/approve', bob.cookie, { ...byCode, code })).status).toBe(404);
      expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
      expect((await p.pendingApproval(r.agentId))?.id).toBe(r.approvalId);
    });

    it('alice’s own CIBA decision still needs her CSRF token, the site’s Origin and the shown hash', async () => {
      const r = await ciba(ALICE, 'Checked agent');
      const alice = await newPage();
      await signIn(alice, '/approvals');
      await submit(alice, `#request-${r.approvalId} button`);
      const fields: Record<string, string> = {};
      for (const input of await alice.locator('#approve-form input[type=hidden]').all()) {
        fields[(await input.getAttribute('name')) ?? ''] = (await input.getAttribute('value')) ?? '';
      }
      const [c] = await alice.context().cookies();
      const cookie = `${c?.name}=${c?.value}`;
      const { csrf: _csrf, ...noToken } = fields;
      expect((await post('/device/approve', cookie, noToken)).status).toBe(403);
      const foreign = await fetch(`${p.proxy.url}/device/approve`, {
        method: 'POST',
        headers: {
          cookie,
          origin: 'http://evil.example',
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams(fields).toString(),
      });
      expect(foreign.status).toBe(403);
      expect((await post('/device/approve', cookie, { ...fields, shown: 'x'.repeat(43) })).status).toBe(409);
      expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
      // A stale sign-in (§8.11): the approve form asks for the password before anything is granted.
      clock.advance(5 * 60_000 + 1);
      await alice.goto(`${origin}/approvals`);
      await submit(alice, `#request-${r.approvalId} button`);
      expect(await alice.textContent('#fresh-auth')).toContain('enter your password again');
      await alice.fill('#reauth-password', PASSWORD);
      await submit(alice, '#approve');
      expect(await alice.textContent('#outcome')).toContain('Approved.');
      expect((await p.status(r.host, r.agentId)).body.status).toBe('active');
      await alice.context().close();
    });
  });

  it('lists at most 20 requests a page, newest first, with a link to the older ones', async () => {
    const ids: string[] = [];
    for (let i = 0; i < INBOX_PAGE_SIZE + 1; i++) {
      ids.push((await ciba(CAROL, `Paged agent ${i}`)).approvalId);
      clock.advance(1000);
    }
    const page = await newPage();
    await signIn(page, '/approvals', CAROL);
    const cardIds = async (): Promise<(string | null)[]> =>
      Promise.all((await page.locator('#inbox li.card').all()).map((c) => c.getAttribute('id')));
    const first = await cardIds();
    expect(first).toEqual(
      ids
        .slice(1)
        .reverse()
        .map((id) => `request-${id}`),
    );
    await page.click('#older');
    await page.waitForURL(/before=/);
    const second = await cardIds();
    expect(second).toEqual([`request-${ids[0]}`]);
    expect(await page.locator('#older').count()).toBe(0);
    await page.context().close();
  });

  it('signed out, the inbox asks to sign in and lists nothing', async () => {
    const res = await fetch(`${p.proxy.url}/approvals`);
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(html).toContain('id="sign-in-link"');
    expect(html).not.toContain('class="card"');
  });
});

describe('deciding: partial approval, narrowing, expiry', () => {
  it('partial approval: the unchecked capability is denied, only the checked ones are granted (§5.3)', async () => {
    const r = await pending(['list_pets', 'get_pet', 'get_inventory']);
    const page = await newPage();
    await openRequest(page, r.code);
    await page.uncheck('#cap-2');
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'Approved. The agent Shelter helper may now use: list_pets, get_pet. Not approved: get_inventory.',
    );
    const g = await grants(r);
    expect(g.list_pets.status).toBe('active');
    expect(g.get_pet.status).toBe('active');
    expect(g.get_inventory.status).toBe('denied');
    await page.context().close();
  });

  it('narrowing: a lower maximum and fewer allowed values are what the grant carries; an execute beyond them is refused (§2.13) (screenshots)', async () => {
    const r = await pending([LIST_PETS, 'get_pet']);
    for (const [width, height, name] of [
      [390, 844, 'device-decide-phone'],
      [1280, 800, 'device-decide'],
    ] as const) {
      const page = await newPage(width, height);
      await openRequest(page, r.code);
      // Every control has a label; the range starts as asked.
      for (const id of ['cap-0', 'cap-1', 'n-0-0-min', 'n-0-0-max', 'n-0-1-in-0', 'grant-expiry']) {
        expect(await page.locator(`label[for=${id}]`).count()).toBe(1);
      }
      expect(await page.inputValue('#n-0-0-max')).toBe('10');
      await page.fill('#n-0-0-max', '5');
      await page.uncheck('#n-0-1-in-2');
      await page.selectOption('#grant-expiry', '7d');
      await screenshot(page, name);
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
      if (name === 'device-decide') {
        await submit(page, '#approve');
        expect(await page.textContent('#outcome')).toContain('may now use: list_pets, get_pet.');
      }
      await page.context().close();
    }
    const g = await grants(r);
    expect(g.list_pets.constraints).toEqual({
      limit: { min: 1, max: 5 },
      status: { in: ['available', 'pending'] },
    });
    // Beyond the narrowed maximum, or a value unchecked: refused before the upstream sees it.
    const before = upstream.requests.length;
    const over = await p.execute(r.agent, r.agentId, 'list_pets', { limit: 8, status: 'available' });
    expect(over.status).toBe(403);
    expect(over.body.error).toBe('constraint_violated');
    const sold = await p.execute(r.agent, r.agentId, 'list_pets', { limit: 3, status: 'sold' });
    expect(sold.status).toBe(403);
    expect(upstream.requests.length).toBe(before);
    // Within it, the call goes through.
    const ok = await p.execute(r.agent, r.agentId, 'list_pets', { limit: 5, status: 'pending' });
    expect(ok.status).toBe(200);
    expect(upstream.requests.at(-1)?.query.get('limit')).toBe('5');
  });

  it('grant expiry: "After 1 hour" puts expires_at on every grant, and past it the grant no longer works (§3.3)', async () => {
    const r = await pending(['list_pets', 'get_inventory']);
    const page = await newPage();
    await openRequest(page, r.code);
    await page.selectOption('#grant-expiry', '1h');
    await submit(page, '#approve');
    const ends = new Date(clock.now() + HOUR).toISOString();
    expect(await page.textContent('#outcome')).toContain(`This access ends at ${ends}.`);
    const g = await grants(r);
    expect(g.list_pets.expires_at).toBe(ends);
    expect(g.get_inventory.expires_at).toBe(ends);
    expect((await p.execute(r.agent, r.agentId, 'get_inventory')).status).toBe(200);
    clock.advance(HOUR + 1);
    expect((await grants(r)).get_inventory.status).toBe('denied');
    expect((await p.execute(r.agent, r.agentId, 'get_inventory')).status).toBe(403);
    await page.context().close();
  });

  it('a grant expiry never outlives the agent: 30 days end at its absolute lifetime (§2.4)', async () => {
    const r = await pending(['list_pets']);
    const registeredAt = clock.now();
    clock.advance(60_000);
    const page = await newPage();
    await openRequest(page, r.code);
    await page.selectOption('#grant-expiry', '30d');
    await submit(page, '#approve');
    expect((await grants(r)).list_pets.expires_at).toBe(new Date(registeredAt + 30 * DAY).toISOString());
    await page.context().close();
  });
});

describe('attacks on the decision form: widening is refused, nothing granted', () => {
  it('editing the page’s HTML to a larger maximum than asked is refused, and nothing is granted', async () => {
    const r = await pending([LIST_PETS]);
    const page = await newPage();
    await openRequest(page, r.code);
    // What an agent driving the browser could do: drop the input's bound and type past it.
    await page.evaluate(`{
      const input = document.querySelector('#n-0-0-max');
      input.removeAttribute('max');
      input.value = '1000';
    }`);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toBe(
      'You can only narrow what the agent asked for, never widen it. The largest value the agent asked for on list_pets, limit is 10; 1000 would widen it. Nothing was granted.',
    );
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
    expect((await grants(r)).list_pets.status).toBe('pending');
    await page.context().close();
  });

  it('editing the page’s HTML to allow a value the agent never listed is refused, and nothing is granted', async () => {
    const r = await pending([LIST_PETS]);
    const page = await newPage();
    await openRequest(page, r.code);
    await page.evaluate(`document.querySelector('#n-0-1-in-0').value = '7'`);
    await submit(page, '#approve');
    expect(await page.textContent('#outcome')).toContain(
      'this form names something the request does not have',
    );
    expect(await page.textContent('#outcome')).toContain('Nothing was granted.');
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
    await page.context().close();
  });

  it('hand-made POSTs (a capability not asked for, a limit on an open field, an unchecked-everything form, an unknown expiry) are refused, and nothing is granted', async () => {
    const r = await pending([LIST_PETS]);
    const page = await newPage();
    await openRequest(page, r.code);
    // Everything the Approve form would send, as the browser builds it.
    const form = await page.evaluate<[string, string][]>(
      `[...new FormData(document.querySelector('#approve-form')).entries()].map(([k, v]) => [k, String(v)])`,
    );
    const [cookie] = await page.context().cookies();
    const post = async (fields: [string, string][]): Promise<{ status: number; html: string }> => {
      const res = await fetch(`${p.proxy.url}/device/approve`, {
        method: 'POST',
        headers: {
          cookie: `${cookie?.name}=${cookie?.value}`,
          origin,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams(fields).toString(),
      });
      return { status: res.status, html: await res.text() };
    };
    const without = (name: string) => form.filter(([k]) => k !== name);
    for (const [attack, fields, says] of [
      [
        'a capability index beyond the request',
        [...form, ['cap', '1']],
        'names something the request does not have',
      ],
      [
        'a limit on a field the request left open',
        [...form, ['n.0.5.max', '3']],
        'names something the request does not have',
      ],
      ['every capability unchecked', without('cap'), 'No capability was chosen'],
      [
        'an expiry the page does not offer',
        [...without('expires'), ['expires', '3650d']],
        'That expiry is not one this page offers.',
      ],
      [
        'a minimum below the request',
        [...without('n.0.0.min'), ['n.0.0.min', '-100']],
        '-100 would widen it',
      ],
    ] as const) {
      const out = await post(fields as [string, string][]);
      expect(out.status, attack).toBe(400);
      expect(out.html, attack).toContain(says);
      expect(out.html, attack).toContain('Nothing was granted.');
    }
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
    // The untouched form, sent the same way, works: the refusals were the attacks'.
    expect((await post(form)).status).toBe(200);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('active');
    await page.context().close();
  });
});

describe('warnings (§8.10)', () => {
  it('flags a mixed-script, brand-imitating agent name, markup in the host name, and a broad request (screenshot)', async () => {
    const r = await pending(['create_pet', 'delete_pet', 'place_order', 'list_pets'], {
      name: 'Pаypal Security', // a Cyrillic а
      host_name: '<b>Apple</b> Support',
    });
    const page = await newPage();
    await openRequest(page, r.code);
    await screenshot(page, 'device-warnings');
    expect(await page.textContent('#agent-name')).toBe('Pаypal Security');
    expect(await page.textContent('#host-name')).toBe('Apple Support');
    const warnings = await page.locator('#warnings li').allTextContents();
    expect(warnings).toEqual([
      'The agent name mixes alphabets in “Pаypal” (Latin and Cyrillic): letters that look alike but are not the same are a common disguise.',
      'The agent name looks like the well-known name “PayPal” but is spelled differently. This is how impostors disguise themselves.',
      'The host name contained HTML markup, which was removed. Honest agents do not need markup in a name.',
      'The host name uses the well-known name “Apple”. Anyone can choose that name: this server has not verified that the agent comes from Apple.',
      'This is an unusually broad request: it asks for every capability that can change data (3). Approve only what the agent needs: uncheck the rest.',
    ]);
    await page.context().close();
  });

  it('a plain request shows no warnings', async () => {
    const r = await pending(['list_pets']);
    const page = await newPage();
    await openRequest(page, r.code);
    expect(await page.locator('#warnings').count()).toBe(0);
    await page.context().close();
  });
});

describe('time left and Extend (issue 16 §5, WCAG 2.2.1)', () => {
  /** Presses Enter on the focused control and waits for the POST's page. */
  async function enter(page: Page): Promise<number> {
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().isNavigationRequest() && r.request().method() === 'POST'),
      page.keyboard.press('Enter'),
    ]);
    await page.waitForLoadState('load');
    return response.status();
  }

  it('near its end a request shows the time left and Extend; Extend by keyboard adds a lifetime the agent’s poll sees; another user cannot extend', async () => {
    const { key: host } = await p.linkedHost(ALICE);
    const reg = await p.register(host, { name: 'Slow reader', capabilities: ['list_pets'] });
    const code: string = reg.body.approval.user_code;
    const agentId: string = reg.body.agent_id;
    const expiresAt = clock.now() + 600_000;
    clock.advance(9 * 60_000);

    const page = await newPage();
    await openRequest(page, code);
    expect(await page.textContent('#time-left')).toBe(
      `Expires in 1 minute, at ${new Date(expiresAt).toISOString()}.`,
    );
    expect(await page.textContent('#time-left-extend')).toBe('Extend by 10 minutes');
    await page.focus('#time-left-extend');
    expect(await enter(page)).toBe(200);
    const extended = new Date(expiresAt + 600_000).toISOString();
    expect(await page.textContent('#outcome')).toBe(`Extended: the request is open until ${extended}.`);
    expect(await page.textContent('#time-left')).toBe(`Expires in 11 minutes, at ${extended}.`);
    // Plenty left now: no Extend until it nears its end again.
    expect(await page.locator('#time-left-extend').count()).toBe(0);
    const polled = await p.status(host, agentId);
    expect(polled.body.approval.expires_in).toBe(660);
    const logged = (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find(
      (r) => r.type === 'approval.extended',
    );
    expect(logged?.detail).toMatchObject({ by: ALICE, expires_at: extended, auth_method: 'password' });
    // The inbox card of the request she opened shows the time left too.
    await page.goto(`${origin}/approvals`);
    expect(await page.textContent('#inbox')).toContain(`Expires in 11 minutes, at ${extended}.`);
    await page.context().close();

    // Bob may not decide alice's agent's request, so he is offered no Extend, and a hand-made POST is refused.
    clock.advance(10 * 60_000);
    const bob = await newPage();
    await openRequest(bob, code, BOB);
    expect(await bob.textContent('#cannot-decide')).toContain('acts for another user');
    expect(await bob.textContent('#time-left')).toContain('Expires in 1 minute');
    expect(await bob.locator('#time-left-extend').count()).toBe(0);
    const csrf = await bob.inputValue('input[name=csrf] >> nth=0');
    const [cookie] = await bob.context().cookies();
    const refused = await fetch(`${p.proxy.url}/device/extend`, {
      method: 'POST',
      headers: {
        cookie: `${cookie?.name}=${cookie?.value}`,
        origin,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ csrf, code }).toString(),
    });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('acts for another user');
    expect((await p.status(host, agentId)).body.approval.expires_in).toBe(60);
    await bob.context().close();
  });
});
