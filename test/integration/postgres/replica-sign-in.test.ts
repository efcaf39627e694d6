/**
 * Signing in across replicas (issue 13): the approval pages keep no state of their own, so a
 * person's requests may land on any replica behind a round-robin Service. Two real proxy processes
 * on one PostgreSQL, a client sending each step of a ceremony to the other replica:
 *
 * - a TOTP code accepted by one replica is refused by the other (RFC 6238 §5.2: good once);
 * - a passkey enrolment whose WebAuthn challenge one replica issued is verified by the other, and
 *   so is a passkey sign-in; the same assertion sent again, to either, is refused (single use);
 * - an OpenID Connect sign-in begun on one replica (its state, nonce and PKCE verifier stored) is
 *   finished by the other at a real provider's callback, once, and only for the browser that
 *   began it; the session then works on both.
 *
 * The browser's side is played by fetch and a software authenticator (test/helpers/webauthn.ts),
 * with the `Origin` a browser on the shared issuer would send.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../../src/util/password.js';
import { hotp, totpStep } from '../../../src/util/totp.js';
import { CLI, ensureBuiltCli } from '../../helpers/cli-process.js';
import { IdpBrowser, startTestIdp, type TestIdp } from '../../helpers/oidc-provider.js';
import { startReplicaCluster, type Replica, type ReplicaCluster } from '../../helpers/replicas.js';
import { SoftAuthenticator } from '../../helpers/webauthn.js';
import { PASSWORD } from '../../helpers/local-sign-in.js';

/** Passkeys need https or a `localhost` name: the replicas' shared issuer is one. */
const ISSUER = 'http://replicas.localhost';
const RP = { rpId: 'replicas.localhost', origin: ISSUER };
/** RFC 6238's test secret (20 bytes), base32. */
const TOTP_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
const TOTP_KEY = Buffer.from('12345678901234567890');

let set: ReplicaCluster;
let a: Replica;
let b: Replica;
let idp: TestIdp;

beforeAll(async () => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const users = ['alice', 'bob'].map(
    (u) => `      - user_id: ${u}\n        password_hash: "${hash}"\n        totp_secret: ${TOTP_SECRET}`,
  );
  idp = await startTestIdp({
    redirectUris: [`${ISSUER}/sign-in/oidc/callback`],
    accounts: {
      carol: { email: 'carol@example.com', email_verified: true, preferred_username: 'carol', name: 'Carol' },
    },
    now: () => Date.now(),
  });
  const oidc = [
    '  oidc:',
    `    issuer: ${idp.issuer}`,
    `    client_id: ${idp.clientId}`,
    `    client_secret: { value: ${idp.clientSecret} }`,
  ];
  set = await startReplicaCluster({
    policy: 'rate_limits:\n  per_ip: null\n',
    config: ['sign_in:', '  fresh_auth: 5m', '  local:', '    users:', ...users, ...oidc].join('\n'),
    issuer: ISSUER,
  });
  [a, b] = set.replicas as [Replica, Replica];
});
afterAll(async () => {
  await set?.close();
  await idp?.close();
});

interface PageReply {
  readonly status: number;
  readonly location: string | null;
  readonly cookie: string | undefined;
  readonly text: string;
}

/** A page request as the browser sends it: same-origin form posts, the session cookie if any. */
async function page(
  on: Replica,
  method: 'GET' | 'POST',
  path: string,
  form?: Record<string, string>,
  cookie?: string,
): Promise<PageReply> {
  const res = await fetch(`${on.url}${path}`, {
    method,
    redirect: 'manual',
    headers: {
      ...(form ? { 'content-type': 'application/x-www-form-urlencoded', origin: ISSUER } : {}),
      ...(cookie ? { cookie } : {}),
    },
    ...(form ? { body: new URLSearchParams(form).toString() } : {}),
  });
  const set = res.headers.get('set-cookie');
  return {
    status: res.status,
    location: res.headers.get('location'),
    cookie: set ? set.split(';')[0] : undefined,
    text: await res.text(),
  };
}

const signInForm = (user: string, totp: string): Record<string, string> => ({
  user_id: user,
  password: PASSWORD,
  totp,
  return: '/account',
});

/** The session's CSRF token, from a form of the account page (served by `on`). */
async function csrfOf(on: Replica, cookie: string): Promise<string> {
  const account = await page(on, 'GET', '/account', undefined, cookie);
  expect(account.status).toBe(200);
  const token = /name="csrf" value="([^"]+)"/.exec(account.text)?.[1];
  expect(token).toBeDefined();
  return token as string;
}

describe('signing in across replicas on one PostgreSQL', () => {
  it('a TOTP code accepted by one replica is refused by the other', async () => {
    const code = hotp(TOTP_KEY, totpStep(Date.now()));
    const first = await page(a, 'POST', '/sign-in', signInForm('alice', code));
    expect(first.status).toBe(303);
    expect(first.cookie).toMatch(/^aap_session=/);
    const again = await page(b, 'POST', '/sign-in', signInForm('alice', code));
    expect(again.status).toBe(400);
    expect(again.text).toContain('one-time code is not right');
    expect(again.cookie).toBeUndefined();
  });

  it('a WebAuthn challenge issued by one replica is verified by the other, once', async () => {
    // bob signs in on B with the next step's code (alice's test may have used the current one).
    const code = hotp(TOTP_KEY, totpStep(Date.now()) + 1);
    const signedIn = await page(b, 'POST', '/sign-in', signInForm('bob', code));
    expect(signedIn.status).toBe(303);
    const cookie = signedIn.cookie as string;
    const csrf = await csrfOf(a, cookie);

    // Enrolment: the options (and challenge) from A, the new passkey verified and stored by B.
    const fields = { csrf, name: 'Replicated key' };
    const options = await fetch(`${a.url}/account/passkeys/options`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ISSUER, cookie },
      body: new URLSearchParams(fields).toString(),
    });
    expect(options.status).toBe(200);
    const { registration } = (await options.json()) as {
      registration: { challenge: string; user: { id: string } };
    };
    const authenticator = new SoftAuthenticator(registration.user.id);
    const answer = authenticator.register({ ...RP, challenge: registration.challenge });
    const added = await page(b, 'POST', '/account/passkeys', { ...fields, registration: answer }, cookie);
    expect(added.status).toBe(200);
    expect(added.text).toContain('Passkey &quot;Replicated key&quot; added.');

    // Sign-in with the passkey: the challenge from B, the assertion verified by A, once.
    const signInOptions = await fetch(`${b.url}/sign-in/passkey/options`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ISSUER },
      body: '',
    });
    expect(signInOptions.status).toBe(200);
    const { assertion } = (await signInOptions.json()) as { assertion: { challenge: string } };
    const signature = authenticator.assert({ ...RP, challenge: assertion.challenge });
    const form = { assertion: signature, return: '/account' };
    const bySignature = await page(a, 'POST', '/sign-in/passkey', form);
    expect(bySignature.status).toBe(303);
    expect(bySignature.cookie).toMatch(/^aap_session=/);
    for (const replica of [b, a]) {
      const replay = await page(replica, 'POST', '/sign-in/passkey', form);
      expect(replay.status).toBe(400);
      expect(replay.text).toContain('unknown, was already used, or has expired');
    }
  });
});

describe('OpenID Connect across replicas', () => {
  it('begun on one replica, finished on the other at the callback, once, for that browser only', async () => {
    const begin = await page(a, 'GET', '/sign-in/oidc?return=/account');
    expect(begin.status).toBe(303);
    const browser = begin.cookie as string;
    expect(browser).toBeDefined();
    const authorize = begin.location as string;
    expect(authorize.startsWith(`${idp.issuer}/`)).toBe(true);

    const callback = new URL(await new IdpBrowser(idp, 'carol').follow(authorize));
    expect(`${callback.origin}${callback.pathname}`).toBe(`${ISSUER}/sign-in/oidc/callback`);
    const path = `${callback.pathname}${callback.search}`;

    // Another browser at B with the same callback: not its sign-in, so nothing (and it stays).
    const stranger = await page(b, 'GET', path, undefined, 'aap_oidc=someone-else');
    expect(stranger.status).toBe(400);
    expect(stranger.cookie ?? '').not.toMatch(/^aap_session=/);

    const done = await page(b, 'GET', path, undefined, browser);
    expect(done.status).toBe(303);
    expect(done.location).toBe('/account');
    const session = done.cookie as string;
    expect(session).toMatch(/^aap_session=/);
    for (const replica of [a, b]) {
      const account = await page(replica, 'GET', '/account', undefined, session);
      expect(account.text).toContain('carol');
      expect(account.text).toContain('name="csrf"');
    }

    // The state was taken: the same callback again, at either replica, signs nobody in.
    for (const replica of [a, b]) {
      const again = await page(replica, 'GET', path, undefined, browser);
      expect(again.status).toBe(400);
      expect(again.cookie ?? '').not.toMatch(/^aap_session=/);
    }
  });
});
