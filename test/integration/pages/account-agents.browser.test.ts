/**
 * `{issuer}/account`, "Your agents" (issue 11) in headless Chromium over real HTTP: the signed-in
 * user sees only their own agents and hosts, with grants and recent activity; revokes one (§2.6,
 * as §5.7 does it: the next execution is refused and never reaches the upstream); disconnects a
 * host with its agents (§8.8.1); deletes its activity records (§9.2). The attacks: another user's agent named in the POST, no CSRF token, a
 * foreign Origin, no session, markup in an agent's name. Screenshot: docs/screenshots/account-agents.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACCOUNT_PAGE_SIZE,
  ACTIVITY_PAGE_SIZE,
  MAX_HOSTS_SHOWN,
  RECENT_ACTIVITY,
} from '../../../src/protocol/account.js';
import { launchChromium, openPage, submitForm as submit, screenshot } from '../../helpers/browser.js';
import { localhostConfig, localSignIn, PASSWORD } from '../../helpers/local-sign-in.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { TestUpstream } from '../../helpers/upstream.js';

const ALICE = 'alice@example.com';
const BOB = 'bob@example.com';

let p: TestProtocol;
let upstream: TestUpstream;
let browser: Browser;
let origin = '';

beforeAll(async () => {
  upstream = await TestUpstream.start();
  const signIn = await localSignIn([ALICE, BOB, 'carol@example.com', 'dave@example.com']);
  p = await startProtocol({
    policy:
      'capabilities:\n  constraints:\n    list_pets:\n      limit: { max: 500 }\n' +
      'rate_limits:\n  unknown_host_registration: null\n  per_ip: null\n',
    clock: new TestClock(),
    overrides: await localhostConfig(signIn, upstream.url),
  });
  origin = p.issuer;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await p?.close();
  await upstream?.close();
});

const newPage = (width = 1280, height = 900): Promise<Page> => openPage(browser, width, height);

/** Opens /account, follows its sign-in link and signs in; back on /account. */
async function openAccount(page: Page, user = ALICE): Promise<void> {
  await page.goto(`${origin}/account`);
  await Promise.all([page.waitForURL(/\/sign-in/), page.click('#sign-in-link')]);
  await page.fill('#user_id', user);
  await page.fill('#password', PASSWORD);
  await submit(page, 'button[type=submit]');
  await page.waitForURL(`${origin}/account`);
  expect(await page.textContent('#signed-in-as')).toBe(user);
}

/** An active agent of `user` (under a host linked to them) that ran list_pets `runs` times. */
async function agentOf(user: string, name: string, runs = 2) {
  const { key: host, hostId } = await p.linkedHost(user);
  const reg = await p.register(host, {
    name,
    capabilities: [{ name: 'list_pets', constraints: { limit: { max: 20 } } }],
  });
  const agentId: string = reg.body.agent_id;
  const approval = await p.pendingApproval(agentId);
  expect((await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {})).status).toBe(200);
  const asked = await p.request('POST', '/agent/request-capability', {
    token: await p.agentToken(reg.agent, agentId),
    body: { capabilities: ['create_pet'], reason: 'add the new arrivals' },
  });
  expect(asked.status).toBe(200);
  for (let i = 0; i < runs; i++) {
    expect((await p.execute(reg.agent, agentId, 'list_pets', { limit: 5 })).status).toBe(200);
  }
  return { host, hostId, agent: reg.agent, agentId };
}

async function activityCount(agentId: string): Promise<number> {
  const reply = await p.admin('GET', `/admin/activity?agent_id=${agentId}&limit=1000`);
  return reply.body.activity.length as number;
}

describe('the account page lists only the signed-in user’s agents', () => {
  it('shows each own agent with grants, constraints and recent activity, and nothing of another user (screenshot)', async () => {
    const mine = await agentOf(ALICE, 'Shelter helper', 7);
    const theirs = await agentOf(BOB, 'Bob private agent');
    const page = await newPage();
    await openAccount(page);
    const card = page.locator(`#agent-${mine.agentId}`);
    expect(await card.locator('h3').textContent()).toBe('Shelter helper');
    expect(await card.locator('.agent-status').textContent()).toBe('active');
    const grants = await card.locator('.grants').textContent();
    expect(grants).toContain('list_pets — allowed');
    expect(grants).toContain('limited to {"limit":{"max":20}}');
    expect(grants).toContain('create_pet — asked for, waiting for a decision');
    // Bounded: the last RECENT_ACTIVITY records, newest first.
    const activity = card.locator('.activity li');
    expect(await activity.count()).toBe(RECENT_ACTIVITY);
    expect(await activity.first().textContent()).toContain('list_pets');
    expect(await page.textContent('#hosts')).toContain('linked host');
    // §9.2: the retention (audit.retention, 90 days by default) is told to the user.
    expect(await page.textContent('#retention')).toBe(
      "This server deletes activity records after 90 days. You may delete an agent's records sooner below.",
    );
    const html = await page.content();
    expect(html).not.toContain(theirs.agentId);
    expect(html).not.toContain('Bob private agent');
    for (const input of await page.locator('form input:not([type=hidden])').all()) {
      const id = await input.getAttribute('id');
      expect(await page.locator(`label[for="${id}"]`).count()).toBe(1);
    }
    await screenshot(page, 'account-agents');
    await page.context().close();

    const phone = await newPage(390, 844);
    await openAccount(phone);
    expect(await phone.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await phone.context().close();
  });

  it('shows what was proposed, approved and is in effect when they differ; the decision record has the same (§2.13, issue 16)', async () => {
    // The agent proposes limit ≤ 1000; policy caps it at 500; the approver narrows it to 200.
    const { key: host } = await p.linkedHost(ALICE);
    const reg = await p.register(host, {
      name: 'Narrowed helper',
      capabilities: [{ name: 'list_pets', constraints: { limit: { max: 1000 } } }],
    });
    const agentId: string = reg.body.agent_id;
    const approval = await p.pendingApproval(agentId);
    expect(approval.capabilities).toEqual([{ name: 'list_pets', constraints: { limit: { max: 500 } } }]);
    const ok = await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {
      constraints: { list_pets: { limit: { max: 200 } } },
    });
    expect(ok.status).toBe(200);
    const grant = (await p.proxy.protocol.store.grants(agentId)).find((g) => g.capability === 'list_pets');
    expect(grant).toMatchObject({
      proposedConstraints: { limit: { max: 1000 } },
      approvedConstraints: { limit: { max: 200 } },
      constraints: { limit: { max: 200 } },
    });
    const decided = (await p.proxy.protocol.store.activity({ agentId, limit: 20 })).find(
      (r) => r.type === 'approval.approved',
    );
    expect(decided?.detail).toMatchObject({
      by: 'admin',
      auth_method: 'admin_token',
      client_ip: '127.0.0.1',
      constraints: {
        list_pets: {
          proposed: { limit: { max: 1000 } },
          approved: { limit: { max: 200 } },
          effective: { limit: { max: 200 } },
        },
      },
    });
    const page = await newPage();
    await openAccount(page);
    expect(await page.locator(`#agent-${agentId} .constraint-trail`).textContent()).toBe(
      'proposed {"limit":{"max":1000}} → approved {"limit":{"max":200}} → in effect {"limit":{"max":200}}',
    );
    await page.context().close();
  });

  it('shows per grant its constraints, expiry, uses and last use, and why an ended grant ended (issue 16 §5)', async () => {
    const used = await agentOf(ALICE, 'Counting helper', 3);
    const asked = await p.pendingApproval(used.agentId);
    expect((await p.admin('POST', `/admin/approvals/${asked.id}/deny`, { reason: 'not now' })).status).toBe(
      200,
    );
    const revoked = await agentOf(ALICE, 'Revoked grant helper', 0);
    const expired = await agentOf(ALICE, 'Expired grant helper', 0);
    const ctx = p.proxy.protocol;
    const listPets = async (agentId: string) =>
      (await ctx.store.grants(agentId)).find((g) => g.capability === 'list_pets')?.id ?? '';
    const now = p.clock.now();
    const revokedGrant = await listPets(revoked.agentId);
    const expiredGrant = await listPets(expired.agentId);
    // As reactivation or unlinking the host revoke a grant; a grant approved with a lifetime that ran out.
    await ctx.write(async (tx) => {
      await tx.updateGrant(revokedGrant, {
        status: 'revoked',
        reason: 'Host unlinked from its user.',
        updatedAt: now,
      });
      await tx.updateGrant(expiredGrant, { expiresAt: now - 1000, updatedAt: now });
    });
    const page = await newPage();
    await openAccount(page);
    const grant = (agentId: string, capability: string) =>
      page.locator(`#agent-${agentId} li.grant[data-capability="${capability}"]`);
    const counted = grant(used.agentId, 'list_pets');
    // Counted in memory and flushed in batches; the page adds what is not flushed yet.
    expect(await counted.locator('.grant-use').textContent()).toBe(
      `used 3 times, last used ${new Date(now).toISOString()}`,
    );
    expect(await counted.locator('.grant-constraints').textContent()).toBe('limited to {"limit":{"max":20}}');
    expect(await counted.locator('.grant-expiry').textContent()).toMatch(/^no expiry of its own/);
    expect(await counted.locator('.grant-ended').count()).toBe(0);
    expect(await grant(used.agentId, 'create_pet').locator('.grant-ended').textContent()).toBe(
      'ended: denied — why: not now',
    );
    expect(await grant(revoked.agentId, 'list_pets').locator('.grant-ended').textContent()).toBe(
      'ended: revoked — why: Host unlinked from its user.',
    );
    expect(await grant(expired.agentId, 'list_pets').locator('.grant-ended').textContent()).toBe(
      'ended: expired',
    );
    expect(await grant(expired.agentId, 'list_pets').locator('.grant-use').textContent()).toBe('never used');
    await page.context().close();
    // The counters survive a flush (migration 12): the stored row holds the three uses.
    await ctx.usage.flush();
    expect((await ctx.store.grantUses(used.agentId)).get(await listPets(used.agentId))).toEqual({
      uses: 3,
      lastUsedAt: now,
    });
  });

  it('an agent name with markup is shown as text, never as HTML (§8.10)', async () => {
    const a = await agentOf(ALICE, '<img src=x id=injected> Update', 1);
    const page = await newPage();
    await openAccount(page);
    expect(await page.locator('#injected').count()).toBe(0);
    expect(await page.locator(`#agent-${a.agentId} h3`).textContent()).toBe('<img src=x id=injected> Update');
    await page.context().close();
  });

  it(`pages the list: ${ACCOUNT_PAGE_SIZE} agents a page, the rest on the next`, async () => {
    const user = 'carol@example.com';
    const { key } = await p.linkedHost(user, ['list_pets']);
    for (let i = 0; i < ACCOUNT_PAGE_SIZE + 2; i++) {
      const reg = await p.register(key, { name: `worker ${i}`, capabilities: ['list_pets'] });
      expect(reg.body.status).toBe('active');
    }
    const page = await newPage();
    await openAccount(page, user);
    expect(await page.locator('article.agent').count()).toBe(ACCOUNT_PAGE_SIZE);
    expect(await page.textContent('#agent-pages')).toContain('Page 1 of 2.');
    await page.click('a[rel=next]');
    await page.waitForURL(/page=2/);
    expect(await page.locator('article.agent').count()).toBe(2);
    // The oldest are on the last page.
    expect(await page.locator('article.agent h3').allTextContents()).toEqual(['worker 1', 'worker 0']);
    await page.context().close();
  });
});

describe('revoking from the account page', () => {
  it('Revoke agent revokes it as §5.7 does: status revoked, grants gone, the next call never reaches the upstream', async () => {
    const a = await agentOf(ALICE, 'Revoke me');
    const page = await newPage();
    await openAccount(page);
    expect(await submit(page, `#revoke-${a.agentId}`)).toBe(200);
    expect(await page.textContent('#outcome')).toContain('The agent Revoke me is revoked');
    expect(await page.locator(`#agent-${a.agentId} .agent-status`).textContent()).toBe('revoked');
    expect(await page.locator(`#revoke-${a.agentId}`).count()).toBe(0);
    await page.context().close();

    const status = await p.status(a.host, a.agentId);
    expect(status.body.status).toBe('revoked');
    expect(status.body.agent_capability_grants).toEqual([]);
    const before = upstream.requests.length;
    const run = await p.execute(a.agent, a.agentId, 'list_pets', { limit: 5 });
    expect(run.status).toBe(403);
    expect(run.body.error).toBe('agent_revoked');
    expect(upstream.requests.length).toBe(before);
    const log = await p.admin('GET', `/admin/activity?agent_id=${a.agentId}&limit=20`);
    expect(log.body.activity).toContainEqual(
      expect.objectContaining({ type: 'agent.revoked', detail: { by: ALICE } }),
    );
  });
});

describe('disconnecting an app (a host) from the account page (§8.8.1)', () => {
  it('revokes the host and every agent under it, as §5.10 does; from the keyboard', async () => {
    const a = await agentOf(ALICE, 'Laptop helper', 1);
    const second = await p.register(a.host, { name: 'Second helper', capabilities: ['list_pets'] });
    const page = await newPage();
    await openAccount(page);
    const button = page.locator(`#revoke-host-${a.hostId}`);
    expect(await button.textContent()).toBe('Disconnect linked host');
    await button.focus();
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().isNavigationRequest() && r.request().method() === 'POST'),
      page.keyboard.press('Enter'),
    ]);
    expect(response.status()).toBe(200);
    await page.waitForLoadState('load');
    expect(await page.textContent('#outcome')).toBe(
      'The app linked host is disconnected, with its 2 agents: none can act for you any more, and this cannot be undone.',
    );
    // A disconnected app leaves the list of connected ones.
    expect(await page.locator(`#host-${a.hostId}`).count()).toBe(0);
    expect(await page.locator(`#agent-${a.agentId} .agent-status`).textContent()).toBe('revoked');
    await page.context().close();

    const before = upstream.requests.length;
    const run = await p.execute(a.agent, a.agentId, 'list_pets', { limit: 5 });
    expect(run.status).toBe(403);
    expect(run.body.error).toBe('host_revoked');
    expect(upstream.requests.length).toBe(before);
    expect((await p.admin('GET', `/admin/agents/${second.body.agent_id}`)).body.status).toBe('revoked');
    const log = await p.admin('GET', `/admin/activity?host_id=${a.hostId}&limit=50`);
    expect(log.body.activity).toContainEqual(
      expect.objectContaining({ type: 'host.revoked', detail: { agents_revoked: 2, by: ALICE } }),
    );
  });
});

describe('all activity records of an agent (§9.2)', () => {
  it(`the card links to every record, ${ACTIVITY_PAGE_SIZE} a page, newest first; older pages follow`, async () => {
    const a = await agentOf(ALICE, 'Busy helper', ACTIVITY_PAGE_SIZE + 5);
    const total = await activityCount(a.agentId);
    expect(total).toBeGreaterThan(ACTIVITY_PAGE_SIZE);
    const page = await newPage(390, 844);
    await openAccount(page);
    await Promise.all([
      page.waitForURL(/\/account\/activity\?agent_id=/),
      page.click(`#all-activity-${a.agentId}`),
    ]);
    expect(await page.locator('#activity li').count()).toBe(ACTIVITY_PAGE_SIZE);
    expect(await page.locator('#activity li').first().textContent()).toContain('list_pets');
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await Promise.all([page.waitForURL(/before=/), page.click('#older')]);
    expect(await page.locator('#activity li').count()).toBe(total - ACTIVITY_PAGE_SIZE);
    expect(await page.locator('#older').count()).toBe(0);
    // The oldest record is the registration.
    expect(await page.locator('#activity li').last().textContent()).toContain('agent.registered');
    await page.context().close();
  });

  it("another user's agent, a malformed cursor, or no session: nothing of the records is shown", async () => {
    const bobs = await agentOf(BOB, 'Bob busy agent', 1);
    const { cookie } = await aliceSessionCookie();
    const get = async (query: string, withCookie = cookie) => {
      const res = await fetch(`${p.proxy.url}/account/activity?${query}`, {
        headers: { cookie: withCookie },
      });
      return { status: res.status, text: await res.text() };
    };
    const foreign = await get(`agent_id=${bobs.agentId}`);
    expect(foreign.status).toBe(404);
    expect(foreign.text).toContain('None of your agents has that id.');
    expect(foreign.text).not.toContain('Bob busy agent');
    const mine = await agentOf(ALICE, 'Cursor agent', 1);
    expect((await get(`agent_id=${mine.agentId}&before=abc`)).status).toBe(400);
    expect((await get('agent_id=../etc')).status).toBe(400);
    const anonymous = await get(`agent_id=${mine.agentId}`, '');
    expect(anonymous.status).toBe(200);
    expect(anonymous.text).toContain('id="sign-in-link"');
    expect(anonymous.text).not.toContain('Cursor agent');
  });
});

describe('connected apps beyond the page bound', () => {
  it(`lists at most ${MAX_HOSTS_SHOWN} active ones and says there are more; disconnected ones leave no gap`, async () => {
    const user = 'dave@example.com';
    const first = await p.linkedHost(user);
    expect((await p.admin('POST', `/admin/hosts/${first.hostId}/revoke`, {})).status).toBe(200);
    for (let i = 0; i < MAX_HOSTS_SHOWN + 1; i++) await p.linkedHost(user);
    const page = await newPage();
    await openAccount(page, user);
    expect(await page.locator('#hosts li[id^="host-"]').count()).toBe(MAX_HOSTS_SHOWN);
    expect(await page.locator(`#host-${first.hostId}`).count()).toBe(0);
    expect(await page.textContent('#hosts')).toContain(`and more: the ${MAX_HOSTS_SHOWN} oldest are shown`);
    await page.context().close();
  });
});

describe('deleting activity records (§9.2)', () => {
  it('Delete activity records removes every record of that agent, and only that agent', async () => {
    const a = await agentOf(ALICE, 'Forget me', 3);
    const other = await agentOf(ALICE, 'Keep my history', 2);
    const keptBefore = await activityCount(other.agentId);
    expect(await activityCount(a.agentId)).toBeGreaterThan(3);
    const page = await newPage();
    await openAccount(page);
    expect(await submit(page, `#delete-activity-${a.agentId}`)).toBe(200);
    expect(await page.textContent('#outcome')).toMatch(
      /^Deleted \d+ activity records of the agent Forget me\.$/,
    );
    expect(await page.locator(`#agent-${a.agentId} .activity`).count()).toBe(0);
    await page.context().close();
    expect(await activityCount(a.agentId)).toBe(0);
    expect(await activityCount(other.agentId)).toBe(keptBefore);
    // The agent itself is untouched: still active, still allowed.
    expect((await p.status(a.host, a.agentId)).body.status).toBe('active');
  });
});

/** Alice's session cookie, as her browser holds it after signing in. */
async function aliceSessionCookie(): Promise<{ cookie: string }> {
  const page = await newPage();
  await openAccount(page);
  const [c] = await page.context().cookies();
  await page.context().close();
  return { cookie: `${c?.name}=${c?.value}` };
}

describe('attacks on the account forms (real HTTP)', () => {
  /** Alice's session cookie and CSRF token, as her browser holds them. */
  async function aliceSession(): Promise<{ cookie: string; csrf: string }> {
    const page = await newPage();
    await openAccount(page);
    const csrf = (await page.locator('form input[name=csrf]').first().getAttribute('value')) ?? '';
    const [c] = await page.context().cookies();
    await page.context().close();
    return { cookie: `${c?.name}=${c?.value}`, csrf };
  }

  async function post(
    path: string,
    cookie: string,
    fields: Record<string, string>,
    from = origin,
  ): Promise<{ status: number; text: string }> {
    const res = await fetch(`${p.proxy.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: from, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    return { status: res.status, text: await res.text() };
  }

  it('a POST naming another user’s agent is refused (404, as if it did not exist) and changes nothing', async () => {
    const bobs = await agentOf(BOB, 'Bob agent', 2);
    const bobActivity = await activityCount(bobs.agentId);
    const { cookie, csrf } = await aliceSession();
    for (const path of ['/account/agents/revoke', '/account/agents/delete-activity']) {
      const reply = await post(path, cookie, { csrf, agent_id: bobs.agentId });
      expect(reply.status).toBe(404);
      expect(reply.text).toContain('None of your agents has that id, so nothing was changed.');
    }
    // An id that exists nowhere reads exactly the same.
    const missing = await post('/account/agents/revoke', cookie, { csrf, agent_id: 'agt_doesnotexist' });
    expect(missing.status).toBe(404);
    expect((await p.status(bobs.host, bobs.agentId)).body.status).toBe('active');
    expect(await activityCount(bobs.agentId)).toBe(bobActivity);
    expect((await p.execute(bobs.agent, bobs.agentId, 'list_pets', { limit: 1 })).status).toBe(200);
  });

  it('without the CSRF token, with a wrong one, from a foreign Origin, or without a session: 403 and nothing changes', async () => {
    const mine = await agentOf(ALICE, 'Guarded agent', 1);
    const activity = await activityCount(mine.agentId);
    const { cookie, csrf } = await aliceSession();
    const fields = { csrf, agent_id: mine.agentId };
    for (const path of ['/account/agents/revoke', '/account/agents/delete-activity']) {
      expect((await post(path, cookie, { agent_id: mine.agentId })).status).toBe(403);
      expect((await post(path, cookie, { ...fields, csrf: 'A'.repeat(43) })).status).toBe(403);
      expect((await post(path, cookie, fields, 'http://evil.example')).status).toBe(403);
      expect((await post(path, 'aap_session=forged', fields)).status).toBe(403);
    }
    expect((await p.status(mine.host, mine.agentId)).body.status).toBe('active');
    expect(await activityCount(mine.agentId)).toBe(activity);
    // The untouched form from the right origin works: the refusals were the attacks'.
    expect((await post('/account/agents/revoke', cookie, fields)).status).toBe(200);
    expect((await p.status(mine.host, mine.agentId)).body.status).toBe('revoked');
  });

  it('a POST naming another user’s host, or none, is refused (404) and changes nothing', async () => {
    const bobs = await agentOf(BOB, 'Bob laptop agent', 1);
    const { cookie, csrf } = await aliceSession();
    const reply = await post('/account/hosts/revoke', cookie, { csrf, host_id: bobs.hostId });
    expect(reply.status).toBe(404);
    expect(reply.text).toContain('None of your connected apps has that id, so nothing was changed.');
    const missing = await post('/account/hosts/revoke', cookie, { csrf, host_id: 'hst_doesnotexist' });
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('None of your connected apps has that id');
    expect((await post('/account/hosts/revoke', cookie, { csrf, host_id: '../x' })).status).toBe(400);
    expect((await p.admin('GET', `/admin/hosts/${bobs.hostId}`)).body.status).toBe('active');
    expect((await p.execute(bobs.agent, bobs.agentId, 'list_pets', { limit: 1 })).status).toBe(200);
  });

  it('disconnecting without the CSRF token, from a foreign Origin, or without a session: 403 and nothing changes', async () => {
    const mine = await agentOf(ALICE, 'Guarded laptop agent', 1);
    const { cookie, csrf } = await aliceSession();
    const fields = { csrf, host_id: mine.hostId };
    const path = '/account/hosts/revoke';
    expect((await post(path, cookie, { host_id: mine.hostId })).status).toBe(403);
    expect((await post(path, cookie, { ...fields, csrf: 'A'.repeat(43) })).status).toBe(403);
    expect((await post(path, cookie, fields, 'http://evil.example')).status).toBe(403);
    expect((await post(path, 'aap_session=forged', fields)).status).toBe(403);
    expect((await p.admin('GET', `/admin/hosts/${mine.hostId}`)).body.status).toBe('active');
    // The untouched form works; repeating it changes nothing more.
    expect((await post(path, cookie, fields)).status).toBe(200);
    const again = await post(path, cookie, fields);
    expect(again.status).toBe(200);
    expect(again.text).toContain('is disconnected: neither it nor its agents can act for you any more.');
    const log = await p.admin('GET', `/admin/activity?host_id=${mine.hostId}&limit=50`);
    expect(log.body.activity.filter((r: { type: string }) => r.type === 'host.revoked')).toHaveLength(1);
  });

  it('the account page without a session shows only a sign-in link', async () => {
    const res = await fetch(`${p.proxy.url}/account`);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toContain('id="sign-in-link"');
    expect(text).not.toContain('id="agents"');
  });
});
