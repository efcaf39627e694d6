/**
 * Passkeys on the server side (issue 11, §8.11) against a real SQLite store, with a software
 * authenticator making real P-256 signatures: enrolment, assertions bound to a purpose and a
 * binding, single-use and short-lived challenges and their bounds, user verification, counters.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ProtocolError } from '../../../src/errors.js';
import { enrolmentCodeHash, newEnrolmentCode } from '../../../src/protocol/enrolment-codes.js';
import {
  BAD_CODE,
  CHALLENGE_BOUNDS,
  enrolmentNeeds,
  MAX_PASSKEYS_PER_USER,
  mayStillSignIn,
  Passkeys,
  relyingParty,
  type CeremonyScope,
  type RegistrationResult,
} from '../../../src/protocol/passkeys.js';
import { Sessions } from '../../../src/protocol/sessions.js';
import { ChallengeStore } from '../../../src/protocol/webauthn-challenges.js';
import type { SignInSettings } from '../../../src/config/sign-in.js';
import { MIGRATIONS } from '../../../src/storage/migrations.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { TestClock } from '../../helpers/protocol.js';
import { tempDbFile } from '../../helpers/proxy.js';
import { SoftAuthenticator } from '../../helpers/webauthn.js';

const RP = { id: 'proxy.example', origin: 'https://proxy.example', name: 'Pets' };
const AT = { rpId: RP.id, origin: RP.origin };

let store: Store | undefined;
afterEach(() => store?.close());

function setup(bounds = CHALLENGE_BOUNDS): { passkeys: Passkeys; clock: TestClock; store: Store } {
  store = openSqliteStore({ file: tempDbFile() });
  const clock = new TestClock();
  return { passkeys: new Passkeys(store, clock, () => RP, bounds), clock, store };
}

const scope = (over: Partial<CeremonyScope> = {}): CeremonyScope => ({
  purpose: 'approve',
  owner: 'session:s1',
  userId: 'alice',
  binding: 'approve apr_1 hash fields',
  ...over,
});

/** Enrols a software authenticator for `userId`; returns it. */
async function enrolled(passkeys: Passkeys, userId = 'alice'): Promise<SoftAuthenticator> {
  const s = scope({ purpose: 'enrol', userId, binding: 'enrol x' });
  const options = await passkeys.registrationOptions(s);
  const authenticator = new SoftAuthenticator(options.user.id);
  const result = await passkeys.register(
    s,
    authenticator.register({ ...AT, challenge: options.challenge }),
    'Key',
  );
  expect(result).toMatchObject({ ok: true });
  return authenticator;
}

async function answer(
  passkeys: Passkeys,
  a: SoftAuthenticator,
  issued: CeremonyScope,
  options: { uv?: boolean; origin?: string; rpId?: string } = {},
): Promise<string> {
  const { challenge } = await passkeys.assertionOptions(issued);
  return a.assert({ ...AT, ...options, challenge });
}

describe('enrolment', () => {
  it('stores the credential with its public key, counter and a random user handle (not the user id)', async () => {
    const { passkeys, store } = setup();
    const a = await enrolled(passkeys);
    const [stored] = await store.passkeys('alice');
    expect(stored).toMatchObject({
      id: a.id,
      userId: 'alice',
      counter: 0,
      transports: ['internal'],
      name: 'Key',
    });
    expect(stored?.publicKey).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(stored?.userHandle ?? '', 'base64url')).toHaveLength(32);
    expect(stored?.userHandle).not.toContain('alice');
  });

  it('asks the authenticator for user verification and a discoverable credential', async () => {
    const { passkeys } = setup();
    const options = await passkeys.registrationOptions(scope({ purpose: 'enrol' }));
    expect(options.authenticatorSelection).toMatchObject({
      userVerification: 'required',
      residentKey: 'preferred',
    });
    expect(options.rp).toEqual({ id: RP.id, name: RP.name });
  });

  it('refuses an enrolment whose authenticator did not verify the user', async () => {
    const { passkeys, store } = setup();
    const s = scope({ purpose: 'enrol' });
    const options = await passkeys.registrationOptions(s);
    const a = new SoftAuthenticator();
    const result = await passkeys.register(
      s,
      a.register({ ...AT, challenge: options.challenge, uv: false }),
      '',
    );
    expect(result).toMatchObject({ ok: false });
    expect(await store.passkeys('alice')).toHaveLength(0);
  });

  it('refuses an enrolment answered from another origin (a phishing site relaying the ceremony)', async () => {
    const { passkeys, store } = setup();
    const s = scope({ purpose: 'enrol' });
    const options = await passkeys.registrationOptions(s);
    const a = new SoftAuthenticator();
    const answerText = a.register({
      ...AT,
      origin: 'https://proxy.example.evil',
      challenge: options.challenge,
    });
    expect((await passkeys.register(s, answerText, '')).ok).toBe(false);
    expect(await store.passkeys('alice')).toHaveLength(0);
  });

  it(`stops at ${MAX_PASSKEYS_PER_USER} passkeys per user`, async () => {
    const { passkeys } = setup();
    for (let i = 0; i < MAX_PASSKEYS_PER_USER; i++) await enrolled(passkeys);
    await expect(passkeys.registrationOptions(scope({ purpose: 'enrol' }))).rejects.toThrow(ProtocolError);
  });

  it(`two enrolments finishing at once cannot pass ${MAX_PASSKEYS_PER_USER} either, and each added one is recorded`, async () => {
    const { passkeys, store } = setup();
    for (let i = 0; i < MAX_PASSKEYS_PER_USER - 1; i++) await enrolled(passkeys);
    // Both ceremonies begin while there is room for one more; then both answers arrive together.
    const answers = await Promise.all(
      ['enrol a', 'enrol b'].map(async (binding) => {
        const s = scope({ purpose: 'enrol', binding });
        const options = await passkeys.registrationOptions(s);
        const authenticator = new SoftAuthenticator(options.user.id);
        return { s, response: authenticator.register({ ...AT, challenge: options.challenge }) };
      }),
    );
    const results = await Promise.all(answers.map((a) => passkeys.register(a.s, a.response, 'Late')));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.find((r) => !r.ok)).toMatchObject({ reason: expect.stringContaining('the most allowed') });
    expect(await store.passkeys('alice')).toHaveLength(MAX_PASSKEYS_PER_USER);
    const added = await store.activity({ limit: 100 });
    expect(added.filter((r) => r.type === 'user.passkey_added')).toHaveLength(MAX_PASSKEYS_PER_USER);
  });

  it('keeps the name as one line of plain text, capped; an empty name gets a dated default', async () => {
    const { passkeys, store } = setup();
    const s = scope({ purpose: 'enrol' });
    let options = await passkeys.registrationOptions(s);
    await passkeys.register(
      s,
      new SoftAuthenticator().register({ ...AT, challenge: options.challenge }),
      `a\nb${'x'.repeat(100)}`,
    );
    options = await passkeys.registrationOptions(s);
    await passkeys.register(
      s,
      new SoftAuthenticator().register({ ...AT, challenge: options.challenge }),
      '   ',
    );
    const names = (await store.passkeys('alice')).map((k) => k.name).sort();
    expect(names[0]).toMatch(/^Passkey added \d{4}-\d{2}-\d{2}$/);
    expect(names[1]).toMatch(/^a bx+$/);
    expect(names[1]).toHaveLength(64);
  });
});

describe('assertions (§8.11)', () => {
  it('accepts a user-verified assertion for exactly the scope it was issued for, and records the use', async () => {
    const { passkeys, store, clock } = setup();
    const a = await enrolled(passkeys);
    const result = await passkeys.verifyAssertion(scope(), await answer(passkeys, a, scope()));
    expect(result).toMatchObject({ ok: true, passkey: { id: a.id, userId: 'alice' } });
    expect(await store.passkey(a.id)).toMatchObject({ counter: 1, lastUsedAt: clock.now() });
  });

  it('asks for user verification in the options, and refuses an assertion without the UV flag', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    const options = await passkeys.assertionOptions(scope());
    expect(options.userVerification).toBe('required');
    expect(options.allowCredentials).toEqual([{ id: a.id, type: 'public-key', transports: ['internal'] }]);
    const text = a.assert({ ...AT, challenge: options.challenge, uv: false });
    const result = await passkeys.verifyAssertion(scope(), text);
    expect(result).toMatchObject({
      ok: false,
      reason: expect.stringContaining('User verification required'),
    });
  });

  it('a challenge is good once: the same assertion replayed is refused', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    const text = await answer(passkeys, a, scope());
    expect((await passkeys.verifyAssertion(scope(), text)).ok).toBe(true);
    expect(await passkeys.verifyAssertion(scope(), text)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('already used'),
    });
  });

  it('refuses an answer for another approval, purpose, session or user, and the attempt uses the challenge up', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    for (const other of [
      scope({ binding: 'approve apr_2 hash fields' }),
      scope({ purpose: 'sign-in', userId: null }),
      scope({ purpose: 'confirm' }),
      scope({ owner: 'session:s2' }),
      scope({ userId: 'bob' }),
    ]) {
      const text = await answer(passkeys, a, scope());
      expect((await passkeys.verifyAssertion(other, text)).ok).toBe(false);
      expect((await passkeys.verifyAssertion(scope(), text)).ok).toBe(false);
    }
  });

  it("refuses another user's passkey for an approval, even when the challenge was theirs to answer", async () => {
    const { passkeys } = setup();
    await enrolled(passkeys, 'alice');
    const bobs = await enrolled(passkeys, 'bob');
    const { challenge } = await passkeys.assertionOptions(scope());
    const text = bobs.assert({ ...AT, challenge });
    expect(await passkeys.verifyAssertion(scope(), text)).toMatchObject({
      ok: false,
      reason: 'That passkey is not one of yours on this server.',
    });
  });

  it('refuses an assertion from another origin or for another relying party', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    const fromElsewhere = await answer(passkeys, a, scope(), { origin: 'http://localhost:8080' });
    expect((await passkeys.verifyAssertion(scope(), fromElsewhere)).ok).toBe(false);
    const otherRp = await answer(passkeys, a, scope(), { rpId: 'evil.example' });
    expect((await passkeys.verifyAssertion(scope(), otherRp)).ok).toBe(false);
  });

  it('refuses a challenge answered after it expired (2 minutes)', async () => {
    const { passkeys, clock } = setup();
    const a = await enrolled(passkeys);
    const text = await answer(passkeys, a, scope());
    clock.advance(CHALLENGE_BOUNDS.ttlMs);
    expect(await passkeys.verifyAssertion(scope(), text)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('expired'),
    });
  });

  it('refuses a signature counter that went backwards (a cloned authenticator)', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    a.counter = 10;
    expect((await passkeys.verifyAssertion(scope(), await answer(passkeys, a, scope()))).ok).toBe(true);
    a.counter = 5;
    expect(await passkeys.verifyAssertion(scope(), await answer(passkeys, a, scope()))).toMatchObject({
      ok: false,
      reason: expect.stringContaining('counter'),
    });
  });

  it("refuses a forged signature and a user handle that is not the credential's", async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    const json = JSON.parse(await answer(passkeys, a, scope()));
    const signature = Buffer.from(json.response.signature, 'base64url');
    signature[10] = (signature[10] ?? 0) ^ 0xff;
    json.response.signature = signature.toString('base64url');
    expect((await passkeys.verifyAssertion(scope(), JSON.stringify(json))).ok).toBe(false);
    const handle = JSON.parse(await answer(passkeys, a, scope()));
    handle.response.userHandle = Buffer.from('someone-else').toString('base64url');
    expect((await passkeys.verifyAssertion(scope(), JSON.stringify(handle))).ok).toBe(false);
  });

  it('answers garbage with a refusal, never an exception', async () => {
    const { passkeys } = setup();
    await enrolled(passkeys);
    for (const text of [
      '',
      'null',
      '[]',
      '{"response":1}',
      '{"response":{"clientDataJSON":"!!"}}',
      'x'.repeat(20_000),
    ]) {
      expect((await passkeys.verifyAssertion(scope(), text)).ok).toBe(false);
    }
  });

  it('without a passkey, no approval options are issued', async () => {
    const { passkeys } = setup();
    await expect(passkeys.assertionOptions(scope())).rejects.toThrow('no passkey yet');
  });

  it('usernameless sign-in offers no credential list and accepts any enrolled passkey', async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys, 'carol');
    const signIn = scope({ purpose: 'sign-in', userId: null, owner: 'ip:127.0.0.1', binding: 'sign-in' });
    const options = await passkeys.assertionOptions(signIn);
    expect(options.allowCredentials).toBeUndefined();
    const result = await passkeys.verifyAssertion(signIn, a.assert({ ...AT, challenge: options.challenge }));
    expect(result).toMatchObject({ ok: true, passkey: { userId: 'carol' } });
  });

  it('removes a passkey only for its owner, ending their other sessions (the passkey may have signed a thief in)', async () => {
    const { passkeys, store, clock } = setup();
    const sessions = new Sessions(store, clock, 60_000);
    const a = await enrolled(passkeys, 'alice');
    const own = await sessions.start('alice', 'password');
    const thief = await sessions.start('alice', 'passkey');
    const bobs = await sessions.start('bob', 'password');
    expect(await passkeys.remove('bob', a.id, bobs.session)).toBe(false);
    expect(await store.passkeys('alice')).toHaveLength(1);
    expect(await sessions.find(thief.cookieValue)).toBeDefined();
    expect(await passkeys.remove('alice', a.id, own.session)).toBe(true);
    expect(await store.passkeys('alice')).toHaveLength(0);
    expect(await sessions.find(thief.cookieValue)).toBeUndefined();
    expect(await sessions.find(own.cookieValue)).toMatchObject({
      userId: 'alice',
      csrfToken: own.session.csrfToken,
    });
    expect(await sessions.find(bobs.cookieValue)).toBeDefined();
  });
});

describe('first passkey with an operator code (sign_in.first_passkey: operator_code)', () => {
  function setupWithCodes(): { passkeys: Passkeys; clock: TestClock; store: Store } {
    store = openSqliteStore({ file: tempDbFile() });
    const clock = new TestClock();
    return { passkeys: new Passkeys(store, clock, () => RP, CHALLENGE_BOUNDS, true), clock, store };
  }

  /** One enrolment ceremony for alice, answered with `code`. */
  async function enrolWith(passkeys: Passkeys, code: string): Promise<RegistrationResult> {
    const s = scope({ purpose: 'enrol', binding: `enrol ${code}` });
    const options = await passkeys.registrationOptions(s);
    const a = new SoftAuthenticator(options.user.id);
    return passkeys.register(s, a.register({ ...AT, challenge: options.challenge }), 'Key', code);
  }

  const issue = (s: Store, code: string, expiresAt: number): Promise<void> =>
    s.write((tx) => tx.putEnrolmentCode('alice', enrolmentCodeHash(code) as string, expiresAt));

  it('a first passkey needs the code; the code enrols one passkey and is then gone', async () => {
    const { passkeys, store, clock } = setupWithCodes();
    const code = newEnrolmentCode();
    await issue(store, code, clock.now() + 60_000);
    expect(enrolmentNeeds(false, true, passkeys.firstNeedsCode)).toBe('code');
    for (const wrong of ['', 'not a code', newEnrolmentCode()]) {
      expect(await enrolWith(passkeys, wrong)).toEqual({ ok: false, reason: BAD_CODE });
    }
    expect(await store.passkeys('alice')).toEqual([]);
    expect(await passkeys.enrolmentCodeHolds('alice', code.toLowerCase())).toBe(true); // a refusal kept it
    expect(await enrolWith(passkeys, code.toLowerCase())).toMatchObject({ ok: true });
    expect(await passkeys.enrolmentCodeHolds('alice', code)).toBe(false);
    expect(await store.passkeys('alice')).toHaveLength(1);
    // A second passkey needs no code (a confirmation with the first instead, passkey-account.ts).
    expect(enrolmentNeeds(true, true, passkeys.firstNeedsCode)).toBe('confirm');
  });

  it('an expired code enrols nothing; without the setting no code is asked', async () => {
    const { passkeys, store, clock } = setupWithCodes();
    const code = newEnrolmentCode();
    await issue(store, code, clock.now() + 60_000);
    clock.advance(60_000);
    expect(await enrolWith(passkeys, code)).toEqual({ ok: false, reason: BAD_CODE });
    expect(await store.passkeys('alice')).toEqual([]);
    await store.close(); // afterEach closes the next one
    const plain = setup();
    expect(enrolmentNeeds(false, true, plain.passkeys.firstNeedsCode)).toBe('ok');
    expect(await enrolWith(plain.passkeys, '')).toMatchObject({ ok: true });
  });
});

describe('challenge bounds', () => {
  it("per owner: a sixth open challenge evicts that owner's oldest, not anyone else's", async () => {
    const { passkeys } = setup();
    const a = await enrolled(passkeys);
    const first = await answer(passkeys, a, scope());
    const other = await answer(passkeys, a, scope({ owner: 'session:s2' }));
    for (let i = 0; i < CHALLENGE_BOUNDS.perOwner; i++) await passkeys.assertionOptions(scope());
    expect((await passkeys.verifyAssertion(scope(), first)).ok).toBe(false);
    expect((await passkeys.verifyAssertion(scope({ owner: 'session:s2' }), other)).ok).toBe(true);
  });

  it("in total: once full of live challenges a new one is refused (503), never someone else's evicted", async () => {
    const { passkeys, clock } = setup({ ttlMs: 60_000, perOwner: 2, total: 4 });
    const a = await enrolled(passkeys);
    const mine = await answer(passkeys, a, scope());
    // Strangers' (ip:) challenges fill their own total; the signed-in one (session:) is not counted.
    for (const owner of ['ip:1', 'ip:2', 'ip:3', 'ip:4']) {
      await passkeys.assertionOptions(scope({ owner, purpose: 'sign-in', userId: null }));
    }
    const full = passkeys.assertionOptions(scope({ owner: 'ip:5', purpose: 'sign-in', userId: null }));
    await expect(full).rejects.toMatchObject({ code: 'temporarily_unavailable', status: 503 });
    expect((await passkeys.verifyAssertion(scope(), mine)).ok).toBe(true);
    // Once they expire, they no longer count: four new ones fit, a fifth is refused again.
    clock.advance(60_000);
    for (const owner of ['ip:5', 'ip:6', 'ip:7', 'ip:8']) {
      await passkeys.assertionOptions(scope({ owner, purpose: 'sign-in', userId: null }));
    }
    const again = passkeys.assertionOptions(scope({ owner: 'ip:9', purpose: 'sign-in', userId: null }));
    await expect(again).rejects.toMatchObject({ code: 'temporarily_unavailable', status: 503 });
  });

  it("the store keeps only a hash of each challenge, sweeps expired ones, and evicts an owner's oldest", async () => {
    const { clock, store } = setup();
    const challenges = new ChallengeStore<number>(store, clock, { ttlMs: 1000, perOwner: 3, total: 10 });
    expect(await challenges.issue('o', 'c1', 1)).toBe(true);
    expect(await challenges.issue('o', 'c2', 2)).toBe(true);
    expect(await store.takeChallenge('c1', clock.now())).toBeUndefined();
    clock.advance(1000);
    expect(await store.deleteExpiredSignInState(clock.now(), 100)).toBe(2);
    for (const c of ['c3', 'c4', 'c5', 'c6']) await challenges.issue('o', c, 0);
    expect(await challenges.take('c3')).toBeUndefined();
    expect((await challenges.take('c6'))?.data).toBe(0);
    expect(await challenges.take('c6')).toBeUndefined();
  });
});

describe('relying party and rules', () => {
  it('comes from the issuer; none on an IP address or on plain http other than localhost', () => {
    expect(relyingParty('https://pets.example.com', 'Pets')).toEqual({
      id: 'pets.example.com',
      origin: 'https://pets.example.com',
      name: 'Pets',
    });
    expect(relyingParty('http://localhost:8080', 'P')).toMatchObject({
      id: 'localhost',
      origin: 'http://localhost:8080',
    });
    expect(relyingParty('http://app.localhost:8080', 'P')?.id).toBe('app.localhost');
    expect(relyingParty('http://127.0.0.1:8080', 'P')).toBeUndefined();
    expect(relyingParty('https://[::1]:8443', 'P')).toBeUndefined();
    expect(relyingParty('https://10.0.0.1', 'P')).toBeUndefined();
    expect(relyingParty('http://pets.example.com', 'P')).toBeUndefined();
    expect(relyingParty('not a url', 'P')).toBeUndefined();
  });

  it('without a relying party, no ceremony starts', async () => {
    store = openSqliteStore({ file: tempDbFile() });
    const passkeys = new Passkeys(store, new TestClock(), () => undefined);
    expect(passkeys.available).toBe(false);
    await expect(passkeys.registrationOptions(scope({ purpose: 'enrol' }))).rejects.toThrow('not available');
    expect((await passkeys.verifyAssertion(scope(), '{}')).ok).toBe(false);
  });

  it('adding a passkey: confirm with an existing one if any, else a fresh sign-in', () => {
    expect(enrolmentNeeds(true, true)).toBe('confirm');
    expect(enrolmentNeeds(true, false)).toBe('confirm');
    expect(enrolmentNeeds(false, true)).toBe('ok');
    expect(enrolmentNeeds(false, false)).toBe('sign-in-again');
  });

  it('a passkey signs in only a configured local account', () => {
    const settings = { localUsers: new Map([['alice', {}]]), trustedHeader: { name: 'x', from: [] } };
    expect(mayStillSignIn(settings as unknown as SignInSettings, 'alice')).toBe(true);
    expect(mayStillSignIn(settings as unknown as SignInSettings, 'removed')).toBe(false);
  });
});

describe('storage', () => {
  it('migrating a version-5 database keeps its sessions and lets sessions record auth method passkey', async () => {
    const file = tempDbFile();
    const db = new Database(file);
    for (const [i, sql] of MIGRATIONS.slice(0, 5).entries()) {
      db.exec(sql);
      db.pragma(`user_version = ${i + 1}`);
    }
    db.prepare("INSERT INTO sessions VALUES ('h', 'alice', 'password', 1, 'csrf', 1, 9999999999999)").run();
    db.close();
    store = openSqliteStore({ file });
    expect(await store.session('h')).toMatchObject({ userId: 'alice', authMethod: 'password' });
    const clock = new TestClock();
    const { cookieValue } = await new Sessions(store, clock, 60_000).start('alice', 'passkey');
    expect(await new Sessions(store, clock, 60_000).find(cookieValue)).toMatchObject({
      authMethod: 'passkey',
    });
  });
});
