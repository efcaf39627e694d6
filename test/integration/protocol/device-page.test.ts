/**
 * §7.1 the verification URI: `GET /device` shows what the request behind a user code asks for,
 * read-only (§8.11: an agent controlling the browser must not be able to approve itself), with
 * agent-chosen text rendered only as text (§8.10), under a script-free CSP. `approval.
 * verification_uri` sends users to the operator's own portal instead. The page in a real
 * browser: device-page.browser.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';

const POLICY = `
capabilities:
  public: ['*']
  high_risk: [{methods: [POST, PUT, PATCH, DELETE]}]
rate_limits:
  unknown_host_registration: null
`;

let p: TestProtocol;
const clock = new TestClock();
beforeAll(async () => {
  p = await startProtocol({ policy: POLICY, clock });
});
afterAll(() => p.close());

async function page(query = ''): Promise<{ status: number; headers: Headers; html: string }> {
  const res = await fetch(`${p.proxy.url}/device${query}`);
  return { status: res.status, headers: res.headers, html: await res.text() };
}

/** A pending registration of an unknown host; its device-flow approval object. */
async function pendingRegistration(body: Record<string, unknown>): Promise<Record<string, string>> {
  const reg = await p.register(await generateTestKey(), body);
  expect(reg.status).toBe(200);
  expect(reg.body.approval.method).toBe('device_authorization');
  return reg.body.approval as Record<string, string>;
}

describe('GET /device (§7.1)', () => {
  it('is where approval objects send users, with the code in verification_uri_complete', async () => {
    const approval = await pendingRegistration({ capabilities: ['list_pets'] });
    expect(approval.verification_uri).toBe(`${p.issuer}/device`);
    expect(approval.verification_uri_complete).toBe(
      `${p.issuer}/device?code=${encodeURIComponent(approval.user_code ?? '')}`,
    );
    const followed = await fetch(approval.verification_uri_complete ?? '');
    expect(followed.status).toBe(200);
    const html = await followed.text();
    expect(html).toContain('id="agent-name"');
    // Issue 16 §5: the time left, read-only (no Extend without a signed-in approver).
    expect(html).toMatch(/<p id="time-left" class="who">Expires in 10 minutes, at <time datetime="[^"]+">/);
    expect(html).not.toContain('/device/extend');
  });

  it('without a code shows the form, with headers that allow no script and no framing', async () => {
    const { status, headers, html } = await page();
    expect(status).toBe(200);
    expect(headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(headers.get('x-frame-options')).toBe('DENY');
    expect(headers.get('cache-control')).toBe('no-store');
    expect(headers.get('referrer-policy')).toBe('same-origin');
    expect(html).toContain('<form method="get" action="/device">');
    expect(html).not.toContain('<script');
    expect(html).not.toContain('id="outcome"');
  });

  it('shows the request behind a code: agent, host, capabilities with descriptions, reason', async () => {
    const approval = await pendingRegistration({
      name: 'Pet helper',
      host_name: 'Alice laptop',
      capabilities: ['list_pets', 'create_pet'],
      reason: 'To keep the shelter list current',
    });
    const { html } = await page(`?code=${approval.user_code}`);
    expect(html).toContain('<strong id="agent-name">Pet helper</strong>');
    expect(html).toContain('<strong id="host-name">Alice laptop</strong>');
    expect(html).toContain('<code>list_pets</code> — List pets <small class="method">(GET)</small></li>');
    // create_pet is a POST: high_risk under this policy, and the page says so.
    expect(html).toContain(
      '<code>create_pet</code> — Add a pet <small class="method">(POST)</small> <strong class="risk">high risk',
    );
    expect(html).toContain('<dd id="reason">To keep the shelter list current</dd>');
    expect(html).toContain('wants to connect to');
    // Read-only: nothing on the page can decide the request.
    expect(html).not.toMatch(/approve<\/button>|method="post"/i);
    expect(html).toContain('id="next-step"');
  });

  it('accepts the code as users type it: lower case, spaces, no dash', async () => {
    const approval = await pendingRegistration({ name: 'Typed agent' });
    const typed = ` ${(approval.user_code ?? '').replace('-', ' ').toLowerCase()} `;
    const { html } = await page(`?code=${encodeURIComponent(typed)}`);
    expect(html).toContain('<strong id="agent-name">Typed agent</strong>');
  });

  it('strips markup from agent-chosen names and reasons and escapes what is left (§8.10)', async () => {
    const approval = await pendingRegistration({
      name: '<img src=x onerror="alert(1)">Helper',
      host_name: '"><script>alert(2)</script>',
      reason: "<a href='https://evil.example'>click</a> & more <3",
    });
    const { html } = await page(`?code=${approval.user_code}`);
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<script');
    expect(html).not.toContain('<a href');
    expect(html).toContain('<strong id="agent-name">Helper</strong>');
    expect(html).toContain('<strong id="host-name">&quot;&gt;alert(2)</strong>');
    expect(html).toContain('<dd id="reason">click &amp; more &lt;3</dd>');
  });

  it('says so for a well-formed code with no open request, and for a malformed one', async () => {
    const unknown = await page('?code=BCDF-GHJK');
    expect(unknown.status).toBe(200);
    expect(unknown.html).toContain('No open request has the code <span class="code">BCDF-GHJK</span>');
    const malformed = await page(`?code=${encodeURIComponent('<b>0000</b>')}`);
    expect(malformed.html).toContain('That is not a code of this server');
    expect(malformed.html).not.toContain('<b>0000</b>');
  });

  it('no longer shows a request once it was decided, or after it expired', async () => {
    const decided = await pendingRegistration({ name: 'Decided agent' });
    const pending = await p.admin('GET', '/admin/approvals');
    const id = (pending.body.approvals as { id: string; user_code: string }[]).find(
      (a) => a.user_code === decided.user_code,
    )?.id;
    expect((await p.admin('POST', `/admin/approvals/${id}/deny`, {})).status).toBe(200);
    expect((await page(`?code=${decided.user_code}`)).html).toContain('No open request has the code');

    const expiring = await pendingRegistration({ name: 'Slow agent' });
    expect((await page(`?code=${expiring.user_code}`)).html).toContain('Slow agent');
    clock.advance(10 * 60_000 + 1);
    expect((await page(`?code=${expiring.user_code}`)).html).toContain('No open request has the code');
  });
});

describe('GET /device is rate limited per IP (RFC 8628 §5.1: codes must not be guessable)', () => {
  it('answers 429 rate_limited past rate_limits.per_ip', async () => {
    const q = await startProtocol({ policy: `${POLICY}  per_ip: 3/1m\n` });
    try {
      for (let i = 0; i < 3; i++)
        expect((await fetch(`${q.proxy.url}/device?code=BCDF-GHJK`)).status).toBe(200);
      const limited = await fetch(`${q.proxy.url}/device?code=BCDF-GHJK`);
      expect(limited.status).toBe(429);
      expect(((await limited.json()) as { error: string }).error).toBe('rate_limited');
      expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    } finally {
      await q.close();
    }
  });
});

describe('approval.warn_names: the operator’s own names (§8.10)', () => {
  it('the page warns when an agent name imitates one of them', async () => {
    const q = await startProtocol({ policy: `${POLICY}approval:\n  warn_names: [Acme Pets]\n` });
    try {
      const shown = async (name: string): Promise<string> => {
        const reg = await q.register(await generateTestKey(), { name, capabilities: ['list_pets'] });
        const res = await fetch(`${q.proxy.url}/device?code=${reg.body.approval.user_code as string}`);
        return res.text();
      };
      expect(await shown('Acrne Pets support')).toContain(
        'The agent name looks like the name “Acme Pets” but is spelled differently. This is how impostors disguise themselves.',
      );
      expect(await shown('Shelter helper')).not.toContain('Acme Pets');
    } finally {
      await q.close();
    }
  });
});

describe('approval.verification_uri: the operator’s own approval portal', () => {
  it('approval objects point there, keeping its query, with the code added', async () => {
    const q = await startProtocol({
      policy: `${POLICY}approval:\n  verification_uri: https://portal.example.com/agents?tenant=acme\n`,
    });
    try {
      const reg = await q.register(await generateTestKey(), {});
      expect(reg.body.approval.verification_uri).toBe('https://portal.example.com/agents?tenant=acme');
      expect(reg.body.approval.verification_uri_complete).toBe(
        `https://portal.example.com/agents?tenant=acme&code=${reg.body.approval.user_code}`,
      );
    } finally {
      await q.close();
    }
  });
});
