import { describe, expect, it } from 'vitest';
import { credentialTag, type SignInSettings } from '../../../src/config/sign-in.js';
import { stillSignsIn } from '../../../src/protocol/sessions.js';
import { parsePasswordHash } from '../../../src/util/password.js';
import type { AuthMethod, SessionRecord } from '../../../src/storage/types.js';

/** A well-formed hash; no password is checked here. */
const HASH = `scrypt$16384$8$1$${'A'.repeat(22)}$${'A'.repeat(43)}`;
const OIDC = { issuer: 'https://id.example' } as unknown as NonNullable<SignInSettings['oidc']>;

/** The sign-in settings with these ways in; only what stillSignsIn reads matters. */
function ways(w: { local?: string[]; oidc?: boolean; header?: boolean }): SignInSettings {
  return {
    freshAuthMs: 300_000,
    sessionLifetimeMs: 43_200_000,
    firstPasskeyNeedsCode: false,
    localUsers: new Map(
      (w.local ?? []).map((u) => [u, { userId: u, passwordHash: parsePasswordHash(HASH) }]),
    ),
    ...(w.oidc ? { oidc: OIDC } : {}),
    ...(w.header ? { trustedHeader: { name: 'x-forwarded-email', from: ['10.0.0.0/8'] } } : {}),
  };
}

function session(userId: string, authMethod: AuthMethod, tag: string | null = null): SessionRecord {
  return {
    credentialTag: tag,
    idHash: 'h',
    userId,
    authMethod,
    authenticatedAt: 0,
    acr: null,
    amr: null,
    csrfToken: 't',
    createdAt: 0,
    expiresAt: 1,
  };
}

describe('stillSignsIn: a stored session under the sign-in configuration in force (§8.11)', () => {
  it('a password session only while its account is configured', () => {
    expect(stillSignsIn(ways({ local: ['alice'] }), session('alice', 'password'))).toBe(true);
    expect(stillSignsIn(ways({ local: ['alice'] }), session('alice', 'password+totp'))).toBe(true);
    expect(stillSignsIn(ways({ local: ['alice'] }), session('bob', 'password'))).toBe(false);
    // A removed local user is not let back in by another way in being configured.
    expect(
      stillSignsIn(ways({ local: ['alice'], oidc: true, header: true }), session('bob', 'password')),
    ).toBe(false);
  });

  it('an OIDC or trusted-header session only while that way in is configured', () => {
    expect(stillSignsIn(ways({ oidc: true }), session('alice', 'oidc'))).toBe(true);
    expect(stillSignsIn(ways({ local: ['alice'] }), session('alice', 'oidc'))).toBe(false);
    expect(stillSignsIn(ways({ header: true }), session('alice', 'trusted_header'))).toBe(true);
    expect(stillSignsIn(ways({ oidc: true }), session('alice', 'trusted_header'))).toBe(false);
  });

  it('a passkey session while its user is a local account, or the organisation signs people in', () => {
    expect(stillSignsIn(ways({ local: ['alice'] }), session('alice', 'passkey'))).toBe(true);
    expect(stillSignsIn(ways({ local: ['alice'] }), session('bob', 'passkey'))).toBe(false);
    expect(stillSignsIn(ways({ oidc: true }), session('bob', 'passkey'))).toBe(true);
    expect(stillSignsIn(ways({ header: true }), session('bob', 'passkey'))).toBe(true);
  });

  it('a password session only while the account keeps the password and TOTP key it began with', () => {
    const now = ways({ local: ['alice'] });
    const alice = now.localUsers.get('alice')!;
    const tag = credentialTag(alice);
    expect(stillSignsIn(now, session('alice', 'password', tag))).toBe(true);
    // A new password hash (another salt) ends it ...
    const rehashed = { ...alice, passwordHash: parsePasswordHash(HASH.replace('$AAAA', '$BAAA')) };
    expect(credentialTag(rehashed)).not.toBe(tag);
    expect(
      stillSignsIn(ways({ local: ['alice'] }), session('alice', 'password', credentialTag(rehashed))),
    ).toBe(false);
    // ... and so does a TOTP key added or changed.
    const withTotp = { ...alice, totpKey: Buffer.alloc(20, 7) };
    expect(credentialTag(withTotp)).not.toBe(tag);
    expect(credentialTag({ ...alice, totpKey: Buffer.alloc(20, 8) })).not.toBe(credentialTag(withTotp));
    expect(stillSignsIn(now, session('alice', 'password+totp', credentialTag(withTotp)))).toBe(false);
    // A session from before the tag was kept (null) ends at its own expiry.
    expect(stillSignsIn(now, session('alice', 'password', null))).toBe(true);
  });
});
