/**
 * Approvers' sign-in sessions (issue 11): server-side, in the store. The cookie carries a random
 * 256-bit id; the store keeps only its SHA-256, so reading the database opens no session. Every
 * sign-in makes a new session (the id is rotated: a session id planted before sign-in is worth
 * nothing after it), and each session has its own CSRF token for its forms.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
import { credentialTag, type SignInSettings } from '../config/sign-in.js';
import type { AuthMethod, SessionRecord, Store } from '../storage/types.js';

export class Sessions {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly lifetimeMs: number,
  ) {}

  /**
   * A new session for `userId`; `replacing` (the cookie sent with the sign-in) is ended.
   * `authenticatedAt` is when the person proved who they are, if earlier than now (an OIDC
   * provider's `auth_time`: its own session may be older than this sign-in); never later than now.
   * `notAfter` caps its expiry: a session that stands in for another (a passkey at approval) never
   * outlives the sign-in it came from.
   */
  async start(
    userId: string,
    authMethod: AuthMethod,
    replacing?: string,
    options: {
      readonly authenticatedAt?: number;
      /** An OIDC sign-in's `acr` and `amr`, recorded with each decision (issue 16). */
      readonly claims?: { readonly acr: string | null; readonly amr: readonly string[] | null };
      readonly notAfter?: number;
      /** A password sign-in's config/sign-in.ts credentialTag. */
      readonly credentialTag?: string;
    } = {},
  ): Promise<{ readonly cookieValue: string; readonly session: SessionRecord }> {
    if (replacing !== undefined) await this.end(replacing);
    const now = this.clock.now();
    const cookieValue = randomBytes(32).toString('base64url');
    const session: SessionRecord = {
      idHash: hashId(cookieValue),
      userId,
      authMethod,
      authenticatedAt: Math.min(now, options.authenticatedAt ?? now),
      acr: options.claims?.acr ?? null,
      amr: options.claims?.amr ?? null,
      credentialTag: options.credentialTag ?? null,
      csrfToken: randomBytes(32).toString('base64url'),
      createdAt: now,
      expiresAt: Math.min(now + this.lifetimeMs, options.notAfter ?? Infinity),
    };
    await this.store.insertSession(session);
    return { cookieValue, session };
  }

  /** The live session the cookie names, if any. */
  async find(cookieValue: string | undefined): Promise<SessionRecord | undefined> {
    if (cookieValue === undefined || !/^[A-Za-z0-9_-]{43}$/.test(cookieValue)) return undefined;
    const session = await this.store.session(hashId(cookieValue));
    return session && session.expiresAt > this.clock.now() ? session : undefined;
  }

  end(cookieValue: string): Promise<void> {
    return this.store.deleteSession(hashId(cookieValue));
  }

  /** §8.11: whether the person authenticated within `freshAuthMs`. */
  isFresh(session: SessionRecord, freshAuthMs: number): boolean {
    return this.clock.now() - session.authenticatedAt <= freshAuthMs;
  }

  /** Removes at most `limit` expired sessions (one batch of the maintenance sweep); how many. */
  sweep(limit: number): Promise<number> {
    return this.store.deleteExpiredSessions(this.clock.now(), limit);
  }
}

/**
 * Whether a stored session still signs its person in under the sign-in configuration in force (a
 * restart may have changed it, §8.11): a password session while its account is listed in
 * `sign_in.local.users` with the credentials it was started with (removing a user, or changing
 * their password or TOTP secret, ends their sessions at once); an OIDC or trusted-header
 * one while that way in is configured; a passkey one while its user is a local account, or while
 * OIDC or a trusted header (the sign-in such a passkey stood in for at approval) is configured.
 */
export function stillSignsIn(settings: SignInSettings, session: SessionRecord): boolean {
  const { localUsers, oidc, trustedHeader } = settings;
  switch (session.authMethod) {
    case 'password':
    case 'password+totp': {
      const user = localUsers.get(session.userId);
      if (user === undefined) return false;
      // Null: started before sessions kept the tag; such a session ends at its own expiry.
      return session.credentialTag == null || session.credentialTag === credentialTag(user);
    }
    case 'oidc':
      return oidc !== undefined;
    case 'trusted_header':
      return trustedHeader !== undefined;
    case 'passkey':
      return localUsers.has(session.userId) || oidc !== undefined || trustedHeader !== undefined;
  }
}

/** Compares a submitted CSRF token with the session's in constant time. */
export function csrfMatches(session: SessionRecord, given: string | null | undefined): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(session.csrfToken);
  return a.length === b.length && timingSafeEqual(a, b);
}

function hashId(cookieValue: string): string {
  return createHash('sha256').update(cookieValue).digest('base64url');
}
