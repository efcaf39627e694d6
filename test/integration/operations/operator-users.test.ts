/**
 * What the operator does for one person (`/admin/users/{id}/…`, protocol/operator-users.ts).
 * A person lost their passkey: the operator API removes it, ends their sessions, and records it
 * (§11); the person then signs in again and enrols a new one as a first passkey. With
 * `sign_in.first_passkey: operator_code` that first passkey also takes a one-time code the
 * operator issued (API and CLI). A stolen laptop: the operator signs the person out everywhere.
 * Real proxies (local accounts, issuer http://localhost so passkeys work), real HTTP, real SQLite,
 * software authenticators making real P-256 signatures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PageClient, softPasskey, startPerCallProxy, type PerCallProxy } from '../../helpers/per-call.js';
import { ADMIN_TOKEN } from '../../helpers/protocol.js';
import { SoftAuthenticator } from '../../helpers/webauthn.js';
import { runAdmin } from '../../../src/cli/admin.js';
import { createLogger } from '../../../src/log.js';
import { enrolmentCodeHash, newEnrolmentCode } from '../../../src/protocol/enrolment-codes.js';
import { BAD_CODE } from '../../../src/protocol/passkeys.js';

let proxy: PerCallProxy;
beforeAll(async () => {
  proxy = await startPerCallProxy({ policy: '', users: ['alice', 'bob', 'carol', 'dave', 'erin', 'frank'] });
});
afterAll(async () => proxy.close());

const passkeysOf = async (user: string, on = proxy): Promise<{ id: string; name: string }[]> => {
  const reply = await on.p.admin('GET', `/admin/users/${user}/passkeys`);
  expect(reply.status).toBe(200);
  return reply.body.passkeys as { id: string; name: string }[];
};

async function removedRecords(user: string): Promise<Record<string, unknown>[]> {
  const rows = await proxy.p.proxy.protocol.store.activity({ limit: 1000 });
  return rows
    .filter((r) => r.type === 'user.passkey_removed' && r.userId === user)
    .map((r) => r.detail as Record<string, unknown>);
}

describe('GET /admin/users/{user_id}/passkeys', () => {
  it("lists one user's passkeys, oldest first, without their public key or user handle", async () => {
    const a = await softPasskey(proxy.p, 'alice');
    proxy.clock.advance(1000);
    const b = await softPasskey(proxy.p, 'alice');
    await softPasskey(proxy.p, 'bob');
    const reply = await proxy.p.admin('GET', '/admin/users/alice/passkeys');
    expect(reply.status).toBe(200);
    expect(reply.body.user_id).toBe('alice');
    expect((reply.body.passkeys as { id: string }[]).map((p) => p.id)).toEqual([a.id, b.id]);
    expect(Object.keys((reply.body.passkeys as object[])[0] as object).sort()).toEqual([
      'created_at',
      'id',
      'last_used_at',
      'name',
      'transports',
    ]);
    expect(await passkeysOf('nobody')).toEqual([]);
  });

  it('needs the admin token', async () => {
    const res = await fetch(`${proxy.p.proxy.url}/admin/users/alice/passkeys`);
    expect(res.status).toBe(401);
    const wrong = await fetch(`${proxy.p.proxy.url}/admin/users/alice/passkeys`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN.replace(/.$/, '0')}x` },
    });
    expect(wrong.status).toBe(401);
  });
});

describe('POST /admin/users/{user_id}/passkeys/remove', () => {
  it("removes the one passkey named, ends that user's sessions (no one else's), and records who and why", async () => {
    const lost = await softPasskey(proxy.p, 'carol');
    const kept = await softPasskey(proxy.p, 'carol');
    const carol = await PageClient.signIn(proxy.p.issuer, 'carol');
    const carolElsewhere = await PageClient.signIn(proxy.p.issuer, 'carol');
    const bob = await PageClient.signIn(proxy.p.issuer, 'bob');
    expect(await carol.signedIn()).toBe(true);

    const reply = await proxy.p.admin('POST', '/admin/users/carol/passkeys/remove', {
      passkey_id: lost.id,
      reason: 'phone stolen',
    });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ user_id: 'carol', removed: [{ id: lost.id }], sessions_ended: 2 });
    expect((await passkeysOf('carol')).map((p) => p.id)).toEqual([kept.id]);
    expect(await carol.signedIn()).toBe(false);
    expect(await carolElsewhere.signedIn()).toBe(false);
    expect(await bob.signedIn()).toBe(true);
    expect(await removedRecords('carol')).toEqual([
      {
        passkey: 'test key',
        passkey_id: lost.id,
        by: 'admin',
        sessions_ended: 2,
        reason: 'phone stolen',
        auth_method: 'admin_token',
        client_ip: '127.0.0.1',
        user_agent: 'node',
      },
    ]);
  });

  it('refuses, changing nothing: no target, both targets, a bad all, an unknown passkey, an empty user', async () => {
    const mine = await softPasskey(proxy.p, 'dave');
    const dave = await PageClient.signIn(proxy.p.issuer, 'dave');
    const refusals: [unknown, number, string, RegExp][] = [
      [{}, 400, 'invalid_request', /passkey_id .* or "all": true/],
      [{ passkey_id: mine.id, all: true }, 400, 'invalid_request', /not both/],
      [{ all: 'yes' }, 400, 'invalid_request', /all must be true or false/],
      [{ all: false }, 400, 'invalid_request', /passkey_id/],
      [{ passkey_id: '' }, 400, 'invalid_request', /passkey_id must be a non-empty string/],
      [{ passkey_id: 'nope' }, 404, 'passkey_not_found', /User "dave" has no passkey "nope"/],
    ];
    for (const [body, status, error, message] of refusals) {
      const reply = await proxy.p.admin('POST', '/admin/users/dave/passkeys/remove', body);
      expect(reply.status, JSON.stringify(body)).toBe(status);
      expect(reply.body.error).toBe(error);
      expect(reply.body.message).toMatch(message);
    }
    // Another user's passkey is not found under this one.
    const other = await softPasskey(proxy.p, 'bob');
    const crossed = await proxy.p.admin('POST', '/admin/users/dave/passkeys/remove', {
      passkey_id: other.id,
    });
    expect(crossed.status).toBe(404);
    const none = await proxy.p.admin('POST', '/admin/users/nobody/passkeys/remove', { all: true });
    expect(none.status).toBe(404);
    expect(none.body.message).toBe('User "nobody" has no passkeys.');
    expect((await passkeysOf('dave')).map((p) => p.id)).toEqual([mine.id]);
    expect((await passkeysOf('bob')).map((p) => p.id)).toContain(other.id);
    expect(await dave.signedIn()).toBe(true);
    expect(await removedRecords('dave')).toEqual([]);
  });

  it('all: true removes every passkey; then a fresh sign-in enrols a new first one without the lost one', async () => {
    // Erin's only passkey is gone: on the account page, adding one needs a confirmation with it.
    await softPasskey(proxy.p, 'erin');
    const before = await PageClient.signIn(proxy.p.issuer, 'erin');
    expect((await before.get('/account')).html).toContain('You will first confirm with one of your passkeys');

    const reply = await proxy.p.admin('POST', '/admin/users/erin/passkeys/remove', { all: true });
    expect(reply.status).toBe(200);
    expect(reply.body.sessions_ended).toBe(1);
    expect(await passkeysOf('erin')).toEqual([]);

    const erin = await PageClient.signIn(proxy.p.issuer, 'erin');
    const account = await erin.get('/account');
    expect(account.html).not.toContain('You will first confirm');
    const csrf = /name="csrf" value="([^"]*)"/.exec(account.html)?.[1] ?? '';
    const options = await erin.post('/account/passkeys/options', { csrf, name: 'New phone' });
    expect(options.status).toBe(200);
    const { registration, assertion } = JSON.parse(options.text) as {
      registration: { challenge: string; user: { id: string } };
      assertion?: unknown;
    };
    expect(assertion).toBeUndefined();
    const fresh = new SoftAuthenticator(registration.user.id);
    const added = await erin.post('/account/passkeys', {
      csrf,
      name: 'New phone',
      registration: fresh.register({
        challenge: registration.challenge,
        rpId: 'localhost',
        origin: proxy.p.issuer,
      }),
    });
    expect(added.status, added.text.slice(0, 3000)).toBe(200);
    expect((await passkeysOf('erin')).map((p) => [p.id, p.name])).toEqual([[fresh.id, 'New phone']]);
  });
});

describe('sign_in.first_passkey: operator_code', () => {
  let coded: PerCallProxy;
  const log: string[] = [];
  beforeAll(async () => {
    coded = await startPerCallProxy({
      policy: '',
      users: ['frank', 'grace'],
      config: '  first_passkey: operator_code\n',
      logger: createLogger('debug', (line) => log.push(line)),
    });
  });
  afterAll(async () => coded.close());

  /** Signs `user` in and reads the account page's CSRF token. */
  async function signedInWithCsrf(user: string): Promise<{ client: PageClient; csrf: string; html: string }> {
    const client = await PageClient.signIn(coded.p.issuer, user);
    const { html } = await client.get('/account');
    return { client, csrf: /name="csrf" value="([^"]*)"/.exec(html)?.[1] ?? '', html };
  }

  /** The add-passkey ceremony as the page script runs it, with `code` in the form. */
  async function enrol(
    client: PageClient,
    csrf: string,
    code: string,
  ): Promise<{ status: number; text: string }> {
    const fields = { csrf, name: 'Phone', enrolment_code: code };
    const options = await client.post('/account/passkeys/options', fields);
    if (options.status !== 200) return options;
    const { registration } = JSON.parse(options.text) as {
      registration: { challenge: string; user: { id: string } };
    };
    const soft = new SoftAuthenticator(registration.user.id);
    const answer = soft.register({
      challenge: registration.challenge,
      rpId: 'localhost',
      origin: coded.p.issuer,
    });
    return client.post('/account/passkeys', { ...fields, registration: answer });
  }

  it('the first passkey needs the code the operator issued; it works once and is never recorded', async () => {
    const { client, csrf, html } = await signedInWithCsrf('frank');
    expect(html).toContain('id="enrolment-code"');
    expect(html).toContain('autocomplete="one-time-code"');

    // No code yet: refused before the browser would ask for a fingerprint.
    const early = await client.post('/account/passkeys/options', { csrf, name: 'Phone', enrolment_code: '' });
    expect(early.status).toBe(400);
    expect(JSON.parse(early.text)).toMatchObject({ error: 'invalid_request', message: BAD_CODE });

    const tooShort = await coded.p.admin('POST', '/admin/users/frank/passkeys/enrolment-code', {
      ttl_seconds: 59,
    });
    expect(tooShort.status).toBe(400);
    expect(tooShort.body.message).toBe('ttl_seconds must be a whole number from 60 to 604800.');
    const issued = await coded.p.admin('POST', '/admin/users/frank/passkeys/enrolment-code', {
      ttl_seconds: 3600,
    });
    expect(issued.status).toBe(200);
    const code = issued.body.enrolment_code as string;
    expect(code).toMatch(/^([A-Z2-9]{4}-){3}[A-Z2-9]{4}$/);
    expect(issued.body.expires_at).toBe(new Date(coded.clock.now() + 3_600_000).toISOString());

    expect((await enrol(client, csrf, newEnrolmentCode())).status).toBe(400);
    const added = await enrol(client, csrf, code.toLowerCase().replace(/-/g, ' '));
    expect(added.status, added.text.slice(0, 3000)).toBe(200);
    expect(added.text).toContain('Passkey &quot;Phone&quot; added.');
    expect(await passkeysOf('frank', coded)).toHaveLength(1);
    expect(
      await coded.p.proxy.protocol.store.hasEnrolmentCode(
        'frank',
        enrolmentCodeHash(code) as string,
        coded.clock.now(),
      ),
    ).toBe(false);

    const records = (await coded.p.proxy.protocol.store.activity({ limit: 100 })).filter(
      (r) => r.userId === 'frank',
    );
    expect(records.map((r) => r.type).sort()).toEqual(['user.passkey_added', 'user.passkey_code_issued']);
    for (const text of [JSON.stringify(records), log.join('\n')]) {
      expect(text).not.toContain(code);
      expect(text).not.toContain(code.replace(/-/g, ''));
    }
    expect(log.join('\n')).toContain('/admin/users/frank/passkeys/enrolment-code');
  });

  it('a code past its time enrols nothing; the CLI issues one that works', async () => {
    const { client, csrf } = await signedInWithCsrf('grace');
    const old = await coded.p.admin('POST', '/admin/users/grace/passkeys/enrolment-code', {
      ttl_seconds: 60,
    });
    coded.clock.advance(60_000);
    const late = await enrol(client, csrf, old.body.enrolment_code as string);
    expect(late.status).toBe(400);
    expect(JSON.parse(late.text).message).toBe(BAD_CODE);

    let out = '';
    const io = { out: (t: string) => void (out += t), err: (t: string) => void (out += t) };
    const env = { AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN };
    const exit = await runAdmin(
      ['passkeys', 'code', '--user-id', 'grace', '--ttl', '2h', '--url', coded.p.proxy.url],
      env,
      io,
    );
    expect(exit, out).toBe(0);
    const code = /enrolment code for user grace: (\S+)/.exec(out)?.[1] ?? '';
    expect(out).toContain(
      `good once, until ${new Date(coded.clock.now() + 7_200_000).toISOString().replace(/\.\d{3}Z$/, 'Z')}`,
    );
    const fresh = await signedInWithCsrf('grace'); // the sign-in must be younger than fresh_auth
    expect((await enrol(fresh.client, fresh.csrf, code)).status).toBe(200);
    expect(await passkeysOf('grace', coded)).toHaveLength(1);
  });

  it('a proxy that asks for no code issues none', async () => {
    const reply = await proxy.p.admin('POST', '/admin/users/alice/passkeys/enrolment-code', {});
    expect(reply.status).toBe(400);
    expect(reply.body.message).toContain('sign_in.first_passkey is fresh_sign_in');
  });
});

describe('POST /admin/users/{user_id}/sign-out', () => {
  it("ends every session of that person, no one else's, and records who and why; the CLI does the same", async () => {
    const first = await PageClient.signIn(proxy.p.issuer, 'alice');
    const second = await PageClient.signIn(proxy.p.issuer, 'alice');
    const bob = await PageClient.signIn(proxy.p.issuer, 'bob');
    const reply = await proxy.p.admin('POST', '/admin/users/alice/sign-out', { reason: 'laptop stolen' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ user_id: 'alice', sessions_ended: 2 });
    expect(await first.signedIn()).toBe(false);
    expect(await second.signedIn()).toBe(false);
    expect(await bob.signedIn()).toBe(true);
    const records = (await proxy.p.proxy.protocol.store.activity({ limit: 1000 })).filter(
      (r) => r.type === 'user.signed_out',
    );
    expect(records.map((r) => [r.userId, r.detail])).toEqual([
      [
        'alice',
        {
          by: 'admin',
          sessions_ended: 2,
          reason: 'laptop stolen',
          auth_method: 'admin_token',
          client_ip: '127.0.0.1',
          user_agent: 'node',
        },
      ],
    ]);

    let out = '';
    const io = { out: (t: string) => void (out += t), err: (t: string) => void (out += t) };
    const env = { AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN };
    const again = await PageClient.signIn(proxy.p.issuer, 'alice');
    const exit = await runAdmin(
      ['users', 'sign-out', '--user-id', 'alice', '--url', proxy.p.proxy.url],
      env,
      io,
    );
    expect(exit).toBe(0);
    expect(out).toBe('signed out user alice: 1 session ended\n');
    expect(await again.signedIn()).toBe(false);
  });

  it('a user id that is too long is refused, and nobody is signed out', async () => {
    const bob = await PageClient.signIn(proxy.p.issuer, 'bob');
    const reply = await proxy.p.admin('POST', `/admin/users/${'b'.repeat(201)}/sign-out`, {});
    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('user_id must be 1 to 200 characters.');
    expect(await bob.signedIn()).toBe(true);
  });
});

describe('POST /admin/users/{user_id}/remove (§2.6 user deletion)', () => {
  it("revokes every host linked to the user and their agents (§8.5), removes passkeys and sessions; no one else's", async () => {
    const first = await proxy.p.activeAgent(['get_report'], { userId: 'frank' });
    const second = await proxy.p.activeAgent(['get_report'], { userId: 'frank' });
    const bobs = await proxy.p.activeAgent(['get_report'], { userId: 'bob' });
    await softPasskey(proxy.p, 'frank');
    const session = await PageClient.signIn(proxy.p.issuer, 'frank');
    const bobSession = await PageClient.signIn(proxy.p.issuer, 'bob');

    const reply = await proxy.p.admin('POST', '/admin/users/frank/remove', { reason: 'left the company' });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      user_id: 'frank',
      hosts_revoked: 2,
      agents_revoked: 2,
      passkeys_removed: 1,
      sessions_ended: 1,
    });
    for (const a of [first, second]) {
      expect((await proxy.p.status(a.host, a.agentId)).status).toBe(403);
      const refused = await proxy.p.execute(a.agent, a.agentId, 'get_report', {});
      expect(refused.status).toBe(403);
      expect(['agent_revoked', 'host_revoked']).toContain(refused.body.error);
      const host = await proxy.p.admin('GET', `/admin/hosts/${a.hostId}`);
      expect(host.body.status).toBe('revoked');
    }
    expect(await passkeysOf('frank')).toEqual([]);
    expect(await session.signedIn()).toBe(false);
    // Bob is untouched.
    expect((await proxy.p.status(bobs.host, bobs.agentId)).body.status).toBe('active');
    expect(await bobSession.signedIn()).toBe(true);
    const records = (await proxy.p.proxy.protocol.store.activity({ limit: 1000 })).filter(
      (r) => r.type === 'user.removed',
    );
    expect(records.map((r) => [r.userId, r.detail])).toEqual([
      [
        'frank',
        {
          by: 'admin',
          hosts_revoked: 2,
          agents_revoked: 2,
          passkeys_removed: 1,
          sessions_ended: 1,
          reason: 'left the company',
          auth_method: 'admin_token',
          client_ip: '127.0.0.1',
          user_agent: 'node',
        },
      ],
    ]);

    // Again, through the CLI: nothing is left to remove.
    let out = '';
    const io = { out: (t: string) => void (out += t), err: (t: string) => void (out += t) };
    const exit = await runAdmin(
      ['users', 'remove', '--user-id', 'frank', '--url', proxy.p.proxy.url],
      { AGENT_AUTH_PROXY_ADMIN_TOKEN: ADMIN_TOKEN },
      io,
    );
    expect(out).toBe('removed user frank: 0 hosts and 0 agents revoked, 0 passkeys and 0 sessions removed\n');
    expect(exit).toBe(0);
  });
});
