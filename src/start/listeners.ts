/**
 * The proxy's listeners: the public one and, with `server.internal_port`, the internal one. They
 * are opened before anything else, so a taken port is the first and only thing a failed start
 * reports. Their routers stay empty until start-up mounts the routes (routes.ts).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Settings } from '../config/settings.js';
import { UserError } from '../errors.js';
import { ClientAddress } from '../http/client-address.js';
import { Drain } from '../http/drain.js';
import { recordRequestMetrics } from '../http/request-metrics.js';
import { Router } from '../http/router.js';
import { createHttpServer } from '../http/server.js';
import type { Logger } from '../log.js';
import type { ConnectionCap, Metrics, RefusalOutcome } from '../metrics.js';
import type { Teardown } from './teardown.js';

export interface Listeners {
  readonly router: Router;
  readonly internalRouter?: Router;
  /** One drain for both listeners: shutdown waits for requests on either. */
  readonly drain: Drain;
  /** Where the public listener listens, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly internalUrl?: string;
  /** `server.issuer`, else the public listener's URL. */
  readonly issuer: string;
  /** Stops listening and closes every connection (after the drain: whatever still runs is cut off). */
  close(): Promise<void>;
}

export async function openListeners(
  settings: Settings,
  deps: { readonly logger: Logger; readonly metrics: Metrics },
  teardown: Teardown,
): Promise<Listeners> {
  // Read per request (the §5.14 challenge); known once the public listener has its port.
  let issuer = settings.issuer ?? '';
  const drain = new Drain();
  const serverOptions = {
    logger: deps.logger,
    maxBodyBytes: settings.maxBodyBytes,
    clientAddress: new ClientAddress(settings.trustedProxies, settings.forwardedHeader),
    connections: settings.connections,
    requestIdHeader: settings.requestIdHeader,
    issuer: () => issuer,
    drain,
    onDecision: recordRequestMetrics(deps.metrics),
    onConnectionRefused: (cap: ConnectionCap, outcome: RefusalOutcome) =>
      deps.metrics.connectionRefused(cap, outcome),
  };
  const router = new Router();
  const server = createHttpServer({ router, ...serverOptions });
  await teardown.step(() => listen(server, settings.port, settings.host));
  teardown.add(() => closeServer(server));
  const url = urlOf(server, settings.host);
  issuer ||= url;

  const internalRouter = settings.internal ? new Router() : undefined;
  let internal: { server: Server; url: string } | undefined;
  if (internalRouter && settings.internal) {
    const { port, host } = settings.internal;
    const internalServer = createHttpServer({ router: internalRouter, ...serverOptions });
    await teardown.step(() => listen(internalServer, port, host));
    teardown.add(() => closeServer(internalServer));
    internal = { server: internalServer, url: urlOf(internalServer, host) };
  }
  return {
    router,
    ...(internalRouter ? { internalRouter } : {}),
    drain,
    url,
    ...(internal ? { internalUrl: internal.url } : {}),
    issuer,
    close: async () => {
      await Promise.all([closeServer(server), internal && closeServer(internal.server)]);
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

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function urlOf(server: Server, host: string): string {
  const shown = host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${(server.address() as AddressInfo).port}`;
}
