/**
 * WebAuthn challenges the server issued and has not seen answered yet (issue 11, §8.11). They are
 * kept server-side, never in a cookie or a form: a challenge is good once (taken on the first
 * answer, accepted or not), for a short time, and only for what it was issued for.
 *
 * Kept in the store (issue 13): they survive a restart, and a challenge issued by one replica is
 * answered on any other. Only the challenge's SHA-256 is stored (it is only ever compared). The
 * store enforces the bounds atomically across replicas: at most `perOwner` open challenges per
 * owner (a session, or a client address before sign-in; a new one evicts that owner's oldest, so
 * clicking again never locks anyone out) and `total` unexpired in all (past it a new challenge is
 * refused rather than evicting someone else's). Expired ones are swept by the maintenance.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Store } from '../storage/types.js';

export interface ChallengeBounds {
  /** How long an issued challenge can be answered. */
  readonly ttlMs: number;
  readonly perOwner: number;
  readonly total: number;
}

export interface IssuedChallenge<T> {
  readonly owner: string;
  readonly expiresAt: number;
  readonly data: T;
}

export class ChallengeStore<T> {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    readonly bounds: ChallengeBounds,
  ) {}

  /** Remembers `challenge` for `owner`; false when the store is full of live challenges. */
  issue(owner: string, challenge: string, data: T): Promise<boolean> {
    const now = this.clock.now();
    return this.store.issueChallenge(
      {
        challengeHash: hash(challenge),
        owner,
        data: JSON.stringify(data),
        expiresAt: now + this.bounds.ttlMs,
      },
      this.bounds,
      now,
    );
  }

  /** The challenge's record, removed whatever happens next (single use); undefined once expired. */
  async take(challenge: string): Promise<IssuedChallenge<T> | undefined> {
    const found = await this.store.takeChallenge(hash(challenge), this.clock.now());
    if (!found) return undefined;
    return { owner: found.owner, expiresAt: found.expiresAt, data: JSON.parse(found.data) as T };
  }
}

function hash(challenge: string): string {
  return createHash('sha256').update(challenge).digest('base64url');
}
