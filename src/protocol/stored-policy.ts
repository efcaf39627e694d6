/**
 * What the policy granted without asking, as drift stores it (drift.ts), and what policy may
 * grant now in view of it. Replicas of one PostgreSQL database may run different policies for a
 * while (a rolling update): one still on the old policy must not go on granting, without asking,
 * what a newer replica's policy stopped granting, since drift on the newer one has already run
 * and would never see those grants. So policy grants only what both its own policy and the
 * stored one allow (autoGrantableNow); on one process the two are the same.
 */
import type { AgentMode, HostRecord, StoreWriter } from '../storage/types.js';
import type { ProtocolContext } from './context.js';
import { autoGrantable } from './grants.js';
import type { Policy } from './resolved-policy.js';

/**
 * What the policy granted without asking when drift last committed (at start-up, then after each
 * reload), names only. Kept in the store, written in drift's own transaction: a restart with a
 * changed policy (a ConfigMap edit rolled out by restarting) is compared with the policy before
 * it, as a reload is, and so is a replica's start with another replica's last policy.
 */
export interface PolicyGrants {
  readonly defaults: ReadonlySet<string>;
  readonly autonomous: ReadonlySet<string>;
  /** Per policy `hosts` entry (by its key), its default capabilities. */
  readonly hostDefaults: ReadonlyMap<string, ReadonlySet<string>>;
  readonly highRisk: ReadonlySet<string>;
  readonly blocked: ReadonlySet<string>;
}

/** PolicyGrants as stored: sorted names, so that the same policy writes the same text. */
export function storedForm(grants: PolicyGrants): string {
  const names = (set: ReadonlySet<string>): string[] => [...set].sort();
  return JSON.stringify({
    defaults: names(grants.defaults),
    autonomous: names(grants.autonomous),
    hostDefaults: [...grants.hostDefaults].map(([key, set]) => [key, names(set)]).sort(),
    highRisk: names(grants.highRisk),
    blocked: names(grants.blocked),
  });
}

/** The stored form read back; undefined for none, or for text this build cannot read. */
function readStored(text: string | undefined): PolicyGrants | undefined {
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as {
      defaults: string[];
      autonomous: string[];
      hostDefaults: [string, string[]][];
      highRisk: string[];
      blocked: string[];
    };
    return {
      defaults: new Set(v.defaults),
      autonomous: new Set(v.autonomous),
      hostDefaults: new Map(v.hostDefaults.map(([key, names]) => [key, new Set(names)])),
      highRisk: new Set(v.highRisk),
      blocked: new Set(v.blocked),
    };
  } catch {
    // Nothing to compare with, as before the first drift: the next one stores what it can read.
    return undefined;
  }
}

export function policyGrants(policy: Policy): PolicyGrants {
  return {
    defaults: policy.defaults,
    autonomous: policy.autonomousGrants,
    hostDefaults: new Map(policy.hosts.map((h) => [h.publicJwk.x, new Set(h.defaultCapabilities)])),
    highRisk: policy.highRisk,
    blocked: policy.blocked,
  };
}

/**
 * `now` with what `before` said of capabilities the catalog does not have now. The policy names
 * only capabilities in the catalog, so a change that removes X and takes it out of the defaults at
 * once would otherwise be forgotten: when X comes back, policy-made grants of X would be compared
 * with a policy that never named it, and kept.
 */
export function withAbsent(now: PolicyGrants, before: PolicyGrants, ctx: ProtocolContext): PolicyGrants {
  const absent = (names: ReadonlySet<string>): string[] => [...names].filter((n) => !ctx.catalog.get(n));
  const plus = (is: ReadonlySet<string> | undefined, was: ReadonlySet<string>): ReadonlySet<string> =>
    new Set([...(is ?? []), ...absent(was)]);
  const hostDefaults = new Map(now.hostDefaults);
  for (const [key, names] of before.hostDefaults) {
    const kept = plus(now.hostDefaults.get(key), names);
    if (kept.size > 0 || now.hostDefaults.has(key)) hostDefaults.set(key, kept);
  }
  return {
    defaults: plus(now.defaults, before.defaults),
    autonomous: plus(now.autonomous, before.autonomous),
    hostDefaults,
    highRisk: plus(now.highRisk, before.highRisk),
    blocked: plus(now.blocked, before.blocked),
  };
}

/** The last text read and what it parses to: the same policy is stored for months at a time. */
let lastRead: { readonly text: string; readonly grants: PolicyGrants | undefined } | undefined;

/** The stored PolicyGrants, read in `tx`; undefined before the first drift. */
export async function storedPolicyGrants(
  tx: Pick<StoreWriter, 'appliedPolicyGrants'>,
): Promise<PolicyGrants | undefined> {
  const text = await tx.appliedPolicyGrants();
  if (text === undefined) return undefined;
  if (lastRead?.text !== text) lastRead = { text, grants: readStored(text) };
  return lastRead.grants;
}

/**
 * What an agent of `host` in `mode` gets without asking (grants.ts autoGrantable), less what the
 * stored policy would not give it: out of its defaults (the host's own, kept in the store, count
 * for both) or autonomous grants, or high-risk or blocked there.
 */
export async function autoGrantableNow(
  ctx: ProtocolContext,
  tx: Pick<StoreWriter, 'appliedPolicyGrants'>,
  host: HostRecord,
  mode: AgentMode,
): Promise<ReadonlySet<string>> {
  const own = autoGrantable(ctx, host, mode);
  if (own.size === 0) return own;
  const stored = await storedPolicyGrants(tx);
  if (stored === undefined) return own;
  const granted =
    mode === 'delegated'
      ? (name: string): boolean => host.defaultCapabilities.includes(name) || stored.defaults.has(name)
      : (name: string): boolean => stored.autonomous.has(name);
  return new Set(
    [...own].filter((name) => granted(name) && !stored.highRisk.has(name) && !stored.blocked.has(name)),
  );
}
