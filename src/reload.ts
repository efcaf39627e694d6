/**
 * Live changes (issue 12): SIGHUP, `--watch` and tests call one reload. The config's API list,
 * the OpenAPI documents and the policy are read and checked in full before anything changes;
 * then catalog, policy and execution engine are swapped in one synchronous step, followed at
 * once by one transaction applying the policy's hosts (§2.8) and drift (§2.12). An invalid new
 * version is refused as a whole: the last good one keeps serving, the error is logged and
 * counted, and readiness is untouched.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Settings } from './config/settings.js';
import type { BuiltEngine } from './engine.js';
import type { Logger } from './log.js';
import type { Catalog } from './openapi/catalog.js';
import type { Policy } from './policy/policy.js';
import { applyDrift, logDrift, type DriftOutcome } from './protocol/drift.js';
import { swapDocuments, type AfterCommit, type ProtocolContext } from './protocol/context.js';
import { applyPolicyHostsIn, logSkippedPolicyHosts, type SkippedPolicyHost } from './protocol/hosts.js';
import { outlastingConflicts } from './storage/conflicts.js';
import type { StoreWriter } from './storage/types.js';
import { collectingWhenGrown, compactHeap } from './util/collect-garbage.js';

export interface ReloadResult {
  readonly ok: boolean;
  /** Why the new version was refused (the key path or file is in the message). */
  readonly error?: string;
  readonly capabilities?: number;
  /** Changed settings this reload did not apply: they take a restart (see RESTART_ONLY). */
  readonly restartNeeded?: readonly string[];
}

export interface Generation {
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly engine: BuiltEngine;
  /** The documents read the same as those in force, whose catalog was kept (not derived again). */
  readonly documentsUnchanged?: boolean;
  /** APIs whose part of the catalog in force was kept: their documents were not loaded again. */
  readonly keptApis?: number;
}

export interface ReloadDeps {
  readonly ctx: ProtocolContext;
  /** The settings the process started with: what the RESTART_ONLY ones stay at. */
  readonly started: Settings;
  readonly logger: Logger;
  readonly counted: (result: 'success' | 'failure') => void;
  /** Reads the configuration again (same flags and environment as at start-up). */
  readonly settings: () => Settings;
  /** Everything that can fail: documents, policy, execution settings. Must not change state. */
  readonly build: (settings: Settings) => Promise<Generation>;
  /** The engine in use, and its replacement (the composition root's holder). */
  readonly engine: () => BuiltEngine;
  readonly install: (engine: BuiltEngine, catalog: Catalog) => void;
}

/**
 * Garbage that reloads keeping their catalog may leave before a full collection frees it. Each
 * leaves a replaced engine and policy (Microsoft Graph: about 1.3 MiB), in the old generation,
 * which V8 collects late: 40 such reloads with no collection grew Graph's `serve` from 188 to
 * 246 MiB resident, while the heap after a full collection stayed the same.
 */
const KEPT_CATALOG_GARBAGE_BYTES = 16 * 1024 * 1024;

/** What a reload applies: the API list (documents, upstreams, credentials), how documents are read, the policy. */
type Reloaded =
  | 'apis'
  | 'policyFile'
  | 'allowRemoteRefs'
  | 'allowLocalRefsAnywhere'
  | 'allowHttpSpecs'
  | 'specMaxBytes'
  | 'specTimeoutMs';

/**
 * Every other setting, by the config keys it comes from: read once at start-up (listeners,
 * database, sign-in, tokens...). A reload that changes one says so, naming the keys, rather
 * than answering "reloaded" while the old value serves on. The type makes a new setting choose.
 */
const RESTART_ONLY: Readonly<Record<Exclude<keyof Settings, Reloaded>, string>> = {
  host: 'server.host',
  port: 'server.port',
  workers: 'server.workers',
  internal: 'server.internal_port/internal_host',
  issuer: 'server.issuer',
  maxBodyBytes: 'server.max_body_bytes',
  trustedProxies: 'server.trusted_proxies',
  forwardedHeader: 'server.forwarded_header',
  requestIdHeader: 'server.request_id_header',
  connections: 'server (connection limits and timeouts)',
  providerName: 'provider.name',
  providerDescription: 'provider.description',
  mockUpstream: 'mock_upstream',
  logLevel: 'log_level',
  logFormat: 'log_format',
  database: 'database',
  adminToken: 'the admin token',
  introspectionToken: 'the introspection token',
  execution: 'execution (stream and async job settings)',
  audit: 'audit',
  signIn: 'sign_in',
  notifications: 'notifications',
  jwks: 'jwks',
};

/** The config keys behind settings that differ from those the process started with. */
function restartOnlyChanges(started: Settings, next: Settings): string[] {
  return (Object.keys(RESTART_ONLY) as (keyof typeof RESTART_ONLY)[])
    .filter((key) => !isDeepStrictEqual(started[key], next[key]))
    .map((key) => RESTART_ONLY[key]);
}

/** One reload at a time: a signal during a reload waits for it, then reads the files again. */
export function reloader(deps: ReloadDeps): () => Promise<ReloadResult> {
  let last: Promise<unknown> = Promise.resolve();
  const collect = collectingWhenGrown(KEPT_CATALOG_GARBAGE_BYTES);
  return () => {
    const run = last.then(() => reloadOnce(deps, collect));
    last = run.catch(() => undefined);
    return run;
  };
}

async function reloadOnce(deps: ReloadDeps, collect: (force: boolean) => boolean): Promise<ReloadResult> {
  const { logger } = deps;
  let next: Generation;
  let restartNeeded: string[];
  try {
    const settings = deps.settings();
    restartNeeded = restartOnlyChanges(deps.started, settings);
    next = await deps.build(settings);
  } catch (err) {
    return refused(deps, err instanceof Error ? err.message : String(err));
  }
  const drift = await swapIn(deps, next);
  if (drift !== undefined) return refused(deps, drift);
  for (const warning of [...next.catalog.warnings, ...next.engine.warnings]) {
    logger.warn('reload', { detail: warning });
  }
  // The replaced catalog and engine are garbage now (swapIn held them for its rollback, and has
  // returned). A reload that loaded documents compacts the heap (compactHeap): one collection alone
  // freed the old catalog but left V8 holding its pages, and the next reload's parse came on top
  // (Microsoft Graph, five reloads of a changed document: 266-270 MiB at the peak with one, 234-235
  // with three; 293-297 while swapIn's frame still held the replaced catalog at the collection).
  // A kept catalog left only an engine's worth of garbage and no parsing: collected once such
  // reloads have left enough of it (a pause of 50 ms for 60 ms reloads of Graph otherwise).
  if (next.documentsUnchanged) collect(false);
  else await compactHeap(() => collect(true));
  deps.counted('success');
  logger.info('reloaded', {
    capabilities: next.catalog.capabilities.length,
    documents: next.documentsUnchanged ? 'unchanged' : 'loaded',
    apis_kept: next.keptApis ?? 0,
  });
  // Names only: some of these settings are secrets (tokens, sign-in).
  if (restartNeeded.length > 0) {
    logger.warn(
      'reload: changed settings take a restart; the values the process started with stay in force',
      {
        keys: restartNeeded,
      },
    );
  }
  return {
    ok: true,
    capabilities: next.catalog.capabilities.length,
    ...(restartNeeded.length > 0 ? { restartNeeded } : {}),
  };
}

/**
 * Puts `next` in force and applies its policy's hosts and drift (§2.8, §2.12); when they cannot be
 * applied, puts the generation it replaced back and says why. Its own function so that the
 * replaced generation is held only here, for the rollback, and is garbage once it returns.
 */
async function swapIn(deps: ReloadDeps, next: Generation): Promise<string | undefined> {
  const { ctx } = deps;
  const previous = { catalog: ctx.catalog, policy: ctx.policy, engine: deps.engine() };
  // No await between the swap and drift's write: the swap clears the hot cache, and the store
  // serves calls in the order they are made (sqlite-async-store.ts), so no request reads a grant
  // under the new catalog before drift has suspended it.
  deps.install(next.engine, next.catalog);
  swapDocuments(ctx, { catalog: next.catalog, policy: next.policy });
  try {
    const applied = await applyHostsAndDrift(ctx);
    logSkippedPolicyHosts(deps.logger, applied.skipped);
    logDrift(deps.logger, applied.drift);
    return undefined;
  } catch (err) {
    // Without drift a changed capability would run on its old approval: back to the last good.
    // The transaction rolled back, so no host of the refused policy was applied either.
    deps.install(previous.engine, previous.catalog);
    swapDocuments(ctx, { catalog: previous.catalog, policy: previous.policy });
    return `the policy's hosts and drift could not be applied: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/**
 * The policy's hosts (§2.8: a changed default capability, a new host) and drift in one
 * transaction: a reload refused because either failed leaves the database as the last good
 * version had it, as the documents are. Two writes would not: hosts committed, then drift failed,
 * and the documents put back would be served over the new policy's hosts.
 */
function applyHostsAndDrift(
  ctx: ProtocolContext,
): Promise<{ skipped: SkippedPolicyHost[]; drift: DriftOutcome }> {
  return outlastingConflicts(() =>
    ctx.write(async (tx, after) => {
      const skipped = await applyPolicyHostsIn(ctx, tx);
      const drift = await applyDrift(joining(ctx, tx, after));
      return { skipped, drift };
    }),
  );
}

/**
 * `ctx` whose `write` runs in `tx` rather than a transaction of its own (see applyHostsAndDrift).
 * A copy taken now: its catalog and policy are those just swapped in.
 */
function joining(ctx: ProtocolContext, tx: StoreWriter, after: AfterCommit): ProtocolContext {
  return { ...ctx, write: (fn) => fn(tx, after) };
}

function refused(deps: ReloadDeps, error: string): ReloadResult {
  deps.counted('failure');
  deps.logger.error('reload refused: the last good configuration stays in force', { error });
  return { ok: false, error };
}
