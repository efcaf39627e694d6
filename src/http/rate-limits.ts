/**
 * §8.13 rate limiting at the HTTP edge: per client IP for unauthenticated endpoints (with a
 * tighter bucket for registrations from unknown hosts), per agent, host and user once
 * authenticated, and a per-IP budget of failed authentications that is checked before any
 * signature is verified, so forged tokens cost a stranger more than they cost the proxy.
 * Over a limit → `429 rate_limited` with `Retry-After`.
 *
 * The budgets are the Limiter's: shared by every replica on PostgreSQL (one round trip per limit
 * step, however many buckets it takes), this process's own on SQLite (synchronous). The failed
 * authentications are always this process's own: that budget guards this process's CPU against
 * signature floods, is checked before every verification, and costs no round trip. A verification
 * that waits (a database read) is charged as it starts and given back if it succeeds, so that
 * tokens sent together cannot all pass one check (steps/tokens.ts).
 */
import { ProtocolError } from '../errors.js';
import type { Policy, RateLimitSpec } from '../policy/policy.js';
import type { Limiter, RateLimiter, RateVerdict } from '../util/rate-limit.js';
import type { LimitName } from '../metrics.js';
import { clientNetwork, clientSite } from '../util/client-network.js';
import { PENDING_TTL_MS } from '../protocol/oidc-outcomes.js';

/**
 * What the clients of one IPv6 /48 may take together: SITE_SHARE times one client's (/64) budget.
 * Many people behind one site still get room; one person holding a /48 no longer gets 65,536 ×.
 */
export const SITE_SHARE = 16;

/**
 * One budget of a client (an IPv4 address, an IPv6 /64) and, for an IPv6 client, its /48's at
 * `siteFactor` times as much: the budget parts `budgets` takes, keyed `${key}:${network}`.
 */
function perClient(
  ip: string,
  key: string,
  limit: RateLimitSpec | null,
  who: string,
  name: LimitName,
  siteFactor = SITE_SHARE,
): (BudgetParts | undefined)[] {
  const client = clientNetwork(ip);
  const site = clientSite(ip);
  return [
    [`${key}:${client}`, limit, who, client, name],
    site === undefined || limit === null
      ? undefined
      : [`${key}:${site}`, { ...limit, count: limit.count * siteFactor }, who, site, name],
  ];
}

/**
 * The new hosts one client may register over the time a pending host is kept: a tenth of the
 * pool (pending_hosts.max_hosts), so that it takes ten clients (five IPv6 /48s) to fill it.
 */
export function pendingHostsShare(maxHosts: number, pendingCleanupMs: number): RateLimitSpec {
  return { count: Math.max(1, Math.floor(maxHosts / 10)), windowMs: pendingCleanupMs };
}

/**
 * OIDC sign-ins one client may start within the time one waits for its callback: plenty for the
 * people behind one address (sessions last 12 h), and it takes 167 addresses (11 IPv6 /48s) to
 * fill MAX_PENDING within that time, where the per-IP budget let 9 do it.
 */
export const OIDC_STARTS_PER_CLIENT: RateLimitSpec = { count: 60, windowMs: PENDING_TTL_MS };

/** Wrong device codes a signed-in person may enter, then one more per 90 s (a token bucket). */
export const DEVICE_CODE_MISSES_PER_USER: RateLimitSpec = { count: 10, windowMs: 15 * 60_000 };

/**
 * One budget a request takes from: its key and limit (a RateTake as it stands), and whom a refusal
 * names, in parts (`Agent agt_1 on get_pet`), so that the message is built only for a refusal.
 */
interface Budget {
  readonly key: string;
  readonly limit: RateLimitSpec;
  readonly who: string;
  readonly id: string;
  readonly on?: string;
  readonly name: LimitName;
}

/** What the limits are read from: the policy in force, whose rate limits a reload may change. */
export type LimitsPolicy = Pick<Policy, 'rateLimits' | 'pendingHosts' | 'lifetimes'>;

export class RateLimits {
  constructor(
    private readonly limiter: Limiter,
    /** Failed authentications per IP: this process's own (see above). */
    private readonly failures: RateLimiter,
    /** Read on every request, so that a reload's limits apply at once. */
    private readonly policy: () => LimitsPolicy,
    /** Told which limit refused a request (the rate_limited_total metric). */
    private readonly onRefused: (limit: LimitName) => void = () => {},
  ) {}

  private get limits(): Policy['rateLimits'] {
    return this.policy().rateLimits;
  }

  /**
   * New hosts one client may register over the time a pending host is kept (pendingHostsShare):
   * with only `unknown_host_registration` (per 10 minutes) one address could keep the whole
   * pending_hosts.max_hosts pool full, since pending rows live 24 h.
   */
  private newHostsPerLifetime(): RateLimitSpec {
    const { pendingHosts, lifetimes } = this.policy();
    return pendingHostsShare(pendingHosts.maxHosts, lifetimes.pendingCleanupMs);
  }

  /** Takes from each budget in order, stopping at the first that refuses (Limiter.take). */
  private take(budgets: readonly Budget[]): void | Promise<void> {
    if (budgets.length === 0) return;
    const verdict = this.limiter.take(budgets);
    if (verdict instanceof Promise) return verdict.then((v) => this.settle(v, budgets));
    this.settle(verdict, budgets);
  }

  private settle(verdict: RateVerdict, budgets: readonly Budget[]): void {
    if (verdict.ok) return;
    const refused = budgets[verdict.refused] as Budget;
    this.onRefused(refused.name);
    throw limited(refused, verdict.retryAfterSec);
  }

  // Every per-client budget is kept per client network: an IPv6 client's /64 (clientNetwork).
  ip(ip: string): void | Promise<void> {
    return this.take(this.ipBudget(ip));
  }

  unknownHostRegistration(ip: string): void | Promise<void> {
    return this.take(this.registrationBudget(ip));
  }

  private ipBudget(ip: string): Budget[] {
    return budgets(...perClient(ip, 'ip', this.limits.perIp, 'Client', 'per_ip'));
  }

  private registrationBudget(ip: string): Budget[] {
    const limit = this.limits.unknownHostRegistration;
    // `unknown_host_registration: null` turns off both (tests, and closed networks, register many).
    const kept = limit === null ? null : this.newHostsPerLifetime();
    // The ten-minute budgets first: a request they refuse does not spend the longer one.
    return budgets(
      ...perClient(ip, 'reg', limit, 'Registrations of new hosts from', 'unknown_host_registration'),
      ...perClient(ip, 'reg-kept', kept, 'New hosts kept pending from', 'pending_hosts_per_client', 2),
    );
  }

  /**
   * A host nobody has approved (pending, or admitted by policy alone): its own budget and its
   * client's. Anyone can make such a host, so its per-host budget alone would let one client make
   * as many budgets as hosts (each host JWT it sends is also held by the replay cache).
   */
  unapprovedHost(hostId: string, ip: string): void | Promise<void> {
    return this.take([
      ...budgets([`host:${hostId}`, this.limits.perHost, 'Host', hostId, 'per_host']),
      ...this.ipBudget(ip),
    ]);
  }

  /**
   * Refuses, charging nothing, a new host whose client has no budget left for it (registration's
   * own bucket, or the per-IP one): asked before the host's key is fetched or checked.
   */
  unknownHostLeft(ip: string, bucket: 'registration' | 'ip'): void | Promise<void> {
    const all = bucket === 'registration' ? this.registrationBudget(ip) : this.ipBudget(ip);
    // Every budget the request would take from (client, site, and for registrations the longer
    // one), each asked in turn; one round trip each on the replicas' limiter.
    const from = (first: number): void | Promise<void> => {
      for (let i = first; i < all.length; i++) {
        const budget = all[i] as Budget;
        const verdict = this.limiter.check({ key: budget.key, limit: budget.limit });
        if (verdict instanceof Promise) {
          return verdict.then((v) => {
            this.settle(v, [budget]);
            return from(i + 1);
          });
        }
        this.settle(verdict, [budget]);
      }
    };
    return from(0);
  }

  /**
   * One device code tried by signed-in `userId` on /device, taken before it is looked up, so that
   * guesses sent at once cannot all pass; `deviceCodeRight` gives it back. Per person, whatever
   * address they send from: a signed-in person guessing other people's codes would approve (link
   * to themselves) or deny their requests, and per-address budgets alone let one guess on from
   * many addresses.
   */
  deviceCodeGuess(userId: string): void | Promise<void> {
    return this.take(this.deviceCodeBudget(userId));
  }

  deviceCodeRight(userId: string): void | Promise<void> {
    const [only] = this.deviceCodeBudget(userId);
    if (only !== undefined) return this.limiter.give({ key: only.key, limit: only.limit });
  }

  private deviceCodeBudget(userId: string): Budget[] {
    return budgets([
      `codes:user:${userId}`,
      DEVICE_CODE_MISSES_PER_USER,
      'Codes tried by',
      userId,
      'device_code_misses',
    ]);
  }

  /**
   * One OIDC sign-in started by the client (GET /sign-in/oidc): each is a pending row until its
   * callback, MAX_PENDING in all, the least recent dropped past it. Within the per-IP budget
   * alone, nine addresses pushed a real person's sign-in out while they were at their provider.
   */
  oidcStart(ip: string): void | Promise<void> {
    return this.take(
      budgets(
        ...perClient(ip, 'oidc', OIDC_STARTS_PER_CLIENT, 'Sign-ins started from', 'oidc_starts_per_client'),
      ),
    );
  }

  /** Refuses a client that has used up its failed-authentication budget (nothing is charged). */
  authFailuresLeft(ip: string): void {
    const spec = this.limits.failedAuthPerIp;
    if (!spec) return;
    const client = clientNetwork(ip);
    const result = this.failures.check(`authfail:${client}`, spec);
    if (!result.ok) {
      this.onRefused('failed_auth_per_ip');
      throw new ProtocolError(
        'rate_limited',
        `Too many failed authentications from ${client}; retry in ${result.retryAfterSec} s.`,
        { headers: { 'retry-after': String(result.retryAfterSec) } },
      );
    }
  }

  /**
   * Charges one failed authentication to the client; returns the limit it was charged under
   * (null: none), for authSucceeded to give it back under the same one should a reload come between.
   */
  authFailed(ip: string): RateLimitSpec | null {
    const spec = this.limits.failedAuthPerIp;
    if (spec) this.failures.take(`authfail:${clientNetwork(ip)}`, spec);
    return spec;
  }

  /** Gives back a failure charged before a verification that then succeeded (steps/tokens.ts). */
  authSucceeded(ip: string, spec: RateLimitSpec | null): void {
    if (spec) this.failures.give(`authfail:${clientNetwork(ip)}`, spec);
  }

  host(hostId: string): void | Promise<void> {
    return this.take(budgets([`host:${hostId}`, this.limits.perHost, 'Host', hostId, 'per_host']));
  }

  agent(agentId: string, hostId: string, userId: string | null): void | Promise<void> {
    return this.take(this.agentBudgets(agentId, hostId, userId));
  }

  /** An agent of a host nobody approved (anyone can make one): charged to its client too. */
  unapprovedAgent(agentId: string, hostId: string, userId: string | null, ip: string): void | Promise<void> {
    return this.take([...this.agentBudgets(agentId, hostId, userId), ...this.ipBudget(ip)]);
  }

  private agentBudgets(agentId: string, hostId: string, userId: string | null): Budget[] {
    const { perAgent, perHost, perUser } = this.limits;
    return budgets(
      [`agent:${agentId}`, perAgent, 'Agent', agentId, 'per_agent'],
      [`host:${hostId}`, perHost, 'Host', hostId, 'per_host'],
      userId !== null ? [`user:${userId}`, perUser, 'User', userId, 'per_user'] : undefined,
    );
  }

  /**
   * Executions of one capability (policy `rate_limits.per_capability`). The narrowest bucket is
   * taken first, so an agent refused by its own limit does not also drain the buckets it shares
   * with others (host, user, everyone).
   */
  capability(name: string, agentId: string, hostId: string, userId: string | null): void | Promise<void> {
    const limits = this.limits.perCapability.get(name);
    if (!limits) return;
    const per = 'per_capability';
    return this.take(
      budgets(
        [`cap:${name}:agent:${agentId}`, limits.perAgent, 'Agent', agentId, per, name],
        [`cap:${name}:host:${hostId}`, limits.perHost, 'Host', hostId, per, name],
        userId !== null
          ? [`cap:${name}:user:${userId}`, limits.perUser, 'User', userId, per, name]
          : undefined,
        [`cap:${name}`, limits.global, 'Capability', name, per],
      ),
    );
  }
}

/** A budget as its builder lists it; `on`: the capability a refusal names, if any. */
type BudgetParts = readonly [
  key: string,
  limit: RateLimitSpec | null,
  who: string,
  id: string,
  name: LimitName,
  on?: string,
];

/** The budgets whose limit is on, in order. */
function budgets(...parts: readonly (BudgetParts | undefined)[]): Budget[] {
  const out: Budget[] = [];
  for (const p of parts) {
    if (p === undefined || p[1] === null) continue;
    const [key, limit, who, id, name, on] = p;
    out.push(on === undefined ? { key, limit, who, id, name } : { key, limit, who, id, name, on });
  }
  return out;
}

function limited(b: Budget, retryAfterSec: number): ProtocolError {
  const who = b.on === undefined ? `${b.who} ${b.id}` : `${b.who} ${b.id} on ${b.on}`;
  return new ProtocolError(
    'rate_limited',
    `${who} exceeded ${b.limit.count} requests per ${Math.round(b.limit.windowMs / 1000)} s.`,
    { headers: { 'retry-after': String(retryAfterSec) } },
  );
}
