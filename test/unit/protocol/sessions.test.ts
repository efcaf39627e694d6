/** Approver sessions in a real SQLite store (issue 11): hashed ids, rotation, expiry, CSRF tokens, throttled sign-in. */
import { afterEach, describe, expect, it } from 'vitest';
import { credentialTag, type LocalUser } from '../../../src/config/sign-in.js';
import { LocalSignIn } from '../../../src/protocol/sign-in.js';
import { csrfMatches, Sessions } from '../../../src/protocol/sessions.js';
import { localLimiter, RateLimiter } from '../../../src/util/rate-limit.js';
import { hashPassword, parsePasswordHash } from '../../../src/util/password.js';
import { hotp, totpStep } from '../../../src/util/totp.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';

const HOUR = 3_600_000;
let store: Store | undefined;
afterEach(() => store?.close());

function setup(): { sessions: Sessions; clock: TestClock; store: Store } {
  store = openSqliteStore({ file: tempDbFile() });
  const clock = new TestClock();
  return { sessions: new Sessions(store, clock, 12 * HOUR), clock, store };
}

describe('sessions', () => {
  it('stores only a hash of the id: the cookie value itself finds nothing in the table', async () => {
    const { sessions, store } = setup();
    const { cookieValue, session } = await sessions.start('alice', 'password');
    expect(await store.session(cookieValue)).toBeUndefined();
    expect(session.idHash).not.toBe(cookieValue);
    expect((await sessions.find(cookieValue))?.userId).toBe('alice');
  });

  it('rotates the id at sign-in: the cookie from before sign-in opens nothing afterwards (fixation)', async () => {
    const { sessions } = setup();
    const before = (await sessions.start('mallory', 'password')).cookieValue;
    const after = (await sessions.start('alice', 'password', before)).cookieValue;
    expect(after).not.toBe(before);
    expect(await sessions.find(before)).toBeUndefined();
    expect((await sessions.find(after))?.userId).toBe('alice');
  });

  it('a session standing in for another (notAfter) never outlives it', async () => {
    const { sessions, clock } = setup();
    const signedIn = (await sessions.start('alice', 'oidc')).session;
    clock.advance(10 * HOUR);
    const { cookieValue, session } = await sessions.start('alice', 'passkey', undefined, {
      notAfter: signedIn.expiresAt,
    });
    expect(session.expiresAt).toBe(signedIn.expiresAt);
    expect(session.authenticatedAt).toBe(clock.now());
    clock.advance(2 * HOUR);
    expect(await sessions.find(cookieValue)).toBeUndefined();
  });

  it('an expired session is not found, and the sweep deletes it', async () => {
    const { sessions, clock, store } = setup();
    const { cookieValue, session } = await sessions.start('alice', 'password');
    clock.advance(12 * HOUR);
    expect(await sessions.find(cookieValue)).toBeUndefined();
    expect(await sessions.sweep(100)).toBe(1);
    expect(await store.session(session.idHash)).toBeUndefined();
  });

  it('refuses malformed and guessed cookie values without a lookup hit', async () => {
    const { sessions } = setup();
    await sessions.start('alice', 'password');
    expect(await sessions.find(undefined)).toBeUndefined();
    expect(await sessions.find("' OR 1=1 --")).toBeUndefined();
    expect(await sessions.find('A'.repeat(43))).toBeUndefined();
  });

  it('freshness follows sign-in time, not use (§8.11)', async () => {
    const { sessions, clock } = setup();
    const { session } = await sessions.start('alice', 'password');
    clock.advance(5 * 60_000);
    expect(sessions.isFresh(session, 5 * 60_000)).toBe(true);
    clock.advance(1);
    expect(sessions.isFresh(session, 5 * 60_000)).toBe(false);
  });

  it('CSRF tokens are per session and compared exactly', async () => {
    const { sessions } = setup();
    const a = (await sessions.start('alice', 'password')).session;
    const b = (await sessions.start('bob', 'password')).session;
    expect(csrfMatches(a, a.csrfToken)).toBe(true);
    expect(csrfMatches(a, b.csrfToken)).toBe(false);
    expect(csrfMatches(a, '')).toBe(false);
    expect(csrfMatches(a, null)).toBe(false);
    expect(csrfMatches(a, `${a.csrfToken}x`)).toBe(false);
  });
});

describe('local sign-in', () => {
  const FAST = { N: 2 ** 14, r: 8, p: 1 };
  const KEY = Buffer.from('12345678901234567890');

  async function signIn(
    withTotp = false,
  ): Promise<{ local: LocalSignIn; clock: TestClock; alice: LocalUser }> {
    const clock = new TestClock(1_111_111_111_000);
    const hash = parsePasswordHash(await hashPassword('correct horse', FAST));
    const users = new Map([
      ['alice', { userId: 'alice', passwordHash: hash, ...(withTotp ? { totpKey: KEY } : {}) }],
    ]);
    store = openSqliteStore({ file: tempDbFile() });
    const local = new LocalSignIn(users, localLimiter(new RateLimiter(clock)), store, clock);
    return { local, clock, alice: users.get('alice') as LocalUser };
  }

  it('a wrong password and an unknown user get the same answer', async () => {
    const { local, alice } = await signIn();
    expect(await local.attempt('alice', 'wrong', '', '192.0.2.1')).toEqual({ kind: 'wrong' });
    expect(await local.attempt('nobody', 'correct horse', '', '192.0.2.1')).toEqual({ kind: 'wrong' });
    expect(await local.attempt('alice', 'correct horse', '', '192.0.2.1')).toEqual({
      kind: 'ok',
      userId: 'alice',
      method: 'password',
      credentialTag: credentialTag(alice),
    });
  });

  it('throttles an account after 5 failures, even from fresh addresses, and even for the right password', async () => {
    const { local } = await signIn();
    for (let i = 0; i < 5; i++) {
      expect((await local.attempt('alice', `guess${i}`, '', `192.0.2.${i}`)).kind).toBe('wrong');
    }
    const next = await local.attempt('alice', 'correct horse', '', '198.51.100.7');
    expect(next.kind).toBe('throttled');
  });

  it('throttles one address spraying many accounts after 20 failures', async () => {
    const { local } = await signIn();
    for (let i = 0; i < 20; i++) await local.attempt(`user${i}`, 'password1', '', '192.0.2.9');
    expect((await local.attempt('alice', 'correct horse', '', '192.0.2.9')).kind).toBe('throttled');
    expect((await local.attempt('alice', 'correct horse', '', '192.0.2.10')).kind).toBe('ok');
  });

  it('holds concurrent guesses to the budget: 16 at once, 5 get a password check, 11 are throttled', async () => {
    const { local } = await signIn();
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => local.attempt('alice', `guess${i}`, '', `192.0.2.${i}`)),
    );
    // Observed before: 16 wrong, none throttled (each checked the budget before any was charged).
    expect(results.filter((r) => r.kind === 'wrong')).toHaveLength(5);
    expect(results.filter((r) => r.kind === 'throttled')).toHaveLength(11);
  });

  it('gives a successful sign-in’s reservation back: five right passwords leave the budget whole', async () => {
    const { local } = await signIn();
    for (let i = 0; i < 5; i++)
      expect((await local.attempt('alice', 'correct horse', '', '192.0.2.1')).kind).toBe('ok');
    for (let i = 0; i < 5; i++)
      expect((await local.attempt('alice', `guess${i}`, '', '192.0.2.1')).kind).toBe('wrong');
    expect((await local.attempt('alice', 'correct horse', '', '192.0.2.1')).kind).toBe('throttled');
  });

  it('counts an IPv6 sprayer by its /64: a fresh address in it is throttled, another /64 is not', async () => {
    const { local } = await signIn();
    for (let i = 0; i < 20; i++) await local.attempt(`user${i}`, 'password1', '', `2001:db8:5:6::${i + 1}`);
    expect((await local.attempt('alice', 'correct horse', '', '2001:db8:5:6:abcd::1')).kind).toBe(
      'throttled',
    );
    expect((await local.attempt('alice', 'correct horse', '', '2001:db8:5:7::1')).kind).toBe('ok');
  });

  it('with a TOTP secret: the password alone fails, a current code passes once, a replayed code fails', async () => {
    const { local, clock, alice } = await signIn(true);
    expect(local.wantsTotp('alice')).toBe(true);
    expect(local.wantsTotp('nobody')).toBe(false);
    const code = hotp(KEY, totpStep(clock.now()));
    expect((await local.attempt('alice', 'correct horse', '', '192.0.2.1')).kind).toBe('wrong');
    expect((await local.attempt('alice', 'wrong', code, '192.0.2.1')).kind).toBe('wrong');
    expect(await local.attempt('alice', 'correct horse', code, '192.0.2.1')).toEqual({
      kind: 'ok',
      userId: 'alice',
      method: 'password+totp',
      credentialTag: credentialTag(alice),
    });
    expect((await local.attempt('alice', 'correct horse', code, '192.0.2.1')).kind).toBe('wrong');
  });

  it('a code is refused after a later step was used, and a used code stays refused across instances of the store', async () => {
    const { local, clock } = await signIn(true);
    const step = totpStep(clock.now());
    expect((await local.attempt('alice', 'correct horse', hotp(KEY, step + 1), '192.0.2.1')).kind).toBe('ok');
    // The previous step's code still matches (one step of drift), but a later one was used.
    expect((await local.attempt('alice', 'correct horse', hotp(KEY, step), '192.0.2.1')).kind).toBe('wrong');
    // Another LocalSignIn on the same store (a restart, or another replica) refuses it too.
    const users = new Map([
      [
        'alice',
        { userId: 'alice', passwordHash: parsePasswordHash(await hashPassword('pw', FAST)), totpKey: KEY },
      ],
    ]);
    const again = new LocalSignIn(users, localLimiter(new RateLimiter(clock)), store as Store, clock);
    expect((await again.attempt('alice', 'pw', hotp(KEY, step + 1), '192.0.2.1')).kind).toBe('wrong');
  });
});
