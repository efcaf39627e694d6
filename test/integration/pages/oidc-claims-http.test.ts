/**
 * What an OpenID Connect sign-in takes from the provider's claims, against a real provider:
 * without `auth_time` nobody can say when the person authenticated (the provider may have reused
 * a session of its own hours old), so the session is never fresh (§8.11); and an `email_verified`
 * of "false", as a string, is as unverified as false; and a passkey session standing in for an
 * OIDC sign-in is refreshed at the provider, not with a password the person does not have.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdpBrowser, startTestIdp, type TestIdp } from '../../helpers/oidc-provider.js';
import { Sessions } from '../../../src/protocol/sessions.js';
import { get, hiddenFields, pendingRegistration, post, startPagesProxy } from '../../helpers/page-http.js';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';

const clock = new TestClock();

/** A real provider with `accounts`, and a pages proxy signing in there. */
async function providerAndProxy(
  accounts: Parameters<typeof startTestIdp>[0]['accounts'],
  requireAuthTime?: boolean,
): Promise<{ provider: TestIdp; proxy: TestProtocol }> {
  const provider = await startTestIdp({
    redirectUris: ['http://localhost/sign-in/oidc/callback'],
    accounts,
    now: () => clock.now(),
    ...(requireAuthTime === undefined ? {} : { requireAuthTime }),
  });
  const proxy = await startPagesProxy(
    `  oidc:\n    issuer: ${provider.issuer}\n    client_id: ${provider.clientId}\n    client_secret: { value: ${provider.clientSecret} }\n`,
    { clock, issuer: () => 'http://localhost' },
  );
  return { provider, proxy };
}

let idp: TestIdp;
let p: TestProtocol;
beforeAll(async () => {
  ({ provider: idp, proxy: p } = await providerAndProxy(
    {
      carol: { email: 'carol@example.com', email_verified: true, preferred_username: 'carol', name: 'Carol' },
      mallory: { email: 'alice@example.com', email_verified: 'false', preferred_username: 'm', name: 'M' },
    },
    // auth_time only when asked for (max_age), as OIDC Core allows.
    false,
  ));
});
afterAll(async () => {
  await p?.close();
  await idp?.close();
});

/** A whole sign-in at the provider as `login`; the proxy's answer at its callback. */
async function signInAs(
  login: string,
  at: { proxy: TestProtocol; provider: TestIdp } = { proxy: p, provider: idp },
): Promise<{ status: number; cookie: string; text: string }> {
  const begin = await get(at.proxy, '/sign-in/oidc?return=/account');
  expect(begin.status).toBe(303);
  const browser = (begin.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const callback = new URL(
    await new IdpBrowser(at.provider, login).follow(begin.headers.get('location') ?? ''),
  );
  const done = await get(at.proxy, `${callback.pathname}${callback.search}`, browser);
  return {
    status: done.status,
    cookie: (done.headers.get('set-cookie') ?? '').split(';')[0] ?? '',
    text: done.text,
  };
}

describe('claims of an OIDC sign-in', () => {
  it('without auth_time the session is not fresh: it cannot enrol a first passkey or approve', async () => {
    const done = await signInAs('carol');
    expect(done.status).toBe(303);
    expect(done.cookie).toMatch(/^aap_session=/);
    const account = await get(p, '/account', done.cookie);
    expect(account.text).toContain('carol@example.com');
    // The first passkey needs a fresh sign-in: offered, not granted.
    expect(account.text).toContain('id="enrol-sign-in"');
  });

  it('email_verified "false" (a string) is refused like false; nobody is signed in', async () => {
    const done = await signInAs('mallory');
    expect(done.status).toBe(403);
    expect(done.cookie).not.toMatch(/^aap_session=/);
    expect(done.text).toContain('has not verified your e-mail address');
  });

  it('a stale passkey session of an OIDC person is sent back to the provider, never asked for a password it lacks', async () => {
    // What a passkey approval leaves for a person signed in at the provider: a session standing in.
    const { cookieValue, session } = await new Sessions(p.proxy.protocol.store, clock, 12 * 3_600_000).start(
      'carol@example.com',
      'passkey',
    );
    const cookie = `aap_session=${cookieValue}`;
    clock.advance(10 * 60_000); // past fresh_auth (5 minutes)
    const r = await pendingRegistration(p);
    const shown = await post(p, '/device', { csrf: session.csrfToken, code: r.code }, cookie);
    expect(shown.status).toBe(200);
    expect(shown.text).not.toMatch(/type="password"/);
    expect(shown.text).toContain('/sign-in/oidc');
    // Approving sends the person to the provider (fresh), instead of checking a password.
    const approve = await post(p, '/device/approve', hiddenFields(shown.text, 'approve-form'), cookie);
    expect(approve.headers.get('refresh')).toMatch(/url=\/sign-in\/oidc\?/);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');
  });
});

describe('auth_time a provider should not send', () => {
  let ahead: TestIdp;
  let proxy: TestProtocol;
  beforeAll(async () => {
    ({ provider: ahead, proxy } = await providerAndProxy({
      dave: { email: 'dave@example.com', email_verified: true, preferred_username: 'dave', name: 'Dave' },
    }));
  });
  afterAll(async () => {
    await proxy?.close();
    await ahead?.close();
  });

  it('an auth_time an hour ahead is no authentication time: the session is not fresh', async () => {
    ahead.authTimeOffsetSec = -3600;
    try {
      const done = await signInAs('dave', { proxy, provider: ahead });
      expect(done.status).toBe(303);
      // Observed before: taken as now, a fresh session that could enrol a first passkey at once.
      const account = await get(proxy, '/account', done.cookie);
      expect(account.text).toContain('dave@example.com');
      expect(account.text).toContain('id="enrol-sign-in"');
    } finally {
      ahead.authTimeOffsetSec = 0;
    }
  });
});
