/**
 * What every protocol operation works with: the store, the catalog, the policy, the clock and
 * the in-process caches. Built once by the composition root (app.ts).
 */
import type { Ed25519PublicJwk } from './keys.js';
import { randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { Catalog } from '../openapi/catalog.js';
import type { Policy } from './resolved-policy.js';
import type { ReplayLedger } from '../storage/replay-ledger.js';
import type { Store, StoreWriter, AgentRecord, GrantRecord, HostRecord } from '../storage/types.js';
import { ReplayCache } from './replay-cache.js';
import { TtlCache } from '../util/ttl-cache.js';
import { localLimiter, RateLimiter, type Limiter } from '../util/rate-limit.js';

/**
 * Users with a recent approval request remembered at once: past it the least recently asked are
 * forgotten (rate-limit.ts), so the limiter's memory stays bounded whatever the number of users.
 */
const APPROVAL_LIMITER_KEYS = 10_000;
import { UsageTracker } from './usage.js';
import type { ApprovalNotifier } from './notices.js';
import { ApprovalEvents } from './approval-events.js';

export interface ProtocolContext {
  readonly store: Store;
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Read per call: with `--port 0` the issuer is only known once the server listens. */
  issuer(): string;
  /** §5.1 `default_location`: the audience of execution JWTs. */
  executeLocation(): string;
  readonly replay: ReplayCache;
  /**
   * Where accepted jtis are recorded beyond memory (storage/replay-ledger.ts): the journal beside
   * a SQLite file, or the table replicas share on PostgreSQL. Absent: memory only (`:memory:`).
   */
  readonly replayLedger?: ReplayLedger;
  readonly usage: UsageTracker;
  readonly cache: HotCache;
  /**
   * Runs a transaction (Store.write), then drops every cached record: a change is visible at once
   * (§10.2). `fn` may run more than once (Store.write), so it changes nothing outside `tx`; what is
   * to happen outside the database once it commits (notifications, approval events, in-memory
   * state) it hands to `after`. Those run after the commit, in order, only for the attempt that
   * committed; never when it rolls back.
   */
  write<T>(fn: (tx: StoreWriter, after: AfterCommit) => Promise<T>): Promise<T>;
  /** Tells approvers of new approval requests (proxy config `notifications`); absent: nobody. */
  readonly notifier?: ApprovalNotifier;
  /**
   * New approval requests per addressed user (approval-limits.ts): the budgets replicas share on
   * PostgreSQL, else this process's, bounded in keys.
   */
  readonly approvalLimiter: Limiter;
  /** §10.10.2: approvals decided or ended are published here after commit, for notification streams. */
  readonly approvalEvents: ApprovalEvents;
  /** Keys from JWKS URLs (§4.1, §8.12, jwks/); absent: JWKS URLs are refused. */
  readonly jwks?: JwksKeySource;
}

/** Queues an action to run once the transaction commits (see ProtocolContext.write). */
export type AfterCommit = (action: () => void) => void;

/** What verification needs of the JWKS cache: a key by URL and kid, or a JwksKeyError. */
export interface JwksKeySource {
  key(url: string, kid: string): Promise<Ed25519PublicJwk>;
  /** Whether a key at `url` has the RFC 7638 thumbprint `tp`. */
  hasThumbprint(url: string, tp: string): Promise<boolean>;
}

/**
 * §10.2: host, agent and grant lookups on the hot path come from memory for a few seconds.
 * Every write through `ProtocolContext.write` clears it, so revocation in this process is
 * immediate. Replicas on PostgreSQL clear it on each other's change notices, and cache nothing
 * while those may be lost (`suspend`; protocol/replica-changes.ts); the TTL bounds staleness when
 * another process shares a SQLite file.
 */
export class HotCache {
  readonly hosts: TtlCache<HostRecord | null>;
  readonly agents: TtlCache<AgentRecord | null>;
  readonly grants: TtlCache<readonly GrantRecord[]>;
  /**
   * Bumped by every `clear`. A lookup that missed notes it before reading the store and keeps
   * what it read only if it is unchanged: a read that started before a write committed must not
   * put the old record back after the write cleared the cache.
   */
  generation = 0;
  #suspended = false;

  constructor(clock: Clock, ttlMs: number) {
    this.hosts = new TtlCache(clock, ttlMs);
    this.agents = new TtlCache(clock, ttlMs);
    this.grants = new TtlCache(clock, ttlMs);
  }

  clear(): void {
    this.generation++;
    this.hosts.clear();
    this.agents.clear();
    this.grants.clear();
  }

  /** Whether a lookup that missed at `generation` may keep what it read (see `generation`). */
  keeps(generation: number): boolean {
    return !this.#suspended && this.generation === generation;
  }

  /** Drops everything and keeps nothing until `resume`: every lookup reads the store. */
  suspend(): void {
    this.#suspended = true;
    this.clear();
  }

  /** Caches again; what was read before now is not kept (the clear moves the generation on). */
  resume(): void {
    this.clear();
    this.#suspended = false;
  }

  get suspended(): boolean {
    return this.#suspended;
  }
}

export interface ContextOptions {
  readonly store: Store;
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly issuer: () => string;
  /** Default 5 s. */
  readonly cacheTtlMs?: number;
  /** Where accepted jtis outlive a restart and reach other replicas; none: memory only. */
  readonly replayLedger?: ReplayLedger;
  /** Budgets shared by replicas (storage/open.ts); default: this process's own. */
  readonly limiter?: Limiter;
  readonly notifier?: ApprovalNotifier;
  /** The composition root passes the hub its notification route listens on; default: a fresh one. */
  readonly approvalEvents?: ApprovalEvents;
  readonly jwks?: JwksKeySource;
}

/**
 * The catalog and policy in force, per context: a reload replaces both in one assignment
 * (swapDocuments), so no request sees a catalog with another catalog's policy.
 */
interface Documents {
  readonly catalog: Catalog;
  readonly policy: Policy;
}
const documents = new WeakMap<
  ProtocolContext,
  { current: Documents; view?: { readonly documents: Documents; readonly context: ProtocolContext } }
>();

/** Live changes (issue 12): every later `ctx.catalog` / `ctx.policy` read sees `next`. */
export function swapDocuments(ctx: ProtocolContext, next: Documents): void {
  const holder = documents.get(ctx);
  if (!holder) throw new Error('swapDocuments: not a context made by createContext');
  holder.current = next;
  // The old view would keep the old catalog alive until the next request made a new one.
  holder.view = undefined;
  ctx.cache.clear();
}

/**
 * `ctx` with the catalog and policy in force now, for the rest of one request. Its steps wait
 * (on the database, a rate-limit row, a token), and a reload in between must not have one step
 * judge it by the old policy and a later one by the new (issue 12): authorized under a policy
 * that made the capability per-call, then sent straight upstream under one that blocks it. The
 * store, caches and clock are `ctx`'s own (the view inherits them). One view per documents in
 * force, shared by the requests that start under them: nothing is made per request.
 */
export function withDocumentsNow(ctx: ProtocolContext): ProtocolContext {
  const holder = documents.get(ctx);
  if (!holder) return ctx;
  const { current } = holder;
  if (holder.view?.documents !== current) {
    const view = Object.create(ctx, {
      catalog: { value: current.catalog },
      policy: { value: current.policy },
    }) as ProtocolContext;
    holder.view = { documents: current, context: view };
  }
  return holder.view.context;
}

export function createContext(options: ContextOptions): ProtocolContext {
  // The closures below name these, never `options`: a closure keeps alive every variable the
  // function's closures name, and `options` holds the first catalog, which a reload replaces.
  const { store, logger, issuer } = options;
  const holder = { current: { catalog: options.catalog, policy: options.policy } };
  const cache = new HotCache(options.clock, options.cacheTtlMs ?? 5_000);
  const ledger = options.replayLedger;
  // The ledger is written before an entry is kept (jti-replay.ts rememberJti).
  const replay = new ReplayCache(options.clock, {
    maxEntries: options.policy.replay.maxEntries,
    maxPerIdentity: options.policy.replay.maxEntriesPerIdentity,
  });
  if (ledger) {
    replay.restore(
      ledger.takeRestored().map((s) => ({ identity: s.identity, jti: s.jti, untilMs: s.expiresAt })),
    );
  }
  const runAll = (actions: readonly (() => void)[]): void => {
    for (const action of actions) {
      try {
        action();
      } catch (err) {
        logger.error('after-commit action failed', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
  };
  let executeFor: string | undefined;
  let execute = '';
  const ctx: ProtocolContext = {
    store,
    // Getters over one holder: a property read per request, and a swap is one assignment.
    get catalog() {
      return holder.current.catalog;
    },
    get policy() {
      return holder.current.policy;
    },
    clock: options.clock,
    logger,
    issuer,
    executeLocation: () => {
      // One string per issuer, not one per call: every execute compares its JWT's audience with
      // it, and a string built anew is flattened for each comparison.
      const current = issuer();
      if (current !== executeFor) {
        executeFor = current;
        execute = `${current}/capability/execute`;
      }
      return execute;
    },
    replay,
    ...(ledger ? { replayLedger: ledger } : {}),
    usage: new UsageTracker(store, logger),
    cache,
    write: async (fn) => {
      let actions: (() => void)[] = [];
      let result;
      try {
        result = await store.write((tx) => {
          // A fresh list per attempt: a rolled-back attempt's actions are dropped with it.
          const attempt: (() => void)[] = [];
          actions = attempt;
          return fn(tx, (action) => {
            attempt.push(action);
          });
        });
      } finally {
        cache.clear();
      }
      runAll(actions);
      return result;
    },
    ...(options.notifier ? { notifier: options.notifier } : {}),
    approvalLimiter:
      options.limiter ?? localLimiter(new RateLimiter(options.clock, { maxKeys: APPROVAL_LIMITER_KEYS })),
    approvalEvents: options.approvalEvents ?? new ApprovalEvents(),
    ...(options.jwks ? { jwks: options.jwks } : {}),
  };
  documents.set(ctx, holder);
  return ctx;
}

/** Opaque, unguessable identifiers with a readable prefix (`agt_…`, `hst_…`). */
export function newId(prefix: 'agt' | 'hst' | 'grt' | 'apr'): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

export function iso(ms: number | null | undefined): string | undefined {
  return ms === null || ms === undefined ? undefined : new Date(ms).toISOString();
}
