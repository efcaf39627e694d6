/**
 * Local-account sign-in (issue 11): password, then TOTP when the account has a secret. Failures
 * are throttled per account and per client address; a failure is taken from both budgets before
 * any hash is computed and given back on success. An unknown account costs a decoy hash and the same
 * answer as a wrong password, so neither timing nor wording says which accounts exist.
 */
import type { Clock } from '../clock.js';
import { credentialTag, type LocalUser } from '../config/sign-in.js';
import type { AuthMethod, Store } from '../storage/types.js';
import { clientNetwork } from '../util/client-network.js';
import { decoyFor, verifyPassword, type PasswordHash } from '../util/password.js';
import type { Limiter, RateLimit, RateTake } from '../util/rate-limit.js';
import { matchTotp, totpStepEnd } from '../util/totp.js';

/** Failed sign-ins allowed per account, then one more per 3 minutes (a token bucket, §8.13). */
export const SIGN_IN_FAILURES_PER_ACCOUNT: RateLimit = { count: 5, windowMs: 15 * 60_000 };
/** Failed sign-ins allowed per client address, an IPv6 client's /64 (a password sprayed over many accounts). */
export const SIGN_IN_FAILURES_PER_IP: RateLimit = { count: 20, windowMs: 15 * 60_000 };

export type SignInResult =
  | {
      readonly kind: 'ok';
      readonly userId: string;
      readonly method: AuthMethod;
      /** Kept with the session (config/sign-in.ts credentialTag). */
      readonly credentialTag: string;
    }
  | { readonly kind: 'wrong' }
  | { readonly kind: 'throttled'; readonly retryAfterSec: number };

export class LocalSignIn {
  /** Verified for an unknown account, at the cost most accounts' hashes have (decoyFor). */
  private readonly decoy: PasswordHash;

  constructor(
    private readonly users: ReadonlyMap<string, LocalUser>,
    /** Shared by the replicas on PostgreSQL: a password guessed on one counts on all. */
    private readonly limiter: Limiter,
    /** Where the TOTP steps used are recorded: a code is good once, on every replica (§5.2 of RFC 6238). */
    private readonly store: Store,
    private readonly clock: Clock,
  ) {
    this.decoy = decoyFor([...users.values()].map((u) => u.passwordHash));
  }

  /** Whether `userId` has a local account (a password to sign in again with). */
  knows(userId: string): boolean {
    return this.users.has(userId);
  }

  /** Whether `userId` must give a TOTP code (false for unknown users: that would say they exist). */
  wantsTotp(userId: string): boolean {
    return this.users.get(userId)?.totpKey !== undefined;
  }

  async attempt(userId: string, password: string, totp: string, ip: string): Promise<SignInResult> {
    const budgets: RateTake[] = [
      { key: `signin:user:${userId}`, limit: SIGN_IN_FAILURES_PER_ACCOUNT },
      { key: `signin:ip:${clientNetwork(ip)}`, limit: SIGN_IN_FAILURES_PER_IP },
    ];
    // One failure is taken from each budget before any hash is computed, and given back if the
    // sign-in succeeds: checked first and charged after the hash, concurrent guesses all passed
    // the check (16 at once, all answered, with a budget of 5).
    const taken: RateTake[] = [];
    for (const budget of budgets) {
      const left = await this.limiter.take([budget]);
      if (!left.ok) {
        for (const t of taken) await this.limiter.give(t);
        return { kind: 'throttled', retryAfterSec: left.retryAfterSec };
      }
      taken.push(budget);
    }
    const user = this.users.get(userId);
    const passwordOk = await verifyPassword(password, user?.passwordHash ?? this.decoy);
    let ok = user !== undefined && passwordOk;
    let step: number | undefined;
    if (ok && user?.totpKey !== undefined) {
      const now = this.clock.now();
      step = matchTotp(user.totpKey, totp, now);
      // Recorded only once the password is right, so a guesser cannot burn the owner's codes; a
      // code (or an earlier one) already used fails on the store's primary key, on any replica.
      ok = step !== undefined && (await this.store.useTotpStep(userId, step, totpStepEnd(step)));
    }
    if (!ok || user === undefined) return { kind: 'wrong' };
    for (const t of taken) await this.limiter.give(t);
    return {
      kind: 'ok',
      userId,
      method: step !== undefined ? 'password+totp' : 'password',
      credentialTag: credentialTag(user),
    };
  }
}
