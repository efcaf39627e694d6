/**
 * The HTTP front: connection bounds (connection-limits.ts), the request line, the declared body
 * size, routing, then the route's steps (src/http/pipeline.ts). It renders every error per §5.13,
 * adds the challenge to every 401 (RFC 6750 §3, §5.14), and writes one line per request from its
 * decision record.
 */
import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ConnectionSettings } from '../config/settings.js';
import { ProtocolError, toProtocolError } from '../errors.js';
import { StoreUnavailableError } from '../storage/errors.js';
import { upstreamCause } from '../upstream/answers.js';
import type { Logger } from '../log.js';
import type { ConnectionCap, RefusalOutcome } from '../metrics.js';
import { continueWhenRead } from './body.js';
import type { ClientAddress } from './client-address.js';
import { answerClientError } from './client-errors.js';
import { ConnectionGate } from './connection-limits.js';
import type { Drain } from './drain.js';
import { decisionFields } from './decision-log.js';
import { newDecision, roundMs, type DecisionRecord, type Exchange } from './pipeline.js';
import { sendError } from './respond.js';
import { sendErrorPage } from './html.js';
import type { Router } from './router.js';
import { TaggedResponse } from './tagged-response.js';

export interface HttpServerOptions {
  readonly router: Router;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
  readonly clientAddress: ClientAddress;
  /** Bounds on what one client can hold open (README "Bounds"). */
  readonly connections: ConnectionSettings;
  /** The response header that carries the proxy's request id. */
  readonly requestIdHeader: string;
  /** Read per request: the §5.14 challenge points at this issuer's discovery document. */
  readonly issuer: () => string;
  /**
   * Shutdown's drain: counts requests in progress; once begun, new requests (but liveness and
   * readiness) get 503 and every connection closes after its current answer.
   */
  readonly drain?: Drain;
  /** Each connection refused past a cap (connection-limits.ts). */
  readonly onConnectionRefused?: (cap: ConnectionCap, outcome: RefusalOutcome) => void;
  /** Each finished request's decision record; the access log line is written from it too. */
  readonly onDecision?: (decision: DecisionRecord) => void;
}

export function createHttpServer(options: HttpServerOptions): Server {
  const { connections } = options;
  const gate = new ConnectionGate(connections, options.clientAddress, options.onConnectionRefused);
  const server = createServer(
    {
      // The request id goes into each head as it is written (tagged-response.ts: Node's fast path).
      IncomingMessage,
      ServerResponse: TaggedResponse,
      requestTimeout: connections.requestTimeoutMs,
      headersTimeout: connections.headersTimeoutMs,
      keepAliveTimeout: connections.keepAliveTimeoutMs,
      maxHeaderSize: connections.maxHeaderBytes,
      // Timeouts are enforced by a periodic sweep; once a second keeps "shed within seconds" true.
      connectionsCheckingInterval: 1_000,
    },
    (req, res) => {
      // handle() answers every failure itself; this is the last guard that keeps one request
      // from ending the process (an unhandled rejection would).
      handle(options, gate, req, res).catch((err: unknown) => {
        options.logger.error('request failed unanswered', {
          error: err instanceof Error ? err.message : String(err),
        });
        res.destroy();
      });
    },
  );
  // Handled, Node no longer answers `100 Continue` by itself before the request is seen (body.ts).
  server.on('checkContinue', (req: IncomingMessage, res: TaggedResponse) => {
    continueWhenRead(req, res);
    server.emit('request', req, res);
  });
  gate.guard(server);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    answerClientError(err, socket, options.requestIdHeader);
  });
  return server;
}

async function handle(
  options: HttpServerOptions,
  gate: ConnectionGate,
  req: IncomingMessage,
  res: TaggedResponse,
): Promise<void> {
  const { router, logger, maxBodyBytes } = options;
  const started = performance.now();
  const requestId = randomUUID();
  const method = req.method ?? 'GET';
  const decision = newDecision(requestId, method, options.clientAddress.of(req));
  let path = '-';
  res.tag(options.requestIdHeader, requestId);
  options.drain?.opened();
  // Draining: keep-alive clients would go on sending on the connections they hold; `Connection:
  // close` ends each after this answer.
  if (options.drain?.draining) res.setHeader('connection', 'close');
  let exchange: ServedExchange | undefined;
  // One listener for all that waits on the response (drain, decision, a route's cancellation):
  // it closes once, a tick after it finished, or when the client went away before that.
  res.on('close', () => {
    options.drain?.closed();
    if (!res.writableFinished) {
      exchange?.abandoned?.();
      return;
    }
    decision.status = res.statusCode;
    decision.total_ms = roundMs(performance.now() - started);
    options.onDecision?.(decision);
    // At `warn` and above the access line is not written: its fields are not built either.
    if (logger.enabled('info')) logger.info('request', decisionFields(decision, path));
  });
  try {
    const target = req.url ?? '';
    // A plain path is its own pathname: the URL is built only for a route that reads it.
    const url = PLAIN_PATH.test(target) ? undefined : parseTarget(target);
    const pathname = url === undefined ? target : url.pathname;
    path = pathname;
    const refusal = gate.refusalOf(req.socket);
    if (refusal !== undefined) throw refusal;
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
    if (options.drain?.refuses(pathname)) {
      throw new ProtocolError(
        'temporarily_unavailable',
        'The proxy is shutting down; retry on another instance.',
        {
          headers: { connection: 'close', 'retry-after': '1' },
        },
      );
    }
    const match = router.match(method, pathname);
    if (match.kind === 'not_found') throw new ProtocolError('not_found', `No endpoint at ${pathname}.`);
    if (match.kind === 'method_not_allowed') {
      throw new ProtocolError('method_not_allowed', `${pathname} does not accept ${method}.`, {
        headers: { allow: match.allow.join(', ') },
      });
    }
    exchange = new ServedExchange(req, res, target, url, match.params, requestId, decision);
    await match.handler(exchange);
  } catch (err) {
    const e = toProtocolError(err);
    decision.outcome = e.status >= 500 ? 'error' : 'deny';
    decision.code = e.code;
    decision.reason = e.message;
    decision.upstream_cause = upstreamCause(err);
    if (typeof e.fields.upstream_status === 'number') decision.upstream_status = e.fields.upstream_status;
    if (err instanceof StoreUnavailableError) {
      // An outage, not a bug: the cause (refused, timed out …) for the operator; the client got 503.
      logger.warn('database unavailable', {
        request_id: requestId,
        route: decision.route,
        step: decision.step,
        error: err.message,
      });
    } else if (!(err instanceof ProtocolError) || e.status === 500) {
      // The cause is logged for the operator with the request id, never sent to the client.
      logger.error('unhandled error', {
        request_id: requestId,
        route: decision.route,
        step: decision.step,
        error: err instanceof Error ? err.message : String(err),
      });
    }
    try {
      if (res.headersSent) res.destroy();
      else answerError(req, res, e, exchange, options.issuer);
    } catch (sendErr) {
      // Nothing a request brings may end the process: an error that cannot be written (a field
      // JSON.stringify cannot serialize) closes this connection instead.
      logger.error('error answer not sent', {
        request_id: requestId,
        error: sendErr instanceof Error ? sendErr.message : String(sendErr),
      });
      res.destroy();
    }
  }
}

/** The §5.13 error (an HTML page on the approval pages), closing where bodyLeftUnbounded says. */
function answerError(
  req: IncomingMessage,
  res: TaggedResponse,
  e: ProtocolError,
  exchange: ServedExchange | undefined,
  issuer: () => string,
): void {
  if (bodyLeftUnbounded(req)) res.setHeader('connection', 'close');
  if (exchange?.page) sendErrorPage(res, e);
  else sendError(res, withChallenge(e, exchange, issuer));
}

/**
 * A refused request whose chunked body is still arriving: kept alive, the connection would read
 * and drop that body until its end or `server.request_timeout`, however long (58 MB in 5 s on one
 * connection was measured), so its answer closes the connection. A declared length is within
 * `maxBodyBytes` here (a longer one was refused, closing, before routing): such a body is drained
 * as before, and a request pipelined after it is served. (A request with neither header has no
 * body, RFC 9112 §6.3, though it may not be `complete` yet while it is routed.)
 */
function bodyLeftUnbounded(req: IncomingMessage): boolean {
  return !req.complete && req.headers['transfer-encoding'] !== undefined;
}

/**
 * The exchange the steps fill. A class, so that every request's has one shape from the start (the
 * steps' optional fields declared, not added one by one), and its URL is built on first read.
 */
class ServedExchange implements Exchange {
  readonly clientIp: string;
  challenge?: Exchange['challenge'];
  agent?: Exchange['agent'];
  host?: Exchange['host'];
  body?: Exchange['body'];
  page?: boolean;
  session?: Exchange['session'];
  sessionCookie?: string;
  form?: URLSearchParams;
  abandoned?: () => void;
  #url: URL | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: TaggedResponse,
    private readonly target: string,
    url: URL | undefined,
    readonly params: Readonly<Record<string, string>>,
    readonly requestId: string,
    readonly decision: DecisionRecord,
  ) {
    this.clientIp = decision.client_ip;
    this.#url = url;
  }

  get url(): URL {
    return (this.#url ??= parseTarget(this.target));
  }
}

/**
 * Every 401 carries a challenge (RFC 6750 §3): `Bearer`, with `error="invalid_token"` when a
 * token was presented and refused; on protocol endpoints also the §5.14 AgentAuth challenge
 * naming the discovery document, so an agent that arrives without one knows where to start.
 */
function withChallenge(e: ProtocolError, x: Exchange | undefined, issuer: () => string): ProtocolError {
  // An upstream's own 401 relayed as upstream_error is the upstream's answer, not a challenge.
  if (e.status !== 401 || e.code === 'upstream_error') return e;
  const bearer = e.code === 'authentication_required' ? 'Bearer' : 'Bearer error="invalid_token"';
  const challenge =
    x?.challenge === 'protocol'
      ? `${bearer}, AgentAuth discovery="${issuer()}/.well-known/agent-configuration"`
      : bearer;
  // A DPoP refusal brings its own challenge (RFC 9449 §7.1), offered first.
  const own = e.headers['www-authenticate'];
  return new ProtocolError(e.code, e.message, {
    fields: { ...e.fields },
    headers: { ...e.headers, 'www-authenticate': own ? `${own}, ${challenge}` : challenge },
    status: e.status,
  });
}

/**
 * Paths of these characters only are what the URL parser would make of them (no dot segments,
 * escapes, empty segments or query): routing one skips building a URL, which showed in the execute
 * benchmark's profile (about 1 µs per request).
 */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_~-]+)+$/;

/**
 * Only origin-form targets (`/path?query`); anything else is a malformed request. The path must be
 * routed as sent, since a front proxy that forwards `/public/*` only, or keeps `/admin` from the
 * world, matches the raw target and never sees what the URL parser makes of it: so no backslash
 * (the parser reads `/\\host/x` as `//host/x` and routes `/x`) and no dot segment, plain or
 * percent-encoded (it resolves `/public/%2e%2e/admin/agents` to `/admin/agents`).
 */
function parseTarget(target: string): URL {
  const end = target.search(/[?#]/);
  const rawPath = end < 0 ? target : target.slice(0, end);
  if (!target.startsWith('/') || target.startsWith('//') || rawPath.includes('\\')) {
    throw new ProtocolError('invalid_request', 'The request target must be an absolute path.');
  }
  if (DOT_SEGMENT.test(rawPath)) {
    throw new ProtocolError('invalid_request', 'The request path must not have "." or ".." segments.');
  }
  try {
    return new URL(target, 'http://proxy.invalid');
  } catch {
    throw new ProtocolError('invalid_request', 'The request target is not a valid URL path.');
  }
}

/** A `.` or `..` segment, any of its dots written `%2e` (WHATWG URL: "single-dot path segment"). */
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?=\/|$)/i;
