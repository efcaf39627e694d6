/**
 * Which endpoints the proxy serves, and on which listener: the protocol's (discovery,
 * capabilities, registration, device flow, execute …) on the public port; the sign-in, account
 * and approval pages when sign-in is configured; the operator's (admin API, metrics) on the
 * internal listener when there is one, else on the public port behind the admin token; health
 * probes on both. Part of the composition root (app.ts), which owns everything's lifetime.
 */
import type { Settings } from './config/settings.js';
import type { Clock } from './clock.js';
import type { BuiltEngine } from './engine.js';
import type { Logger } from './log.js';
import type { Metrics, Exposition } from './metrics.js';
import type { Timers } from './notify/webhook.js';
import type { Catalog } from './openapi/catalog.js';
import type { ApiInfo } from './openapi/types.js';
import type { Policy } from './policy/policy.js';
import type { ProtocolContext } from './protocol/context.js';
import type { ExecutionLog } from './protocol/execution-log.js';
import type { InFlightSlots } from './protocol/in-flight.js';
import { CHALLENGE_BOUNDS, Passkeys, relyingParty } from './protocol/passkeys.js';
import type { OidcSignIn } from './protocol/oidc.js';
import { outcomeUnknownAfterMs } from './protocol/per-call-decide.js';
import { Sessions } from './protocol/sessions.js';
import { LocalSignIn } from './protocol/sign-in.js';
import { DatabaseReadiness, DEFAULT_READINESS } from './storage/readiness.js';
import { RateLimiter, type Limiter } from './util/rate-limit.js';
import { runPerCall } from './http/per-call-run.js';
import { PageAuth } from './http/page-auth.js';
import { RateLimits } from './http/rate-limits.js';
import type { Router } from './http/router.js';
import { accountRoutes } from './http/routes/account.js';
import { accountAgentRoutes, agentsAccountSection } from './http/routes/account-agents.js';
import { accountPasskeyRoutes, passkeysAccountSection } from './http/routes/account-passkeys.js';
import { adminRoutes } from './http/routes/admin.js';
import { agentRoutes } from './http/routes/agent.js';
import { approvalEventRoutes, type ApprovalEventRoutes } from './http/routes/approval-events.js';
import { approvalsRoutes } from './http/routes/approvals.js';
import { capabilityRoutes } from './http/routes/capabilities.js';
import { deviceRoutes } from './http/routes/device.js';
import { discoveryRoutes } from './http/routes/discovery.js';
import { executeRoutes, type ExecuteRoutes } from './http/routes/execute.js';
import { healthRoutes } from './http/routes/health.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { oidcRoutes } from './http/routes/oidc.js';
import { passkeyRoutes } from './http/routes/passkeys.js';
import { perCallRoutes } from './http/routes/per-call.js';
import { signInRoutes } from './http/routes/sign-in.js';
import { PresenceGate } from './http/steps/presence.js';
import { PASSKEY_PAGE_HEADERS } from './http/views/passkey-script.js';
import type { Registry } from 'prom-client';

export interface RouteDeps {
  readonly settings: Settings;
  /** The documents in force at start-up (a reload swaps them on `ctx`). */
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly ctx: ProtocolContext;
  readonly router: Router;
  /** The internal listener's router (server.internal_port), when there is one. */
  readonly internalRouter: Router | undefined;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly timers: Timers;
  /** Known once the server listens. */
  readonly issuer: () => string;
  /** The engine in force: a reload swaps it. */
  readonly engine: () => BuiltEngine;
  /** A rate budget: the replicas' shared one, else one of this process's own per use. */
  readonly budgets: () => Limiter;
  readonly executionLog: ExecutionLog;
  readonly inFlight: InFlightSlots;
  readonly ready: () => boolean;
  readonly metricsExposition: ((registry: Registry) => () => Promise<Exposition>) | undefined;
}

/** What the composition root still needs of the routes: their streams to end, the provider to warm. */
export interface MountedRoutes {
  readonly execution: ExecuteRoutes;
  readonly approvalStreams: ApprovalEventRoutes;
  readonly oidc?: OidcSignIn;
}

export async function mountRoutes(deps: RouteDeps): Promise<MountedRoutes> {
  const { settings, catalog, policy, ctx, router, internalRouter, logger, clock, metrics, timers } = deps;
  const { issuer, engine, budgets, executionLog, inFlight, ready, metricsExposition } = deps;
  const { store } = ctx;
  const providerName = settings.providerName ?? defaultProviderName(catalog.apis);
  discoveryRoutes(router, {
    issuer,
    providerName,
    description: settings.providerDescription ?? defaultDescription(catalog.apis),
    modes: () => ctx.policy.modes,
    approvalMethods: () => ctx.policy.approval.methods,
  });
  // The policy in force, read per request: a reload's rate limits apply at once.
  const limits = new RateLimits(
    budgets(),
    new RateLimiter(clock),
    () => ctx.policy,
    (limit) => metrics.rateLimited(limit),
  );
  capabilityRoutes(router, { ctx, limits, logger });
  const auth = new PageAuth(
    settings.signIn,
    new Sessions(store, clock, settings.signIn.sessionLifetimeMs),
    new LocalSignIn(settings.signIn.localUsers, budgets(), store, clock),
    issuer,
  );
  // §8.11 passkeys: the relying party is the issuer's host (known once the server listens).
  const passkeys = new Passkeys(
    store,
    clock,
    () => relyingParty(issuer(), providerName),
    CHALLENGE_BOUNDS,
    settings.signIn.firstPasskeyNeedsCode,
  );
  const presence = new PresenceGate(passkeys, () => ctx.policy.approval.requirePresence);
  deviceRoutes(router, { ctx, limits, auth, serverName: providerName, presence });
  if (auth.enabled) {
    signInRoutes(router, { auth, limits, serverName: providerName, passkeys });
    const flushActivity = (): Promise<void> => executionLog.flush();
    const account = accountRoutes(router, {
      auth,
      limits,
      serverName: providerName,
      sections: [
        passkeysAccountSection(auth, passkeys),
        agentsAccountSection(ctx, flushActivity, settings.audit.retentionMs),
      ],
      headers: PASSKEY_PAGE_HEADERS,
    });
    accountPasskeyRoutes(router, { auth, limits, passkeys, page: account });
    accountAgentRoutes(router, { serverName: providerName, ctx, auth, limits, page: account, flushActivity });
    passkeyRoutes(router, { ctx, auth, limits, passkeys, presence });
    approvalsRoutes(router, { ctx, limits, auth, serverName: providerName });
    perCallRoutes(router, {
      ctx,
      limits,
      auth,
      serverName: providerName,
      passkeys,
      longestCallMs: () => engine().executor.longestCallMs(),
      run: (r, requestId) =>
        runPerCall(
          { ctx, executor: engine().executor, inFlight, validators: engine().validators },
          r,
          requestId,
        ),
    });
  }
  // openid-client is loaded only when a provider is configured: several MiB of memory otherwise.
  const oidc = settings.signIn.oidc
    ? new (await import('./protocol/oidc.js')).OidcSignIn(
        settings.signIn.oidc,
        store,
        clock,
        settings.signIn.freshAuthMs,
        logger,
        () => `${issuer().replace(/\/+$/, '')}/sign-in/oidc/callback`,
      )
    : undefined;
  if (oidc) oidcRoutes(router, { auth, oidc, limits, serverName: providerName });
  agentRoutes(router, {
    ctx,
    limits,
    logger,
    maxBodyBytes: settings.maxBodyBytes,
    // The admin token also introspects, but not where agents are when the operator has a listener
    // of their own: there the public port would tell anyone whether a guessed admin token is right.
    introspectionTokens: [
      settings.introspectionToken,
      internalRouter ? undefined : settings.adminToken,
    ].filter((t): t is string => t !== undefined),
  });
  const approvalStreams = approvalEventRoutes(router, {
    ctx,
    limits,
    logger,
    timers,
  });
  const execution = executeRoutes(router, {
    ctx,
    limits,
    inFlight,
    engine,
    log: executionLog,
    settings: settings.execution,
    maxBodyBytes: settings.maxBodyBytes,
    logger,
  });
  // The operator's endpoints: on the internal listener when there is one, else on the public port
  // (/metrics there only with the admin token, README "Metrics").
  const operatorRouter = internalRouter ?? router;
  const { adminToken } = settings;
  if (adminToken !== undefined) {
    adminRoutes(operatorRouter, {
      ctx,
      limits,
      logger,
      adminToken,
      maxBodyBytes: settings.maxBodyBytes,
      flushActivity: () => executionLog.flush(),
      perCallUnknownAfterMs: () => outcomeUnknownAfterMs(engine().executor.longestCallMs()),
      firstPasskeyNeedsCode: settings.signIn.firstPasskeyNeedsCode,
    });
  }
  if (policy.perCall.size > 0 && !auth.enabled) {
    logger.warn(
      'capabilities.per_call is set but sign_in is not configured: nobody can approve those calls on the pages; they expire (approval_expired)',
    );
  }
  const exposition = metricsExposition?.(metrics.registry) ?? (() => metrics.exposition());
  if (internalRouter) metricsRoutes(internalRouter, { exposition });
  else if (adminToken !== undefined)
    metricsRoutes(router, { exposition, guard: { ctx, limits, logger, adminToken } });
  const database = new DatabaseReadiness(store, {
    ...DEFAULT_READINESS,
    onChange: (up) => {
      if (up) logger.info('database reachable again: ready');
      else logger.warn('database unreachable: not ready until it answers');
    },
  });
  for (const r of [router, internalRouter]) {
    if (r) {
      healthRoutes(r, {
        ready,
        database: () => database.up(),
        capabilities: () => ctx.catalog.capabilities.length,
      });
    }
  }

  return { execution, approvalStreams, ...(oidc ? { oidc } : {}) };
}

function defaultProviderName(apis: readonly ApiInfo[]): string {
  return apis.length === 1
    ? (apis[0] as ApiInfo).id.replace(/[^a-z0-9_-]/g, '_').slice(0, 64)
    : 'agent-auth-proxy';
}

function defaultDescription(apis: readonly ApiInfo[]): string {
  if (apis.length === 1) {
    const api = apis[0] as ApiInfo;
    return api.description?.split('\n')[0]?.trim() || api.title;
  }
  return `Agent access to ${apis.map((a) => a.title).join(', ')}`;
}
