/**
 * Reading request bodies: JSON objects only, size-capped while streaming, nesting-capped after
 * parsing (code further on walks values recursively; a deep one would exhaust the stack and
 * answer 500), clear errors.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ProtocolError } from '../errors.js';
import { depthExceeds } from '../util/json-depth.js';
import { declaredLength, readStream, takeBuffered, type ReadBytes } from '../util/read-stream.js';

/** Arrays and objects nested deeper than this are refused (400); no protocol body needs 16. */
export const MAX_JSON_DEPTH = 64;

/**
 * The least a request body's pieces (each a `data` event: one TCP read, or one chunk of a chunked
 * body) must hold on average. Each piece costs the parser and the reader their fixed work however
 * small it is: a 1 MiB body in 1-byte chunks was a million of them. A body sent thinner is refused
 * (400, connection closed) once it passes maxPieces: 4096 pieces for 1 MiB, 64 for a page form,
 * counts no client that writes its body whole comes near.
 */
const MIN_MEAN_PIECE_BYTES = 256;
const MIN_PIECES = 64;

function maxPieces(maxBytes: number): number {
  return Math.max(MIN_PIECES, Math.ceil(maxBytes / MIN_MEAN_PIECE_BYTES));
}

/** Requests whose client waits for `100 Continue` before it sends the body, with their answer. */
const awaitingContinue = new WeakMap<IncomingMessage, ServerResponse>();

/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1): the client sends the body only once told to. Node
 * tells it at once unless the server handles `checkContinue`; createHttpServer does, and hands the
 * request here, so that `100 Continue` goes out when a step first reads the body: after the checks
 * before it (the token, the limits). A request refused before then gets its final answer, and the
 * client never sends a body it would have sent for nothing.
 */
export function continueWhenRead(req: IncomingMessage, res: ServerResponse): void {
  awaitingContinue.set(req, res);
}

/** Reads the rest of a request's body as a stream, within `maxBytes` and maxPieces. */
export function readRequestBody(req: IncomingMessage, maxBytes: number): Promise<ReadBytes> {
  const waiting = awaitingContinue.get(req);
  if (waiting !== undefined) {
    awaitingContinue.delete(req);
    if (!waiting.headersSent) waiting.writeContinue();
  }
  return readStream(req, maxBytes, {
    keepOpen: true,
    expected: declaredLength(req.headers['content-length']),
    maxChunks: maxPieces(maxBytes),
  });
}

/** A body stopped for coming in too many pieces (readRequestBody): 400, and the connection closes. */
export function fragmentedBody(maxBytes: number): ProtocolError {
  return new ProtocolError(
    'invalid_request',
    `The request body came in more than ${maxPieces(maxBytes)} pieces; send it in larger chunks.`,
    { headers: { connection: 'close' } },
  );
}

export function readJsonObject(
  req: IncomingMessage,
  maxBytes: number,
  options: { optional?: boolean } = {},
): Record<string, unknown> | Promise<Record<string, unknown>> {
  const parse = (bytes: Buffer): Record<string, unknown> =>
    parseJsonObject(req, { bytes, over: bytes.length > maxBytes }, maxBytes, options);
  const whole = bufferedBody(req);
  if (whole !== undefined) return parse(whole);
  // Steps that awaited nothing still run inside the parser's callback for the head, before it
  // pushes a body that came in the same packet; it runs no microtasks until it has, so one
  // microtask later such a body is there. Only a body still on its way is read as a stream.
  return Promise.resolve().then(() => {
    const later = bufferedBody(req);
    if (later !== undefined) return parse(later);
    return readRequestBody(req, maxBytes).then((read) => parseJsonObject(req, read, maxBytes, options));
  });
}

/** The body when all of it is here: its declared bytes, or the whole message (a chunked one). */
function bufferedBody(req: IncomingMessage): Buffer | undefined {
  return takeBuffered(req, declaredLength(req.headers['content-length']), req.complete);
}

function parseJsonObject(
  req: IncomingMessage,
  { bytes, over, fragmented }: ReadBytes,
  maxBytes: number,
  options: { optional?: boolean },
): Record<string, unknown> {
  const type = req.headers['content-type'];
  if (fragmented) throw fragmentedBody(maxBytes);
  // The declared length is checked up front; this catches chunked bodies that lie or omit it.
  if (over) {
    throw new ProtocolError('payload_too_large', `The request body exceeds the ${maxBytes}-byte limit.`, {
      headers: { connection: 'close' },
    });
  }
  if (bytes.length === 0) {
    if (options.optional) return {};
    throw new ProtocolError('invalid_request', 'A JSON request body is required.');
  }
  if (type !== undefined && !/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type)) {
    throw new ProtocolError('invalid_request', 'The request body must be application/json.');
  }
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ProtocolError('invalid_request', 'The request body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProtocolError('invalid_request', 'The request body must be a JSON object.');
  }
  if (depthExceeds(value, MAX_JSON_DEPTH)) {
    throw new ProtocolError(
      'invalid_request',
      `The request body nests arrays or objects more than ${MAX_JSON_DEPTH} levels deep.`,
    );
  }
  return value as Record<string, unknown>;
}
