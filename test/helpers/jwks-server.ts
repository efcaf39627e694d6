/**
 * An HTTPS (or plain HTTP) server on 127.0.0.1 whose answers a test sets per path: a JWK Set,
 * a redirect, a huge body, or silence.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export type Route = (req: IncomingMessage, res: ServerResponse) => void;

export interface JwksServer {
  readonly port: number;
  readonly requests: string[];
  route(path: string, handler: Route): void;
  close(): Promise<void>;
}

export function jsonRoute(body: unknown, cacheControl?: string): Route {
  return (_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/jwk-set+json',
      ...(cacheControl ? { 'cache-control': cacheControl } : {}),
    });
    res.end(JSON.stringify(body));
  };
}

export function redirectRoute(location: string): Route {
  return (_req, res) => {
    res.writeHead(302, { location });
    res.end();
  };
}

export async function startJwksServer(tls?: { key: string; cert: string }): Promise<JwksServer> {
  const routes = new Map<string, Route>();
  const requests: string[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    requests.push(req.url ?? '');
    const route = routes.get(req.url ?? '');
    if (route) route(req, res);
    else {
      res.writeHead(404);
      res.end();
    }
  };
  const server = tls ? createHttpsServer(tls, handler) : createHttpServer(handler);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    route: (path, h) => routes.set(path, h),
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
