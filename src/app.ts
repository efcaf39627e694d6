/**
 * Composition root: settings → catalog → (mock upstream) → storage → routes → listening server,
 * and the proxy's lifetime (reload, maintenance, shutdown). Which endpoints are served on which
 * listener is routes.ts; the two are the only modules that know every concrete part.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { describeDatabase } from './config/database.js';
import type { Settings } from './config/settings.js';
import { UserError } from './errors.js';
import { createLogger, type Logger } from './log.js';
import type { Catalog } from './openapi/catalog.js';
import { loadCatalog } from './openapi/load-catalog.js';
import { Router } from './http/router.js';
import { ClientAddress } from './http/client-address.js';
import { Drain } from './http/drain.js';
import { createHttpServer } from './http/server.js';
import { outcomeUnknownAfterMs, sweepPerCalls } from './protocol/per-call-decide.js';
import { startMockUpstream, type MockUpstream } from './upstream/mock-server.js';
import { systemClock, type Clock } from './clock.js';
import { defaultPolicy, loadPolicyFile, type Policy } from './policy/policy.js';
import { ActivityRetention } from './protocol/activity-retention.js';
import { expireApprovals } from './protocol/approvals.js';
import { EXPIRY_BATCH, PENDING_BATCH, SWEEP_BATCH, inBatches } from './protocol/sweeps.js';
import { createContext, type ProtocolContext } from './protocol/context.js';
import { applyPolicyHosts } from './protocol/hosts.js';
import { applyDrift, logDrift } from './protocol/drift.js';
import { InFlightSlots } from './protocol/in-flight.js';
import { localLimiter, RateLimiter, type Limiter } from './util/rate-limit.js';
import { StoreUnavailableError } from './storage/errors.js';
import { openStorage, type Storage } from './storage/open.js';
import { replicaChangeHandlers } from './protocol/replica-changes.js';
import { pinArguments, PinError } from './openapi/pins.js';
import { withoutProxyHeaders } from './openapi/proxy-headers.js';
import { ExecutionLog } from './protocol/execution-log.js';
import { UpstreamClient } from './upstream/client.js';
import { buildEngine, type BuiltEngine, type EngineShared } from './engine.js';
import { OAuthTokens } from './upstream/oauth.js';
import { WebhookNotifier, systemTimers, type Timers } from './notify/webhook.js';
import { ApprovalEvents } from './protocol/approval-events.js';
import { createJwksCache } from './protocol/jwks/index.js';
import { loadEd25519 } from './protocol/ed25519.js';
import type { Registry } from 'prom-client';
import { Metrics, type Exposition } from './metrics.js';
import { reloader, type ReloadResult } from './reload.js';
import { recordRequestMetrics } from './http/request-metrics.js';
import { mountRoutes } from './routes.js';

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
  /**
   * Expires unanswered approvals and deletes stale pending agents and hosts (§7.1, §10.9),
   * expired sessions and async jobs, each in bounded batches (sweeps.ts).
   */
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

export async function startProxy(settings: Settings, deps: ProxyDeps = {}): Promise<RunningProxy> {
  const logger = deps.logger ?? createLogger(settings.logLevel, deps.logSink, Date.now, settings.logFormat);
  const clock = deps.clock ?? systemClock;
  const { catalog, formats } = await loadServedCatalog(settings);
  for (const warning of catalog.warnings) logger.warn('openapi', { detail: warning });

  const policy = settings.policyFile ? loadPolicyFile(settings.policyFile, catalog) : defaultPolicy(catalog);
  // Every JWT is verified with it: loaded now, so that a binding that cannot load stops the start.
  loadEd25519();
  const metrics = new Metrics({
    capabilities: catalog.capabilities.map((c) => c.name),
    apis: catalog.apis.map((a) => a.id),
  });
  // Listeners first, then every other check that can fail, then storage: a failed start writes
  // nothing (no database file, no directory). Routes are added to the routers below; until
  // start-up ends, /readyz is not there either (issue 12).
  let issuer = settings.issuer ?? '';
  const router = new Router();
  const internalRouter = settings.internal ? new Router() : undefined;
  let closing: Promise<void> | undefined;
  const drain = new Drain();
  const timers = deps.timers ?? systemTimers;
  const serverOptions = {
    logger,
    maxBodyBytes: settings.maxBodyBytes,
    clientAddress: new ClientAddress(settings.trustedProxies),
    connections: settings.connections,
    requestIdHeader: settings.requestIdHeader,
    issuer: () => issuer,
    // One drain for both listeners: shutdown waits for requests on either.
    drain,
    onDecision: recordRequestMetrics(metrics),
  };
  const server = createHttpServer({ router, ...serverOptions });
  const internal = internalRouter && createHttpServer({ router: internalRouter, ...serverOptions });
  try {
    await listen(server, settings.port, settings.host);
    if (internal && settings.internal) {
      await listen(internal, settings.internal.port, settings.internal.host).catch(async (err: unknown) => {
        await closeServer(server);
        throw err;
      });
    }
  } catch (err) {
    // Nothing else exists yet: a taken port leaves no database behind.
    await closeServer(server);
    throw err;
  }
  const closeListeners = async (): Promise<void> => {
    await Promise.all([closeServer(server), internal && closeServer(internal)]);
  };
  const mock = settings.mockUpstream ? await startMockUpstream(catalog, { logger }) : undefined;
  const client = new UpstreamClient();
  const shared: EngineShared = {
    client,
    oauth: new OAuthTokens(clock, client.dispatcher),
    ...(mock ? { mockUrlFor: (apiId: string) => mock.baseUrlFor(apiId) } : {}),
    observeUpstream: (api, seconds) => metrics.upstreamCall(api, seconds),
  };
  let engine: BuiltEngine;
  try {
    engine = buildEngine(settings, catalog, formats, shared);
  } catch (err) {
    await mock?.close();
    await client.close();
    await closeListeners();
    throw err;
  }
  const closeStarted = async (): Promise<void> => {
    await mock?.close();
    await engine.executor.close();
    await closeListeners();
  };
  // SQLite: the replay journal beside the file, this process's own limiter. PostgreSQL: the replay
  // ledger, the rate budgets and change notices the replicas share (storage/open.ts, issue 13).
  let storage: Storage;
  try {
    storage = await openStorage(settings.database, clock, {
      onWrite: (kind, s) => metrics.databaseWrite(kind, s),
      // The pool replaces the connection; requests meanwhile get 503 from the store's error.
      onConnectionError: (err) => logger.warn('database connection lost', { cause: err.message }),
    });
  } catch (err) {
    await closeStarted();
    throw startupDatabaseError(err, settings.database);
  }
  const { store } = storage;
  const closeStorage = (): Promise<void> => storage.close();
  /** The replicas' shared budgets, else a limiter of this process's own per use (each its own memory bound). */
  const budgets = (): Limiter => storage.limiter ?? localLimiter(new RateLimiter(clock));
  const webhook = settings.notifications.webhook;
  const notifier = webhook
    ? new WebhookNotifier(webhook, { clock, logger, ...(deps.timers ? { timers: deps.timers } : {}) })
    : undefined;
  const ctx = createContext({
    store,
    catalog,
    policy,
    clock,
    logger,
    issuer: () => issuer,
    ...(storage.replayLedger ? { replayLedger: storage.replayLedger } : {}),
    ...(storage.limiter ? { limiter: storage.limiter } : {}),
    ...(notifier ? { notifier } : {}),
    approvalEvents: new ApprovalEvents(),
    jwks: createJwksCache(settings.jwks, clock),
  });
  metrics.watch({
    pendingApprovals: () => store.countPendingApprovals(clock.now()),
    replayCacheSize: () => ctx.replay.size,
  });
  try {
    await applyPolicyHosts(ctx);
    logDrift(logger, await applyDrift(ctx));
    // Other replicas' commits reach this one's caches and streams (protocol/replica-changes.ts).
    await storage.follow?.(replicaChangeHandlers(ctx));
  } catch (err) {
    await closeStorage();
    await closeStarted();
    // The database went away right after opening: the same start-up error as above.
    throw err instanceof StoreUnavailableError ? startupDatabaseError(err, settings.database) : err;
  }
  // Each sweep runs in bounded batches, yielding between them (sweeps.ts): no sweep holds the
  // event loop for more than one batch.
  const maintain = async (): Promise<void> => {
    await inBatches(() => expireApprovals(ctx, EXPIRY_BATCH), EXPIRY_BATCH);
    const removed = { agents: 0, hosts: 0 };
    await inBatches(async () => {
      const before = clock.now() - ctx.policy.lifetimes.pendingCleanupMs;
      const n = await store.deleteStalePending(before, PENDING_BATCH);
      removed.agents += n.agents;
      removed.hosts += n.hosts;
      return Math.max(n.agents, n.hosts);
    }, PENDING_BATCH);
    if (removed.agents || removed.hosts) logger.info('pending cleanup', { ...removed });
    await inBatches(() => store.deleteExpiredSessions(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    // Pending OIDC sign-ins, WebAuthn challenges, used TOTP steps (shared by replicas, issue 13).
    await inBatches(() => store.deleteExpiredSignInState(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    const jobs = await inBatches(() => store.deleteExpiredAsyncJobs(clock.now(), SWEEP_BATCH), SWEEP_BATCH);
    if (jobs) logger.info('expired async executions removed', { jobs });
    const calls = await sweepPerCalls(ctx, outcomeUnknownAfterMs(engine.executor.longestCallMs()));
    if (calls.expired || calls.abandoned || calls.deleted)
      logger.info('per-call approvals swept', { ...calls });
    for (const { batch, run } of storage.sweeps) {
      await inBatches(() => Promise.resolve(run(clock.now(), batch)), batch);
    }
  };

  const upstreamFor = (apiId: string): string | undefined => engine.upstreamFor(apiId);
  const problems = { warnings: engine.warnings };
  const executionLog = new ExecutionLog(store, logger, settings.audit);
  const warmup = new AbortController();

  let ready = false;
  const inFlight = new InFlightSlots(policy.rateLimits.inFlight);
  // With upstream calls in flight more requests are under way: their jtis share one write a turn.
  storage.replayLedger?.groupWhile?.(() => inFlight.count() > 0);
  const { execution, approvalStreams, oidc } = await mountRoutes({
    settings,
    catalog,
    policy,
    ctx,
    router,
    internalRouter,
    logger,
    clock,
    metrics,
    timers,
    issuer: () => issuer,
    engine: () => engine,
    budgets,
    executionLog,
    inFlight,
    ready: () => ready,
    metricsExposition: deps.metricsExposition,
  });

  ctx.usage.start();
  executionLog.start();
  // The provider's metadata, fetched in the background: a provider that is down delays nothing.
  oidc?.warm();
  const warmGranted = (validators: BuiltEngine['validators'], served: Catalog): void => {
    // Only what someone holds a grant on: executions need no other (argument-validators.ts).
    store
      .grantedCapabilities(served.capabilities.map((c) => c.name))
      .then((held) =>
        validators.warm(
          served.capabilities.filter((c) => held.has(c.name)),
          warmup.signal,
        ),
      )
      .catch((err: unknown) => {
        // Shutting down closed the store under the query: nothing to report.
        if (!warmup.signal.aborted) backgroundFailure(logger, 'validator warm-up', err);
      });
  };
  warmGranted(engine.validators, catalog);
  let maintaining = false;
  const maintenance = setInterval(() => {
    // A run that is still going (a large backlog) is not overlapped by the next.
    if (maintaining) return;
    maintaining = true;
    maintain()
      .catch((err: unknown) => backgroundFailure(logger, 'maintenance', err))
      .finally(() => {
        maintaining = false;
      });
  }, 30_000).unref();
  // §9.2 retention: batched off the request path; a run that finds a backlog leaves the rest to the next.
  const retention =
    settings.audit.retentionMs === null
      ? undefined
      : new ActivityRetention(store, clock, settings.audit.retentionMs);
  const pruneActivity = async (): Promise<number> => {
    const deleted = (await retention?.prune()) ?? 0;
    if (deleted) logger.info('activity past retention deleted', { records: deleted });
    return deleted;
  };
  const pruning = setInterval(() => {
    pruneActivity().catch((err: unknown) => backgroundFailure(logger, 'activity retention', err));
  }, 60_000).unref();
  const reload = reloader({
    ctx,
    logger,
    counted: (result) => metrics.configReload(result),
    settings: deps.rereadSettings ?? (() => settings),
    build: async (next) => {
      const served = await loadServedCatalog(next);
      const nextPolicy = next.policyFile
        ? loadPolicyFile(next.policyFile, served.catalog)
        : defaultPolicy(served.catalog);
      const built = buildEngine(next, served.catalog, served.formats, shared);
      // Compiled in the background from now: the first calls after the swap need not pay for it.
      warmGranted(built.validators, served.catalog);
      return { catalog: served.catalog, policy: nextPolicy, engine: built };
    },
    engine: () => engine,
    install: (next, nextCatalog) => {
      engine = next;
      metrics.catalogChanged(nextCatalog.capabilities.map((c) => c.name));
    },
  });
  const url = `http://${hostForUrl(settings.host)}:${(server.address() as AddressInfo).port}`;
  const internalUrl =
    internal && settings.internal
      ? `http://${hostForUrl(settings.internal.host)}:${(internal.address() as AddressInfo).port}`
      : undefined;
  issuer ||= url;
  ready = true;

  // After listening, so an operator error (port taken) is the only thing a failed start prints.
  for (const warning of problems.warnings) logger.warn('execution', { detail: warning });
  for (const api of catalog.apis) {
    logger.info('api loaded', {
      api: api.id,
      source: api.source,
      capabilities: catalog.capabilities.filter((c) => c.operation.apiId === api.id).length,
      upstream: upstreamFor(api.id) ?? null,
      mock: mock !== undefined,
    });
  }
  logger.info('listening', {
    url,
    ...(internalUrl ? { internal_url: internalUrl } : {}),
    issuer,
    capabilities: catalog.capabilities.length,
    database: describeDatabase(settings.database),
    policy: settings.policyFile ?? '(default)',
    admin_api: settings.adminToken !== undefined,
  });

  return {
    url,
    ...(internalUrl ? { internalUrl } : {}),
    issuer,
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
    upstreamFor,
    flushActivity: () => executionLog.flush(),
    inFlight,
    ...(notifier ? { notifier } : {}),
    approvalStreams,
    close: () => {
      closing ??= (async () => {
        // Unready first and new requests refused, while the listener stays open (a probe gets
        // 503, not a refused connection); streams end; then requests in progress get up to
        // server.shutdown_grace to finish before their connections are closed.
        ready = false;
        drain.begin();
        execution.closeStreams();
        approvalStreams.closeStreams();
        await new Promise<void>((resolve) => {
          const cancel = timers.set(resolve, settings.connections.shutdownGraceMs);
          void drain.idle().then(() => {
            cancel();
            resolve();
          });
        });
        const cut = drain.inProgress;
        if (cut > 0)
          logger.warn('shutdown grace over; closing requests still in progress', { requests: cut });
        await Promise.all([closeServer(server), internal && closeServer(internal)]);
        clearInterval(maintenance);
        clearInterval(pruning);
        warmup.abort();
        await ctx.usage.stop();
        await executionLog.stop();
        await closeStorage();
        await notifier?.close();
        await engine.executor.close();
        await mock?.close();
      })();
      return closing;
    },
  };
}

/**
 * The catalog as served: every API's document derived, then the operator's pinned arguments
 * removed from the inputs. The `capabilities` command shows exactly this.
 */
export async function loadServedCatalog(
  settings: Settings,
): Promise<{ catalog: Catalog; formats: ReadonlySet<string> }> {
  const loaded = await loadCatalog(settings.apis, {
    allowRemoteRefs: settings.allowRemoteRefs,
    allowHttp: settings.allowHttpSpecs,
    fetchLimits: {
      maxBytes: settings.specMaxBytes,
      connectTimeoutMs: settings.specTimeoutMs,
      readTimeoutMs: settings.specTimeoutMs,
    },
  });
  const pins = new Map<string, string[]>();
  for (const api of settings.apis) {
    for (const [name, op] of Object.entries(api.execution.operations)) {
      const pinned = Object.keys(op.pin);
      if (pinned.length > 0) pins.set(name, pinned);
    }
  }
  // Identity and static headers are the proxy's: a header parameter of their name is no input.
  const proxyHeaders = new Map(
    loaded.apis.map((api, i) => {
      const execution = (settings.apis[i] as (typeof settings.apis)[number]).execution;
      return [
        api.id,
        [...Object.keys(execution.headers), ...Object.values(execution.identityHeaders ?? {})],
      ] as const;
    }),
  );
  try {
    return {
      catalog: withoutProxyHeaders(pinArguments(loaded, pins), proxyHeaders),
      formats: loaded.formats,
    };
  } catch (err) {
    if (err instanceof PinError) throw new UserError(`config: operations: ${err.message}`);
    throw err;
  }
}

/**
 * Sweeps and retention during a database outage (issue 13): the run stops at its first refused
 * batch and the next run (30 s, 60 s later) starts over; what they delete is only due, never
 * acknowledged state, so nothing is kept. A warning, not an error: the outage is logged already.
 */
function backgroundFailure(logger: Logger, what: string, err: unknown): void {
  const error = err instanceof Error ? err.message : String(err);
  if (err instanceof StoreUnavailableError) logger.warn(`${what} skipped: database unavailable`, { error });
  else logger.error(`${what} failed`, { error });
}

/**
 * A database that cannot be opened at start-up: the proxy does not start (exit code 2, one line
 * naming the database without its password, and the cause). Waiting for it instead would hide a
 * wrong address or password behind a process that looks alive; an orchestrator's restart policy
 * (Kubernetes, systemd, compose `restart:`) already retries with a backoff, and a replica already
 * running rides an outage out (503 and unready, then ready again by itself).
 */
function startupDatabaseError(err: unknown, at: Settings['database']): unknown {
  if (at.kind !== 'postgres' || err instanceof UserError) return err;
  let cause = err instanceof Error ? err.message : String(err);
  // The driver's messages do not quote the password; should one ever do, it is not printed.
  for (const secret of passwordForms(at.url)) cause = cause.replaceAll(secret, '***');
  const why = err instanceof StoreUnavailableError ? 'cannot be reached' : 'cannot be opened';
  return new UserError(`database ${describeDatabase(at)} ${why}: ${cause}`);
}

/** The URL's password as written (percent-encoded) and decoded; none when it has none. */
function passwordForms(url: string): string[] {
  try {
    const raw = new URL(url).password;
    return raw === '' ? [] : [raw, decodeURIComponent(raw)];
  } catch {
    return [];
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(new UserError(`cannot listen on ${host}:${port}: ${err.code ?? err.message}`));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Stops accepting, closes idle keep-alive connections, and waits for the busy ones to finish. */
/** Stops listening and closes every connection (after the drain: whatever still runs is cut off). */
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
