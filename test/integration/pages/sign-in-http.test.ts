/**
 * Sign-in over plain HTTP: cookie flags, session fixation, sign-out, login and logout CSRF,
 * open redirects after sign-in, and framing, CSP and caching on every HTML answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestProtocol } from '../../helpers/protocol.js';
import {
  ALICE,
  csrfOf,
  get,
  originOf,
  PASSWORD,
  post,
  signIn,
  startPagesProxy,
} from '../../helpers/page-http.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy();
});
afterAll(async () => {
  await p?.close();
});

describe('cookies and session fixation', () => {
  it('the session cookie is HttpOnly, SameSite, Path=/', async () => {
    const { answer } = await signIn(p);
    expect(answer.status).toBe(303);
    const set = answer.headers.get('set-cookie') ?? '';
    expect(set).toMatch(/^aap_session=[A-Za-z0-9_-]{43};/);
    expect(set).toContain('HttpOnly');
    expect(set).toMatch(/SameSite=(Lax|Strict)/);
    expect(set).toContain('Path=/');
  });

  it('a session id planted before sign-in is not kept, and is ended', async () => {
    // The attacker signs in themself and plants their cookie in the victim's browser.
    const planted = (await signIn(p, 'bob@example.com')).cookie;
    const { cookie } = await signIn(p, ALICE, '/device', planted);
    expect(cookie).not.toBe(planted);
    expect(cookie).toMatch(/^aap_session=/);
    const old = await get(p, '/device', planted);
    expect(old.text).not.toContain('id="signed-in-as"');
  });

  it('sign-out ends the session server-side', async () => {
    const { cookie } = await signIn(p);
    const csrf = await csrfOf(p, cookie);
    const out = await post(p, '/sign-out', { csrf }, cookie);
    expect(out.status).toBe(303);
    const after = await get(p, '/device', cookie);
    expect(after.text).not.toContain('id="signed-in-as"');
  });
});

describe('login / logout CSRF', () => {
  it('POST /sign-in without Origin, with Origin null or foreign is refused', async () => {
    for (const origin of [null, 'null', 'http://evil.example', `${originOf(p)}.evil.example`]) {
      const a = await post(p, '/sign-in', { user_id: ALICE, password: PASSWORD }, '', origin);
      expect(a.status, String(origin)).toBe(403);
      expect(a.headers.get('set-cookie')).toBeNull();
    }
  });

  it('POST /sign-out needs the token: without it the session survives', async () => {
    const { cookie } = await signIn(p);
    for (const fields of [{}, { csrf: 'A'.repeat(43) }] as Record<string, string>[]) {
      const a = await post(p, '/sign-out', fields, cookie);
      expect(a.status).toBeGreaterThanOrEqual(400);
    }
    const foreign = await post(
      p,
      '/sign-out',
      { csrf: await csrfOf(p, cookie) },
      cookie,
      'http://evil.example',
    );
    expect(foreign.status).toBeGreaterThanOrEqual(400);
    expect((await get(p, '/device', cookie)).text).toContain('id="signed-in-as"');
  });

  it("one session's CSRF token does not work for another session", async () => {
    const a = await signIn(p);
    const b = await signIn(p, 'bob@example.com');
    const tokenA = await csrfOf(p, a.cookie);
    const out = await post(p, '/sign-out', { csrf: tokenA }, b.cookie);
    expect(out.status).toBe(403);
    expect((await get(p, '/device', b.cookie)).text).toContain('id="signed-in-as"');
  });
});

describe('open redirects after sign-in', () => {
  const evil = [
    '//evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    'https://evil.example',
    '/%2F%2Fevil.example',
    '/%5Cevil.example',
    '/\t/evil.example',
    '/\n/evil.example',
    ' //evil.example',
    '/./\\evil.example',
    'javascript:alert(1)',
    '/\u3000/evil.example',
  ];
  for (const ret of evil) {
    it(`return=${JSON.stringify(ret)} never leaves the site`, async () => {
      const { answer } = await signIn(p, ALICE, ret);
      const loc = answer.headers.get('location') ?? '/';
      const resolved = new URL(loc, originOf(p));
      expect(resolved.origin).toBe(originOf(p));
    });
  }

  it('the hidden return field on the sign-in page carries only a local path (GET ?return=)', async () => {
    const a = await get(p, `/sign-in?return=${encodeURIComponent('//evil.example')}`);
    expect(a.text).toContain('name="return" value="/device"');
  });

  it('a return path past Latin-1 signs in, sent back percent-encoded (a Location header holds no more)', async () => {
    // A crafted link /sign-in?return=%2Fdevice%3Fx%3D%E2%82%AC puts this in the form's hidden field.
    const form = await get(p, '/sign-in?return=%2Fdevice%3Fx%3D%E2%82%AC');
    expect(form.text).toContain('name="return" value="/device?x=%E2%82%AC"');
    const { answer } = await signIn(p, ALICE, '/device?x=\u20ac');
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/device?x=%E2%82%AC');
    expect(answer.headers.get('set-cookie')).toMatch(/^aap_session=/);
  });
});

describe('framing, CSP and caching on every page', () => {
  async function pages(): Promise<[string, { status: number; headers: Headers }][]> {
    const { cookie } = await signIn(p);
    const csrf = await csrfOf(p, cookie);
    return [
      ['GET /sign-in', await get(p, '/sign-in')],
      ['GET /device', await get(p, '/device')],
      ['GET /device signed in', await get(p, '/device', cookie)],
      ['GET /approvals signed in', await get(p, '/approvals', cookie)],
      ['GET /account signed in', await get(p, '/account', cookie)],
      ['GET /approvals/calls/x signed in', await get(p, '/approvals/calls/call_x', cookie)],
      ['POST /device bad code', await post(p, '/device', { csrf, code: 'BCDF-GHJK' }, cookie)],
      ['POST /device csrf refused', await post(p, '/device', { code: 'x' }, cookie)],
      ['POST /sign-in wrong password', await post(p, '/sign-in', { user_id: 'nobody', password: 'x' })],
      [
        'POST /sign-in wrong content type',
        await post(p, '/sign-in', {}, '', originOf(p), { 'content-type': 'text/plain' }),
      ],
    ];
  }
  it('every HTML answer forbids framing and caching', async () => {
    for (const [name, a] of await pages()) {
      const type = a.headers.get('content-type') ?? '';
      if (!type.startsWith('text/html')) continue;
      expect(a.headers.get('x-frame-options'), name).toBe('DENY');
      expect(a.headers.get('content-security-policy') ?? '', name).toContain("frame-ancestors 'none'");
      expect(a.headers.get('cache-control') ?? '', name).toContain('no-store');
      expect(a.headers.get('content-security-policy') ?? '', name).not.toContain('unsafe-inline');
    }
  });
});

describe('behind TLS (https issuer)', () => {
  it('the session cookie is __Host-, Secure, HttpOnly, Path=/, and sign-out clears it the same way', async () => {
    const t = await startPagesProxy('', { issuer: () => 'https://agents.example.test' });
    try {
      const { answer, cookie } = await signIn(t);
      expect(answer.status).toBe(303);
      const set = answer.headers.get('set-cookie') ?? '';
      expect(set).toMatch(/^__Host-aap_session=[A-Za-z0-9_-]{43}; Path=\//);
      expect(set).toContain('; Secure');
      expect(set).toContain('HttpOnly');
      expect(set).not.toMatch(/Domain=/i);
      const csrf = await csrfOf(t, cookie);
      const out = await post(t, '/sign-out', { csrf }, cookie);
      const cleared = out.headers.get('set-cookie') ?? '';
      expect(cleared).toMatch(/^__Host-aap_session=; Path=\/;.*Max-Age=0.*Secure/);
      // A plain-http cookie of the dev name is never read as the session.
      const plain = cookie.replace('__Host-aap_session', 'aap_session');
      expect((await get(t, '/device', plain)).text).not.toContain('id="signed-in-as"');
    } finally {
      await t.close();
    }
  });
});
