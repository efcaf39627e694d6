/**
 * WebAuthn challenges the server issued and has not seen answered yet (issue 11, §8.11). They are
 * kept here, server-side, never in a cookie or a form: a challenge is good once (taken on the
 * first answer, accepted or not), for a short time, and only for what it was issued for.
 *
 * Bounded in memory: at most `perOwner` open challenges per owner (a session, or a client address
 * before sign-in; a new one evicts that owner's oldest, so clicking again never locks anyone out)
 * and `total` in all (past it, after dropping expired ones, a new challenge is refused rather than
 * evicting someone else's). A restart forgets them: the person simply tries again.
 */
import type { Clock } from '../clock.js';

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
  /** By challenge, in issue order (Map keeps insertion order: the oldest come first). */
  readonly #byChallenge = new Map<string, IssuedChallenge<T>>();
  readonly #byOwner = new Map<string, string[]>();

  constructor(
    private readonly clock: Clock,
    readonly bounds: ChallengeBounds,
  ) {}

  get size(): number {
    return this.#byChallenge.size;
  }

  /** Remembers `challenge` for `owner`; false when the store is full of live challenges. */
  issue(owner: string, challenge: string, data: T): boolean {
    const mine = this.#byOwner.get(owner) ?? [];
    while (mine.length >= this.bounds.perOwner) this.#delete(mine[0] as string);
    if (this.#byChallenge.size >= this.bounds.total) this.sweep();
    if (this.#byChallenge.size >= this.bounds.total) return false;
    this.#byChallenge.set(challenge, { owner, expiresAt: this.clock.now() + this.bounds.ttlMs, data });
    const list = this.#byOwner.get(owner) ?? [];
    list.push(challenge);
    this.#byOwner.set(owner, list);
    return true;
  }

  /** The challenge's record, removed whatever happens next (single use); undefined once expired. */
  take(challenge: string): IssuedChallenge<T> | undefined {
    const found = this.#byChallenge.get(challenge);
    if (!found) return undefined;
    this.#delete(challenge);
    return found.expiresAt > this.clock.now() ? found : undefined;
  }

  /** Drops expired challenges; returns how many. */
  sweep(): number {
    const now = this.clock.now();
    let removed = 0;
    for (const [challenge, issued] of this.#byChallenge) {
      if (issued.expiresAt > now) continue;
      this.#delete(challenge);
      removed++;
    }
    return removed;
  }

  #delete(challenge: string): void {
    const issued = this.#byChallenge.get(challenge);
    this.#byChallenge.delete(challenge);
    if (!issued) return;
    const list = this.#byOwner.get(issued.owner);
    if (!list) return;
    const i = list.indexOf(challenge);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.#byOwner.delete(issued.owner);
  }
}
