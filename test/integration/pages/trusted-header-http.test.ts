/**
 * §8.11 behind an authenticating proxy (sign_in.trusted_header): the header's sign-in is the front
 * proxy's, so a session older than fresh_auth cannot approve with a password here; it must sign in
 * again there, which a visit to /sign-in with the header does. Over plain HTTP, the header sent as
 * the front proxy would (the test's 127.0.0.1 is the trusted peer).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALICE,
  cookieOf,
  get,
  hiddenFields,
  originOf,
  pendingRegistration,
  post,
  startPagesProxy,
} from '../../helpers/page-http.js';
import { softPasskey } from '../../helpers/per-call.js';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';

const TRUSTED = '  trusted_header:\n    name: X-Forwarded-Email\n    from: [127.0.0.1/32]\n';
const AS_ALICE = { 'x-forwarded-email': ALICE };

let p: TestProtocol;
const clock = new TestClock();
beforeAll(async () => {
  p = await startPagesProxy(TRUSTED, { clock });
});
afterAll(() => p.close());

/** The front proxy signs Alice in: a visit to /sign-in carrying the header. */
async function headerSignIn(cookie = ''): Promise<string> {
  const a = await get(p, '/sign-in?return=/device', cookie, AS_ALICE);
  expect(a.status).toBe(303);
  return cookieOf(a);
}

/** The approve form of the request `code`, as Alice's browser behind the front proxy sees it. */
async function approveForm(cookie: string, code: string): Promise<Record<string, string>> {
  const page = await get(p, '/device', cookie, AS_ALICE);
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1] ?? '';
  const shown = await post(p, '/device', { csrf, code }, cookie, undefined, AS_ALICE);
  expect(shown.status).toBe(200);
  return hiddenFields(shown.text, 'approve-form');
}

describe('fresh authentication behind a trusted header (§8.11)', () => {
  it('a session older than fresh_auth cannot approve, even with a password; signing in again at the front can', async () => {
    const r = await pendingRegistration(p);
    const stale = await headerSignIn();
    const fields = await approveForm(stale, r.code);
    clock.advance(6 * 60_000);
    const refused = await post(
      p,
      '/device/approve',
      { ...fields, cap: '0', expires: 'never', password: 'anything' },
      stale,
      undefined,
      AS_ALICE,
    );
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('Sign in again before approving. Nothing was granted.');
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');

    const fresh = await headerSignIn(stale);
    expect(fresh).not.toBe(stale);
    const again = await approveForm(fresh, r.code);
    const approved = await post(
      p,
      '/device/approve',
      { ...again, cap: '0', expires: 'never' },
      fresh,
      undefined,
      AS_ALICE,
    );
    expect(approved.status).toBeLessThan(400);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('active');
  });
});

describe('a passkey confirmation behind a trusted header', () => {
  it('approves, and leaves no session that outlives signing out at the front proxy', async () => {
    const cookie = await headerSignIn();
    const soft = await softPasskey(p, ALICE);
    const r = await pendingRegistration(p, { capabilities: ['create_pet'] });
    const fields = { ...(await approveForm(cookie, r.code)), cap: '0', expires: 'never' };
    const opts = await post(p, '/device/passkey-options', fields, cookie, undefined, AS_ALICE);
    expect(opts.status).toBe(200);
    const challenge = (JSON.parse(opts.text) as { assertion: { challenge: string } }).assertion.challenge;
    const assertion = soft.assert({ challenge, rpId: 'localhost', origin: originOf(p) });
    const approved = await post(p, '/device/approve', { ...fields, assertion }, cookie, undefined, AS_ALICE);
    expect(approved.status).toBe(200);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('active');
    // The header session goes on; no session of another kind was started beside it.
    expect(approved.headers.get('set-cookie')).toBeNull();
    // Signed out at the front: requests come from the trusted peer without the header.
    const after = await get(p, '/account', cookie);
    expect(after.text).not.toContain('id="signed-in-as"');
  });
});
