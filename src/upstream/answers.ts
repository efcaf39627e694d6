/**
 * Upstream answers as the agent may see them: bodies read within their cap and decoded from their
 * content coding, success bodies as `data` and failures as errors (results.ts), event streams
 * relayed — every one with the API's secrets redacted first (issue 10, class 12).
 */
import { pipeline } from 'node:stream';
import { ProtocolError } from '../errors.js';
import { essence } from '../openapi/media.js';
import { readBody, readCapped, UpstreamCallError, type CappedBody, type UpstreamReply } from './client.js';
import { contentCodings, decodeBody, decodingStream } from './content-coding.js';
import { checkFile, fileCoding } from './compressed-files.js';
import { redactEventStream } from './event-redaction.js';
import { TokenError } from './oauth.js';
import {
  charsetOf,
  decodeData,
  decodeTextKeepingJson,
  type DecodedText,
  isTextData,
  readsAsUtf8,
  textInCharset,
  upstreamError,
  UPSTREAM_ERROR_READ_BYTES,
} from './results.js';
import type { ApiRuntime } from './runtime.js';

/**
 * The decoded body of a 2xx answer, within max_response_bytes (a non-2xx one: readFailure). At
 * once for an answer that has all arrived and needs no decoding: no promise on the hot path.
 */
export function readAnswer(api: ApiRuntime, reply: UpstreamReply): Buffer | Promise<Buffer> {
  const cap = api.settings.maxResponseBytes;
  // Before reading: an answer in a coding the proxy cannot undo is refused unread (thrown here,
  // at once: both callers are async functions).
  const codings = codingsOrDiscard(reply);
  const read = readBody(reply, cap);
  if (!(read instanceof Promise) && codings.length === 0) return read;
  return Promise.resolve(read).then(
    (raw) => (codings.length === 0 ? raw : decodeBody(raw, codings, cap, false)),
    (err: unknown) => {
      throw callFailure(err, api.settings.timeoutMs);
    },
  );
}

/**
 * The decoded body of a non-2xx answer, read only up to the error cap and kept even when cut
 * (results.ts echoes a bounded part of it), so a 4xx keeps its status however big its body is.
 * `cut` says whether the body the agent may see a part of is whole.
 */
export async function readFailure(api: ApiRuntime, reply: UpstreamReply): Promise<CappedBody> {
  const codings = codingsOrDiscard(reply);
  let raw: CappedBody;
  try {
    raw = await readCapped(reply, UPSTREAM_ERROR_READ_BYTES);
  } catch (err) {
    throw callFailure(err, api.settings.timeoutMs);
  }
  return codings.length === 0 ? raw : decodedFailure(raw, codings);
}

/**
 * A compressed error body, decoded. Whether it is whole cannot be told from its decoded length
 * (stored gzip of UTF-16 text cut at 20,480 bytes decodes to fewer), so it is decoded as a whole
 * first; one that is not (cut at the read cap or by the upstream, corrupt, or more than the cap
 * once decoded) is decoded as far as it goes and counts as cut, its end then trimmed by failureOf.
 */
async function decodedFailure(raw: CappedBody, codings: Codings): Promise<CappedBody> {
  if (!raw.cut) {
    try {
      return { bytes: await decodeBody(raw.bytes, codings, UPSTREAM_ERROR_READ_BYTES, false), cut: false };
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
    }
  }
  return { bytes: await decodeBody(raw.bytes, codings, UPSTREAM_ERROR_READ_BYTES, true), cut: true };
}

/**
 * A success body as `data`, with nothing of the service's credentials in it: an upstream may echo
 * one back (a debug endpoint, a reflected header). Text is decoded in its charset, then redacted.
 * A binary body cannot be rewritten without corrupting it, and the agent would decode its
 * base64, so one that holds a secret is withheld whole; so is a compressed file that holds one
 * once decoded (compressed-files.ts).
 */
export async function dataOf(
  api: ApiRuntime,
  body: Buffer,
  contentType: string,
  status: number,
): Promise<unknown> {
  const answer = answerData(api, body, contentType, status);
  return (answer instanceof Promise ? await answer : answer).data;
}

/** dataOf, keeping the JSON text of a JSON answer (results.ts); at once but for a compressed file. */
export function answerData(
  api: ApiRuntime,
  body: Buffer,
  contentType: string,
  status: number,
): DecodedText | Promise<DecodedText> {
  if (body.length === 0) return { data: null };
  const type = essence(contentType);
  if (isTextData(type)) {
    const charset = charsetOf(contentType);
    const shown = api.redactor.text(textInCharset(charset, body));
    if (api.redactor.hiddenIn(shown, body, readsAsUtf8(charset))) throw withheld(status);
    return decodeTextKeepingJson(contentType, shown);
  }
  if (api.redactor.inBytes(body)) throw withheld(status);
  const coding = fileCoding(type, body);
  if (coding === undefined) return { data: decodeData(contentType, body) };
  const max = api.settings.maxResponseBytes;
  return checkFile(body, coding, max, (bytes) => api.redactor.inBytes(bytes)).then((found) => {
    if (found === 'secret') throw withheld(status);
    if (found === 'unchecked') throw uncheckedFile(status, max);
    return { data: decodeData(contentType, body) };
  });
}

function withheld(status: number): ProtocolError {
  return new ProtocolError(
    'upstream_error',
    'The upstream answer contains a credential of the service, so the proxy withheld it.',
    { fields: { upstream_status: status } },
  );
}

function uncheckedFile(status: number, maxBytes: number): ProtocolError {
  return new ProtocolError(
    'upstream_error',
    `The upstream answer is a compressed file the proxy could not check for the service's credentials (more than ${maxBytes} bytes once decoded, or compressed too many times over), so it withheld it.`,
    { fields: { upstream_status: status } },
  );
}

/**
 * A non-2xx answer as the agent's error, its body redacted and capped; withheld whole when it
 * holds a secret its text does not show (see Redactor.hiddenIn).
 */
export function failureOf(
  api: ApiRuntime,
  status: number,
  contentType: string,
  body: CappedBody,
): ProtocolError {
  const readAsUtf8 = readsAsUtf8(charsetOf(contentType));
  // A NUL in the bytes: text that may be UTF-16 or UTF-32 read another way, where one character
  // of a secret spans up to four of the text, so a cut end is trimmed that much wider.
  const width = body.cut && body.bytes.includes(0) ? 4 : 1;
  return upstreamError(status, contentType, body.bytes, body.cut, (text) => {
    const shown = api.redactor.text(body.cut ? api.redactor.withoutCutEnd(text, width) : text);
    return api.redactor.hiddenIn(shown, body.bytes, readAsUtf8) ? undefined : shown;
  });
}

/**
 * An event-stream answer with its body decoded and redacted across events (event-redaction.ts);
 * destroying the returned body cancels the upstream request.
 */
export function relayedStream(api: ApiRuntime, reply: UpstreamReply): UpstreamReply {
  const decoders = decodingStream(codingsOrDiscard(reply));
  const redacted = redactEventStream(() => api.redactor.forms());
  // Errors reach the reader of the last stage; pipeline destroys every stage when one fails or
  // is destroyed (the relay ending), which aborts the upstream body.
  pipeline([reply.body, ...decoders, redacted], () => undefined);
  return { ...reply, body: redacted };
}

type Codings = ReturnType<typeof contentCodings>;

function codingsOrDiscard(reply: UpstreamReply): Codings {
  try {
    return contentCodings(reply.headers['content-encoding']);
  } catch (err) {
    // Unread and unwanted: closing it frees the connection (its abort error is expected).
    reply.body.on('error', () => undefined);
    reply.body.destroy();
    throw err;
  }
}

export function callFailure(err: unknown, timeoutMs: number): ProtocolError {
  if (err instanceof ProtocolError) return err;
  const cause = { cause: err };
  if (err instanceof UpstreamCallError) {
    if (err.kind === 'timeout') {
      return new ProtocolError(
        'upstream_timeout',
        `The upstream API did not answer within ${timeoutMs} ms.`,
        cause,
      );
    }
    if (err.kind === 'too_large') return new ProtocolError('upstream_error', `${err.detail}.`, cause);
    if (err.kind === 'aborted')
      return new ProtocolError('upstream_unavailable', 'The request was cancelled.', cause);
    return new ProtocolError(
      'upstream_unavailable',
      `The upstream API could not be reached (${err.detail}).`,
      cause,
    );
  }
  return new ProtocolError('upstream_unavailable', 'The upstream API could not be reached.', cause);
}

/**
 * Why an upstream call failed, for the decision record: the transport's code for an unreachable
 * upstream (ECONNREFUSED, ENOTFOUND …), else the kind (timeout, too_large, aborted), or
 * oauth_token when the service's token could not be had; null when nothing failed underneath.
 */
export function upstreamCause(err: unknown): string | null {
  const cause = err instanceof ProtocolError ? err.cause : undefined;
  if (cause instanceof TokenError) return 'oauth_token';
  if (!(cause instanceof UpstreamCallError)) return null;
  return cause.kind === 'unreachable' && cause.detail !== '' ? cause.detail : cause.kind;
}

export function discard(reply: UpstreamReply): void {
  reply.body.on('error', () => undefined);
  reply.body.resume();
}
