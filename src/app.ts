/**
 * Composition root: settings → catalog → listeners → (mock upstream) → engine → storage → routes,
 * and the proxy's lifetime (reload, maintenance, shutdown). Each step is a module of src/start/;
 * which endpoints are served on which listener is routes.ts. The two are the only modules that
 * know every concrete part.
 */
import type { Registry } from 'prom-client';
import { systemClock, type Clock } from './clock.js';
import { describeDatabase } from './config/database.js';
import type { Settings } from './config/settings.js';
import { SchemaCompilers } from './protocol/argument-validators.js';
import { buildEngine, type BuiltEngine, type EngineShared } from './engine.js';
import { createLogger, type Logger } from './log.js';
import { Metrics, type Exposition } from './metrics.js';
import { WebhookNotifier, systemTimers, type Timers } from './notify/webhook.js';
import type { Catalog } from './openapi/catalog.js';
import { defaultPolicy, loadPolicyFile, type Policy } from './policy/policy.js';
import { ApprovalEvents } from './protocol/approval-events.js';
import { createContext, type ProtocolContext } from './protocol/context.js';
import { loadEd25519 } from './protocol/ed25519.js';
import { ExecutionLog } from './protocol/execution-log.js';
import { InFlightSlots } from './protocol/in-flight.js';
import { createJwksCache } from './protocol/jwks/index.js';
import { reloader, type ReloadResult } from './reload.js';
import { mountRoutes } from './routes.js';
import { adoptDocuments, openDatabase } from './start/database.js';
import { openListeners, type Listeners } from './start/listeners.js';
import {
  MAINTENANCE_EVERY_MS,
  RETENTION_EVERY_MS,
  activityPruning,
  maintenanceRun,
  repeat,
} from './start/maintenance.js';
import { ServedCatalogs } from './start/served-catalog.js';
import { Teardown } from './start/teardown.js';
import { ValidatorWarmUp } from './start/warm-up.js';
import type { Storage } from './storage/open.js';
import { UpstreamClient } from './upstream/client.js';
import { startMockUpstream, type MockUpstream } from './upstream/mock-server.js';
import { OAuthTokens } from './upstream/oauth.js';
import { RetiredSecrets } from './upstream/retired-secrets.js';
import { localLimiter, RateLimiter, type Limiter } from './util/rate-limit.js';

export interface RunningProxy {
  /** Where the server listens, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /** Where the internal listener (server.internal_port) listens, when configured. */
  readonly internalUrl?: string;
  readonly issuer: string;
  readonly catalog: Catalog;
  readonly mock?: MockUpstream;
  readonly policy: Policy;
  /** The protocol state (store, caches, clock); tests drive maintenance through it. */
  readonly protocol: ProtocolContext;
  /** One maintenance run now (start/maintenance.ts; every 30 s otherwise); tests drive it. */
  maintain(): Promise<void>;
  /** Deletes activity past `audit.retention` in batches (§9.2; every minute); how many. */
  pruneActivity(): Promise<number>;
  /** The base URL each API's operations are called at. */
  upstreamFor(apiId: string): string | undefined;
  /** Commits queued execution records now (they are otherwise group-committed; audit.commit_window); for tests. */
  flushActivity(): Promise<void>;
  /** Upstream calls in flight (fair share); tests check that every path gives its slot back. */
  readonly inFlight: InFlightSlots;
  /** The approval webhook (config `notifications.webhook`), when configured: its counters. */
  readonly notifier?: Pick<WebhookNotifier, 'stats' | 'whenIdle'>;
  /** §10.10.2 notification streams open now (tests check that none is left behind). */
  readonly approvalStreams: { readonly open: number };
  /**
   * Re-reads the config's API list, the OpenAPI documents and the policy, and swaps them in
   * atomically (SIGHUP, `--watch`; README "Live changes"); an invalid version is refused whole.
   */
  reload(): Promise<ReloadResult>;
  close(): Promise<void>;
}

export interface ProxyDeps {
  readonly logger?: Logger;
  /** Where the log lines go when no `logger` is given (default standard output); tests capture them. */
  readonly logSink?: (line: string) => void;
  /** Tests pass a controllable clock; production uses the system clock. */
  readonly clock?: Clock;
  /**
   * Tests run the webhook's retries and timeouts, and the notification streams' expiry timers and
   * heartbeats (§10.10.2), by hand; production uses real timers.
   */
  readonly timers?: Timers;
  /** Reads the settings again for a reload (the CLI: same flags, config file re-read); default: unchanged. */
  readonly rereadSettings?: () => Settings;
  /**
   * What `GET /metrics` answers, given this process's registry; default: that registry alone. A
   * worker of `--workers` answers every worker's metrics aggregated (src/cluster/metrics.ts).
   */
  readonly metricsExposition?: (registry: Registry) => () => Promise<Exposition>;
}

/** How long shutdown waits for calls cut off by the grace period to end and leave their record. */
const CUT_OFF_CALLS_MS = 2_000;

export async function startProxy(settings: Settings, deps: ProxyDeps = {}): Promise<RunningProxy> {
  const logger = deps.logger ?? createLogger(settings.logLevel, deps.logSink, Date.now, settings.logFormat);
  const clock = deps.clock ?? systemClock;
  const timers = deps.timers ?? systemTimers;
  const catalogs = new ServedCatalogs();
  const { catalog, formats } = await catalogs.load(settings);
  catalogs.installed(catalog);
  for (const warning of catalog.warnings) logger.warn('openapi', { detail: warning });
  const policy = settings.policyFile ? loadPolicyFile(settings.policyFile, catalog) : defaultPolicy(catalog);
  // Every JWT is verified with it: loaded now, so that a binding that cannot load stops the start.
  loadEd25519();
  const metrics = new Metrics({
    capabilities: catalog.capabilities.map((c) => c.name),
    apis: catalog.apis.map((a) => a.id),
  });

  // Listeners first, then every other check that can fail, then storage: a failed start writes
  // nothing (no database file, no directory) and closes what it opened (teardown.ts). The routers
  // stay empty until start-up ends: until then /readyz is not there either (issue 12).
  const teardown = new Teardown();
  const listeners = await openListeners(settings, { logger, metrics }, teardown);
  const mock = settings.mockUpstream
    ? await teardown.step(startMockUpstream, catalog, { logger })
    : undefined;
  if (mock) teardown.add(() => mock.close());
  const client = new UpstreamClient();
  teardown.add(() => client.close());
  const shared: EngineShared = {
    client,
    oauth: new OAuthTokens(clock, client.dispatcher),
    retired: new RetiredSecrets(clock),
    ...(mock ? { mockUrlFor: (apiId: string) => mock.baseUrlFor(apiId) } : {}),
    observeUpstream: (api, seconds) => metrics.upstreamCall(api, seconds),
    compilers: new SchemaCompilers((seconds) => metrics.validatorCompiled(seconds)),
  };
  let engine = await teardown.step(buildEngine, settings, catalog, formats, shared);
  const storage = await teardown.step(() => openDatabase(settings, { clock, logger, metrics }));
  teardown.add(() => storage.close());
  const notifier = settings.notifications.webhook
    ? new WebhookNotifier(settings.notifications.webhook, {
        clock,
        logger,
        ...(deps.timers ? { timers: deps.timers } : {}),
      })
    : undefined;
  const ctx = createContext({
    store: storage.store,
    catalog,
    policy,
    clock,
    logger,
    issuer: () => listeners.issuer,
    ...(storage.replayLedger ? { replayLedger: storage.replayLedger } : {}),
    ...(storage.limiter ? { limiter: storage.limiter } : {}),
    ...(notifier ? { notifier } : {}),
    approvalEvents: new ApprovalEvents(),
    jwks: createJwksCache(settings.jwks, clock),
  });
  metrics.watch({
    pendingApprovals: () => storage.store.countPendingApprovals(clock.now()),
    replayCacheSize: () => ctx.replay.size,
  });
  await teardown.step(() => adoptDocuments(ctx, storage, settings));

  let ready = false;
  const executionLog = new ExecutionLog(storage.store, logger, settings.audit);
  const inFlight = new InFlightSlots(() => ctx.policy.rateLimits.inFlight);
  // With upstream calls in flight more requests are under way: their jtis share one write a turn.
  storage.replayLedger?.groupWhile?.(() => inFlight.count() > 0);
  const routes = await teardown.step(mountRoutes, {
    settings,
    catalog,
    policy,
    ctx,
    router: listeners.router,
    internalRouter: listeners.internalRouter,
    logger,
    clock,
    metrics,
    timers,
    issuer: () => listeners.issuer,
    engine: () => engine,
    budgets: budgetsOf(storage, clock),
    executionLog,
    inFlight,
    ready: () => ready,
    metricsExposition: deps.metricsExposition,
  });

  ctx.usage.start();
  executionLog.start();
  // The provider's metadata, fetched in the background: a provider that is down delays nothing.
  routes.oidc?.warm();
  const warmUp = new ValidatorWarmUp(storage.store, logger);
  warmUp.warm(engine.validators, catalog);
  const maintain = maintenanceRun({ ctx, storage, longestCallMs: () => engine.executor.longestCallMs() });
  const pruneActivity = activityPruning(settings.audit, { ctx });
  const stopMaintenance = repeat('maintenance', MAINTENANCE_EVERY_MS, maintain, logger);
  const stopPruning = repeat('activity retention', RETENTION_EVERY_MS, pruneActivity, logger);
  const reload = reloader({
    ctx,
    started: settings,
    logger,
    counted: (result) => metrics.configReload(result),
    settings: deps.rereadSettings ?? (() => settings),
    build: async (next) => {
      const served = await catalogs.load(next);
      const nextPolicy = next.policyFile
        ? loadPolicyFile(next.policyFile, served.catalog)
        : defaultPolicy(served.catalog);
      const built = buildEngine(next, served.catalog, served.formats, shared);
      // Compiled in the background from now: the first calls after the swap need not pay for it.
      warmUp.warm(built.validators, served.catalog);
      return {
        catalog: served.catalog,
        policy: nextPolicy,
        engine: built,
        documentsUnchanged: served.documentsUnchanged,
        keptApis: served.keptApis,
      };
    },
    engine: () => engine,
    install: (next, nextCatalog) => {
      shared.retired?.retire(engine.executor.staticSecrets(), next.executor.staticSecrets());
      engine = next;
      catalogs.installed(nextCatalog);
      mock?.answerFor(nextCatalog);
      metrics.catalogChanged(nextCatalog.capabilities.map((c) => c.name));
    },
  });
  ready = true;
  logStarted(logger, { settings, catalog, listeners, engine, mock });

  let closing: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    // Unready first and new requests refused, while the listeners stay open (a probe gets 503,
    // not a refused connection); streams end; then requests in progress get up to
    // server.shutdown_grace to finish before their connections are closed.
    ready = false;
    listeners.drain.begin();
    routes.execution.closeStreams();
    routes.approvalStreams.closeStreams();
    await drained(listeners, settings.connections.shutdownGraceMs, timers, logger);
    await listeners.close();
    // Calls cut off above end as their connections close (the upstream call is cancelled): their
    // records are written before the log is (waiting at most CUT_OFF_CALLS_MS).
    await new Promise<void>((resolve) => {
      const cancel = timers.set(resolve, CUT_OFF_CALLS_MS);
      void inFlight.whenIdle().then(() => {
        cancel();
        resolve();
      });
    });
    stopMaintenance();
    stopPruning();
    warmUp.stop();
    await ctx.usage.stop();
    await executionLog.stop();
    await storage.close();
    await notifier?.close();
    await client.close();
    await shared.compilers.close();
    await mock?.close();
  };
  return {
    url: listeners.url,
    ...(listeners.internalUrl ? { internalUrl: listeners.internalUrl } : {}),
    issuer: listeners.issuer,
    // The documents in force: a reload replaces them on the context.
    get catalog() {
      return ctx.catalog;
    },
    ...(mock ? { mock } : {}),
    get policy() {
      return ctx.policy;
    },
    protocol: ctx,
    reload,
    maintain,
    pruneActivity,
    upstreamFor: (apiId) => engine.upstreamFor(apiId),
    flushActivity: () => executionLog.flush(),
    inFlight,
    ...(notifier ? { notifier } : {}),
    approvalStreams: routes.approvalStreams,
    close: () => (closing ??= shutdown()),
  };
}

/** The replicas' shared budgets, else a limiter of this process's own per use (each its own memory bound). */
function budgetsOf(storage: Storage, clock: Clock): () => Limiter {
  return () => storage.limiter ?? localLimiter(new RateLimiter(clock));
}

/** Until every request in progress has finished, or `graceMs` has passed (then they are cut off). */
async function drained(listeners: Listeners, graceMs: number, timers: Timers, logger: Logger): Promise<void> {
  const { drain } = listeners;
  await new Promise<void>((resolve) => {
    const cancel = timers.set(resolve, graceMs);
    void drain.idle().then(() => {
      cancel();
      resolve();
    });
  });
  if (drain.inProgress > 0) {
    logger.warn('shutdown grace over; closing requests still in progress', { requests: drain.inProgress });
  }
}

/** After listening, so an operator error (port taken) is the only thing a failed start prints. */
function logStarted(
  logger: Logger,
  started: {
    readonly settings: Settings;
    readonly catalog: Catalog;
    readonly listeners: Listeners;
    readonly engine: BuiltEngine;
    readonly mock: MockUpstream | undefined;
  },
): void {
  const { settings, catalog, listeners, engine, mock } = started;
  for (const warning of engine.warnings) logger.warn('execution', { detail: warning });
  for (const api of catalog.apis) {
    logger.info('api loaded', {
      api: api.id,
      source: api.source,
      capabilities: catalog.capabilities.filter((c) => c.operation.apiId === api.id).length,
      upstream: engine.upstreamFor(api.id) ?? null,
      mock: mock !== undefined,
    });
  }
  logger.info('listening', {
    url: listeners.url,
    ...(listeners.internalUrl ? { internal_url: listeners.internalUrl } : {}),
    issuer: listeners.issuer,
    capabilities: catalog.capabilities.length,
    database: describeDatabase(settings.database),
    policy: settings.policyFile ?? '(default)',
    admin_api: settings.adminToken !== undefined,
  });
}
