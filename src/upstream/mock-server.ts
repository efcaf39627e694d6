/**
 * The built-in mock upstream (`--mock-upstream`): answers every operation of the catalog with its
 * declared success status and the document's example, or a sample synthesized from the response
 * schema, so the proxy can be tried end to end without any real API behind it.
 *
 * An answer is synthesized when its operation is first called, not when the catalog is installed:
 * preparing all of Microsoft Graph's 11,422 up front took 11 s of the event loop, at start-up and
 * again inside each reload's swap, and held 124 MiB of samples (one alone is 1.3 MiB). Answers are
 * kept up to ANSWER_CACHE_BYTES in all; past that one is synthesized again on each call (the
 * samples are deterministic, so the answer is the same).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProtocolError, UserError, type ErrorCode } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import type { Catalog } from '../openapi/catalog.js';
import { sampleFromSchema } from '../openapi/sample.js';
import type { Capability } from '../openapi/types.js';
import { templateSegment } from './path-template.js';

export interface MockUpstream {
  readonly url: string;
  baseUrlFor(apiId: string): string;
  /** Answers for `catalog`'s operations from now on (a reload replaced the catalog). */
  answerFor(catalog: Catalog): void;
  close(): Promise<void>;
}

export interface MockUpstreamOptions {
  host?: string;
  port?: number;
  logger?: Logger;
  /** Bytes of prepared answers kept per installed catalog (default ANSWER_CACHE_BYTES). */
  answerCacheBytes?: number;
}

const MAX_BODY_BYTES = 1024 * 1024;
/** Prepared answers kept, in bytes of body, per installed catalog. */
export const ANSWER_CACHE_BYTES = 16 * 1024 * 1024;
const MOCK_HEADER = { 'X-Mock-Upstream': 'agent-auth-proxy' } as const;

type Segment =
  | { readonly kind: 'literal'; readonly value: string }
  | { readonly kind: 'param' }
  /** A segment mixing text and parameters, e.g. `{name}.json`. */
  | { readonly kind: 'pattern'; readonly regex: RegExp };

interface PreparedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

interface Route {
  readonly method: string;
  readonly segments: readonly Segment[];
  readonly capability: Capability;
  /** Set on the first call while the catalog's answers fit in ANSWER_CACHE_BYTES. */
  response?: PreparedResponse;
}

/** One installed catalog's routes and the bytes of answers they keep. */
interface RouteTables {
  /** API id → that API's routes keyed by segment count, each list most specific first. */
  readonly byApi: ReadonlyMap<string, ReadonlyMap<number, readonly Route[]>>;
  readonly budgetBytes: number;
  cachedBytes: number;
}

export async function startMockUpstream(
  catalog: Catalog,
  options: MockUpstreamOptions = {},
): Promise<MockUpstream> {
  const logger = options.logger ?? silentLogger;
  const host = options.host ?? '127.0.0.1';
  const budgetBytes = options.answerCacheBytes ?? ANSWER_CACHE_BYTES;
  let answering = catalog;
  let tables = buildTables(catalog.capabilities, budgetBytes);

  const server = createServer((req, res) => {
    handle(tables, req, res, logger);
  });
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(
        new UserError(`The mock upstream cannot listen on ${host}:${options.port ?? 0}: ${err.message}`),
      );
    };
    server.once('error', onError);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (err) => {
    logger.error('mock upstream server error', { error: err.message });
  });

  const url = `http://${formatHost(server.address() as AddressInfo)}`;
  logger.info('mock upstream listening', { url, apis: [...tables.byApi.keys()] });

  let closing: Promise<void> | undefined;
  return {
    url,
    baseUrlFor: (apiId) => `${url}/${encodeURIComponent(apiId)}`,
    answerFor: (next) => {
      // The same catalog again (a reload that kept it): its prepared answers stay.
      if (next === answering) return;
      answering = next;
      // Cannot throw: only routes are built here (answers wait for their first call), so a
      // reload's swap cannot fail halfway.
      tables = buildTables(next.capabilities, budgetBytes);
    },
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        // Idle keep-alive sockets would otherwise hold close() open until they time out.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function formatHost(address: AddressInfo): string {
  // A wildcard address is where the server listens, not somewhere a client can connect to.
  const host =
    address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return host.includes(':') ? `[${host}]:${address.port}` : `${host}:${address.port}`;
}

function buildTables(capabilities: readonly Capability[], budgetBytes: number): RouteTables {
  const tables = new Map<string, Map<number, Route[]>>();
  for (const capability of capabilities) {
    const { apiId, method, path } = capability.operation;
    const segments = parseTemplate(path);
    let table = tables.get(apiId);
    if (!table) tables.set(apiId, (table = new Map<number, Route[]>()));
    const routes = table.get(segments.length) ?? [];
    routes.push({ method: method.toUpperCase(), segments, capability });
    table.set(segments.length, routes);
  }
  for (const table of tables.values()) {
    for (const routes of table.values()) routes.sort(bySpecificity);
  }
  return { byApi: tables, budgetBytes, cachedBytes: 0 };
}

/** The route's answer: kept from an earlier call, or prepared now (and kept while within budget). */
function answerOf(tables: RouteTables, route: Route): PreparedResponse {
  if (route.response) return route.response;
  const response = prepareResponse(route.capability);
  if (tables.cachedBytes + response.body.length <= tables.budgetBytes) {
    tables.cachedBytes += response.body.length;
    route.response = response;
  }
  return response;
}

/** More literal segments first, then more partly-literal ones, then literals earlier in the path. */
function bySpecificity(a: Route, b: Route): number {
  const score = (route: Route, kind: Segment['kind']): number =>
    route.segments.filter((s) => s.kind === kind).length;
  const byLiterals = score(b, 'literal') - score(a, 'literal');
  if (byLiterals !== 0) return byLiterals;
  const byPatterns = score(b, 'pattern') - score(a, 'pattern');
  if (byPatterns !== 0) return byPatterns;
  const rank = { literal: 0, pattern: 1, param: 2 } as const;
  for (let i = 0; i < a.segments.length; i++) {
    const diff = rank[(a.segments[i] as Segment).kind] - rank[(b.segments[i] as Segment).kind];
    if (diff !== 0) return diff;
  }
  return 0;
}

function parseTemplate(path: string): Segment[] {
  return splitPath(path).map((raw): Segment => {
    if (/^\{[^{}]+\}$/.test(raw)) return { kind: 'param' };
    if (!raw.includes('{')) return { kind: 'literal', value: safeDecode(raw) ?? raw };
    return { kind: 'pattern', regex: templateSegment(raw).pattern };
  });
}

/** `/a/b/` and `/a/b` are the same route; `/` has no segments. */
function splitPath(path: string): string[] {
  const segments = path.split('/');
  if (segments[0] === '') segments.shift();
  if (segments.length > 0 && segments[segments.length - 1] === '') segments.pop();
  return segments;
}

function prepareResponse(capability: Capability): PreparedResponse {
  const { success } = capability.operation;
  const status =
    Number.isInteger(success.status) && success.status >= 200 && success.status <= 599 ? success.status : 200;
  const mediaType = success.mediaType;
  if (mediaType === undefined || !mayHaveBody(status)) {
    return { status, headers: { ...MOCK_HEADER }, body: Buffer.alloc(0) };
  }
  const json = isJsonMediaType(mediaType);
  const value =
    success.example !== undefined
      ? success.example
      : success.schema !== undefined
        ? sampleFromSchema(success.schema)
        : json
          ? {}
          : '';
  const text = json || typeof value !== 'string' ? toJson(value) : value;
  return { status, headers: { ...MOCK_HEADER, 'Content-Type': mediaType }, body: Buffer.from(text, 'utf8') };
}

function mayHaveBody(status: number): boolean {
  return status !== 204 && status !== 205 && status !== 304;
}

function isJsonMediaType(mediaType: string): boolean {
  const essence = (mediaType.split(';')[0] ?? '').trim().toLowerCase();
  return essence === 'application/json' || essence.endsWith('+json');
}

function toJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    // Examples come from parsed documents, so this is only reachable with hand-built catalogs.
    return 'null';
  }
}

function handle(tables: RouteTables, req: IncomingMessage, res: ServerResponse, logger: Logger): void {
  const method = (req.method ?? 'GET').toUpperCase();
  const rawPath = (req.url ?? '/').split(/[?#]/, 1)[0] ?? '/';
  const finish = (status: number): void => {
    logger.debug('mock upstream request', { method, path: rawPath, status });
  };

  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    sendError(
      res,
      'payload_too_large',
      `The mock upstream accepts request bodies up to ${MAX_BODY_BYTES} bytes.`,
    );
    finish(413);
    return;
  }

  let received = 0;
  let rejected = false;
  req.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received > MAX_BODY_BYTES && !rejected) {
      rejected = true;
      sendError(
        res,
        'payload_too_large',
        `The mock upstream accepts request bodies up to ${MAX_BODY_BYTES} bytes.`,
      );
      finish(413);
    }
  });
  req.on('error', () => {
    res.destroy();
  });
  // Answer only once the body is consumed, so a client still sending never sees its socket reset.
  req.on('end', () => {
    if (rejected) return;
    try {
      const status = respond(tables, method, rawPath, res);
      finish(status);
    } catch (err) {
      logger.error('mock upstream failed', { method, path: rawPath, error: String(err) });
      if (!res.headersSent) sendError(res, 'internal_error');
      else res.destroy();
    }
  });
}

function respond(tables: RouteTables, method: string, rawPath: string, res: ServerResponse): number {
  const segments = splitPath(rawPath).map(safeDecode);
  const [apiId, ...rest] = segments;
  const table = apiId === undefined ? undefined : tables.byApi.get(apiId);
  if (table === undefined || rest.some((s) => s === undefined)) {
    return sendError(res, 'not_found', `No API is mounted at ${rawPath}.`);
  }
  const decoded = rest as string[];
  const candidates = (table.get(decoded.length) ?? []).filter((route) => matches(route.segments, decoded));
  if (candidates.length === 0) {
    return sendError(res, 'not_found', `No operation of API ${apiId ?? ''} matches ${rawPath}.`);
  }
  const route =
    candidates.find((r) => r.method === method) ??
    (method === 'HEAD' ? candidates.find((r) => r.method === 'GET') : undefined);
  if (route === undefined) {
    return sendError(res, 'method_not_allowed', `${rawPath} does not accept ${method}.`, {
      Allow: allowed(candidates).join(', '),
    });
  }
  const { status, headers, body } = answerOf(tables, route);
  res.writeHead(status, {
    ...headers,
    ...(body.length > 0 ? { 'Content-Length': String(body.length) } : {}),
  });
  // Node drops the body of a HEAD response itself but keeps the GET's Content-Length, as HTTP wants.
  res.end(body);
  return status;
}

function allowed(routes: readonly Route[]): string[] {
  const methods = new Set(routes.map((r) => r.method));
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].sort();
}

function matches(template: readonly Segment[], segments: readonly string[]): boolean {
  return template.every((segment, i) => {
    const actual = segments[i] as string;
    switch (segment.kind) {
      case 'literal':
        return actual === segment.value;
      case 'param':
        return actual !== '';
      case 'pattern':
        return segment.regex.test(actual);
    }
  });
}

function sendError(
  res: ServerResponse,
  code: ErrorCode,
  message?: string,
  headers: Record<string, string> = {},
): number {
  const error = new ProtocolError(code, message);
  const body = Buffer.from(JSON.stringify(error.toBody()), 'utf8');
  res.writeHead(error.status, {
    ...MOCK_HEADER,
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': String(body.length),
    // A rejected body may still be arriving; the connection cannot be reused after it.
    ...(code === 'payload_too_large' ? { Connection: 'close' } : {}),
  });
  res.end(body);
  return error.status;
}

function safeDecode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
