/**
 * Service secrets a reload replaced (an API key rotated in the config), kept for redaction for a
 * while: an answer read after the reload, such as an async job's status polled through the new
 * engine, may still echo the key its job was started with, which the upstream may still honour.
 * OAuth tokens have the same for refreshes (oauth.ts); this is its counterpart for static secrets.
 */
import type { Clock } from '../clock.js';

/** How long a replaced secret is still redacted: a rotated key is seldom revoked sooner. */
export const RETIRED_SECRET_KEEP_MS = 24 * 60 * 60_000;
/** At most this many are kept (the oldest go first): a bound on the search each answer makes. */
const MAX_RETIRED = 64;
const NONE: readonly string[] = Object.freeze([]);

export class RetiredSecrets {
  /** Secret → until when it is redacted, oldest first. */
  private readonly until = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly keepMs = RETIRED_SECRET_KEEP_MS,
  ) {}

  /** The engine with `replaced` gave way to the one with `current`: what it alone had is retired. */
  retire(replaced: readonly string[], current: readonly string[]): void {
    const kept = new Set(current);
    for (const secret of kept) this.until.delete(secret);
    const expires = this.clock.now() + this.keepMs;
    for (const secret of replaced) {
      if (kept.has(secret)) continue;
      this.until.delete(secret);
      this.until.set(secret, expires);
    }
    while (this.until.size > MAX_RETIRED) this.until.delete(this.until.keys().next().value as string);
  }

  /** Those still redacted; the same empty array when there are none (every answer asks). */
  list(): readonly string[] {
    if (this.until.size === 0) return NONE;
    const now = this.clock.now();
    for (const [secret, until] of this.until) if (until <= now) this.until.delete(secret);
    return this.until.size === 0 ? NONE : [...this.until.keys()];
  }
}
