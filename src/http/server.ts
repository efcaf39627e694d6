/**
 * The HTTP front: parse the request line, enforce the body cap, route, run the handler, render
 * errors per §5.13, and write one access-log line. Handlers never see malformed URLs or
 * oversized declared bodies.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ProtocolError } from '../errors.js';
import type { Logger } from '../log.js';
import { sendError } from './respond.js';
import type { Router } from './router.js';

export interface HttpServerOptions {
  readonly router: Router;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
}

export function createHttpServer(options: HttpServerOptions): Server {
  const server = createServer({ requestTimeout: 30_000, headersTimeout: 15_000 }, (req, res) => {
    void handle(options, req, res);
  });
  server.keepAliveTimeout = 5_000;
  return server;
}

async function handle(
  { router, logger, maxBodyBytes }: HttpServerOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const started = performance.now();
  const requestId = randomUUID();
  const method = req.method ?? 'GET';
  let path = '-';
  res.setHeader('x-request-id', requestId);
  res.once('finish', () => {
    logger.info('request', {
      request_id: requestId,
      method,
      path,
      status: res.statusCode,
      duration_ms: Math.round((performance.now() - started) * 100) / 100,
    });
  });
  try {
    const url = parseTarget(req.url);
    path = url.pathname;
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBodyBytes) {
      throw new ProtocolError(
        'payload_too_large',
        `The request body exceeds the ${maxBodyBytes}-byte limit.`,
        {
          headers: { connection: 'close' },
        },
      );
    }
    const match = router.match(method, url.pathname);
    if (match.kind === 'not_found') throw new ProtocolError('not_found', `No endpoint at ${url.pathname}.`);
    if (match.kind === 'method_not_allowed') {
      throw new ProtocolError('method_not_allowed', `${url.pathname} does not accept ${method}.`, {
        headers: { allow: match.allow.join(', ') },
      });
    }
    await match.handler({ req, res, url, params: match.params, requestId });
  } catch (err) {
    if (!(err instanceof ProtocolError)) {
      // The cause is logged for the operator, never sent to the client.
      logger.error('unhandled error', {
        request_id: requestId,
        error: err instanceof Error ? err.message : String(err),
      });
    }
    if (res.headersSent) res.destroy();
    else sendError(res, err);
  }
}

/** Only origin-form targets (`/path?query`); anything else is a malformed request. */
function parseTarget(target: string | undefined): URL {
  if (!target?.startsWith('/') || target.startsWith('//')) {
    throw new ProtocolError('invalid_request', 'The request target must be an absolute path.');
  }
  try {
    return new URL(target, 'http://proxy.invalid');
  } catch {
    throw new ProtocolError('invalid_request', 'The request target is not a valid URL path.');
  }
}
