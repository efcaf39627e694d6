/**
 * Approvers' sign-in sessions (issue 11): server-side, in the store. The cookie carries a random
 * 256-bit id; the store keeps only its SHA-256, so reading the database opens no session. Every
 * sign-in makes a new session (the id is rotated: a session id planted before sign-in is worth
 * nothing after it), and each session has its own CSRF token for its forms.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
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
   */
  async start(
    userId: string,
    authMethod: AuthMethod,
    replacing?: string,
    authenticatedAt?: number,
    /** An OIDC sign-in's `acr` and `amr`, recorded with each decision (issue 16). */
    claims?: { readonly acr: string | null; readonly amr: readonly string[] | null },
  ): Promise<{ readonly cookieValue: string; readonly session: SessionRecord }> {
    if (replacing !== undefined) await this.end(replacing);
    const now = this.clock.now();
    const cookieValue = randomBytes(32).toString('base64url');
    const session: SessionRecord = {
      idHash: hashId(cookieValue),
      userId,
      authMethod,
      authenticatedAt: Math.min(now, authenticatedAt ?? now),
      acr: claims?.acr ?? null,
      amr: claims?.amr ?? null,
      csrfToken: randomBytes(32).toString('base64url'),
      createdAt: now,
      expiresAt: now + this.lifetimeMs,
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
