/**
 * Composition root: settings → catalog → (mock upstream) → routes → listening server.
 * The only module that knows every concrete part.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Settings } from './config/settings.js';
import { UserError } from './errors.js';
import { createLogger, type Logger } from './log.js';
import type { Catalog } from './openapi/catalog.js';
import { loadCatalog } from './openapi/load-catalog.js';
import type { ApiInfo } from './openapi/types.js';
import { Router } from './http/router.js';
import { createHttpServer } from './http/server.js';
import { capabilityRoutes } from './http/routes/capabilities.js';
import { discoveryRoutes } from './http/routes/discovery.js';
import { healthRoutes } from './http/routes/health.js';
import { startMockUpstream, type MockUpstream } from './upstream/mock-server.js';
import { systemClock, type Clock } from './clock.js';
import { defaultPolicy, loadPolicyFile, type Policy } from './policy/policy.js';
import { expireApprovals } from './protocol/approvals.js';
import { createContext, type ProtocolContext } from './protocol/context.js';
import { applyPolicyHosts } from './protocol/hosts.js';
import { RateLimiter } from './protocol/rate-limit.js';
import { openSqliteStore } from './storage/sqlite-store.js';
import { RateLimits } from './http/rate-limits.js';
import { agentRoutes } from './http/routes/agent.js';
import { adminRoutes } from './http/routes/admin.js';

export interface RunningProxy {
  /** Where the server listens, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly issuer: string;
  readonly catalog: Catalog;
  readonly mock?: MockUpstream;
  readonly policy: Policy;
  /** The protocol state (store, caches, clock); tests drive maintenance through it. */
  readonly protocol: ProtocolContext;
  /** Expires unanswered approvals and deletes stale pending agents and hosts (§7.1, §10.9). */
  maintain(): void;
  /** The base URL each API's operations are called at. */
  upstreamFor(apiId: string): string | undefined;
  close(): Promise<void>;
}

export interface ProxyDeps {
  readonly logger?: Logger;
  /** Tests pass a controllable clock; production uses the system clock. */
  readonly clock?: Clock;
}

export async function startProxy(settings: Settings, deps: ProxyDeps = {}): Promise<RunningProxy> {
  const logger = deps.logger ?? createLogger(settings.logLevel);
  const clock = deps.clock ?? systemClock;
  const catalog = await loadCatalog(settings.apis, {
    allowRemoteRefs: settings.allowRemoteRefs,
    allowHttp: settings.allowHttpSpecs,
    fetchLimits: {
      maxBytes: settings.specMaxBytes,
      connectTimeoutMs: settings.specTimeoutMs,
      readTimeoutMs: settings.specTimeoutMs,
    },
  });
  for (const warning of catalog.warnings) logger.warn('openapi', { detail: warning });

  const policy = settings.policyFile ? loadPolicyFile(settings.policyFile, catalog) : defaultPolicy(catalog);
  const store = openSqliteStore({ file: settings.dbFile });
  let issuer = settings.issuer ?? '';
  const ctx = createContext({ store, catalog, policy, clock, logger, issuer: () => issuer });
  try {
    await applyPolicyHosts(ctx);
  } catch (err) {
    store.close();
    throw err;
  }
  const maintain = (): void => {
    expireApprovals(ctx);
    const removed = store.deleteStalePending(clock.now() - policy.lifetimes.pendingCleanupMs);
    if (removed.agents || removed.hosts) logger.info('pending cleanup', { ...removed });
  };

  const mock = settings.mockUpstream ? await startMockUpstream(catalog, { logger }) : undefined;
  const upstreamFor = (apiId: string): string | undefined => {
    if (mock) return mock.baseUrlFor(apiId);
    const api = catalog.api(apiId);
    return api?.upstream ?? api?.servers[0]?.url;
  };

  let ready = false;
  const router = new Router();
  discoveryRoutes(router, {
    issuer: () => issuer,
    providerName: settings.providerName ?? defaultProviderName(catalog.apis),
    description: settings.providerDescription ?? defaultDescription(catalog.apis),
    modes: policy.modes,
    approvalMethods: policy.approval.methods,
  });
  const limits = new RateLimits(new RateLimiter(clock), policy.rateLimits);
  capabilityRoutes(router, { catalog, ctx, limits });
  agentRoutes(router, {
    ctx,
    limits,
    maxBodyBytes: settings.maxBodyBytes,
    introspectionTokens: [settings.introspectionToken, settings.adminToken].filter(
      (t): t is string => t !== undefined,
    ),
  });
  if (settings.adminToken !== undefined) {
    adminRoutes(router, { ctx, adminToken: settings.adminToken, maxBodyBytes: settings.maxBodyBytes });
  }
  healthRoutes(router, { ready: () => ready, capabilities: catalog.capabilities.length });

  const server = createHttpServer({ router, logger, maxBodyBytes: settings.maxBodyBytes });
  try {
    await listen(server, settings.port, settings.host);
  } catch (err) {
    await mock?.close();
    store.close();
    throw err;
  }
  ctx.usage.start();
  const maintenance = setInterval(() => {
    try {
      maintain();
    } catch (err) {
      logger.error('maintenance failed', { error: err instanceof Error ? err.message : String(err) });
    }
  }, 30_000).unref();
  const url = `http://${hostForUrl(settings.host)}:${(server.address() as AddressInfo).port}`;
  issuer ||= url;
  ready = true;

  for (const api of catalog.apis) {
    logger.info('api loaded', {
      api: api.id,
      source: api.source,
      capabilities: catalog.capabilities.filter((c) => c.operation.apiId === api.id).length,
      upstream: upstreamFor(api.id) ?? null,
      mock: mock !== undefined,
    });
  }
  if (!settings.issuer && (settings.host === '0.0.0.0' || settings.host === '::')) {
    logger.warn('no --issuer set while listening on all interfaces; advertised URLs use ' + url);
  }
  logger.info('listening', {
    url,
    issuer,
    capabilities: catalog.capabilities.length,
    database: settings.dbFile,
    policy: settings.policyFile ?? '(default)',
    admin_api: settings.adminToken !== undefined,
  });

  let closing: Promise<void> | undefined;
  return {
    url,
    issuer,
    catalog,
    ...(mock ? { mock } : {}),
    policy,
    protocol: ctx,
    maintain,
    upstreamFor,
    close: () => {
      closing ??= (async () => {
        ready = false;
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        clearInterval(maintenance);
        ctx.usage.stop();
        store.close();
        await mock?.close();
      })();
      return closing;
    },
  };
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

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
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
