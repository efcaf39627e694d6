/**
 * Upstream answers → §5.11 results. Success bodies become `data` (JSON parsed, text as a string,
 * anything else in a base64 envelope); errors keep their meaning for the agent without exposing
 * the proxy: a 4xx keeps its status, a 5xx or a redirect becomes 502, both as `upstream_error`
 * with the upstream's status and a size-capped body.
 */
import { ProtocolError } from '../errors.js';
import { essence, isJsonLike, isTextual } from '../openapi/media.js';
import { depthExceeds, textDepthExceeds } from '../util/json-depth.js';

/** The base64 envelope for binary results (documented in the README). */
export interface BinaryData {
  readonly content_type: string;
  readonly base64: string;
}

// Upstream error bodies are echoed for the agent to self-correct, but never in bulk.
export const MAX_UPSTREAM_ERROR_BODY = 16 * 1024;
// Read this much of an error body: a secret that straddles the cap is then scrubbed whole
// before the text is cut, instead of its first half reaching the agent.
export const UPSTREAM_ERROR_READ_BYTES = MAX_UPSTREAM_ERROR_BODY + 4 * 1024;
// JSON from the upstream nested deeper than this is not taken as JSON: answers that nest deeper
// are refused, error bodies are echoed as text. Relayed as text, a deep answer is harmless, but
// per-call results and async states are serialized again, and JSON.stringify overflows the stack
// a few thousand levels down (a 16 KiB error body nests 8,000 deep), which took the process down.
// No real API nests anywhere near this deep.
export const MAX_ANSWER_DEPTH = 512;

export function contentTypeOf(headers: Readonly<Record<string, string | string[] | undefined>>): string {
  const value = headers['content-type'];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** Whether a success body of this media type (its essence) reaches the agent as text or JSON. */
export function isTextData(type: string): boolean {
  return (
    type === '' ||
    isJsonLike(type) ||
    isTextual(type) ||
    type === 'application/x-www-form-urlencoded' ||
    type.endsWith('+yaml')
  );
}

// Not fatal: a stray invalid byte becomes U+FFFD rather than failing the call. Decoding also drops
// a leading byte-order mark, which JSON.parse would otherwise refuse.
const UTF8 = new TextDecoder('utf-8');
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)"?/i;

/**
 * A body's text in the charset its Content-Type names: legacy APIs still send ISO-8859-1 or
 * windows-1252. UTF-8 when none is named, or when the name is not one the runtime knows.
 */
export function bodyText(contentType: string, body: Buffer): string {
  return textInCharset(charsetOf(contentType), body);
}

/** The charset a Content-Type names, lower case; undefined when it names none. */
export function charsetOf(contentType: string): string | undefined {
  return CHARSET.exec(contentType)?.[1]?.toLowerCase();
}

/** Whether text in this charset (charsetOf) is read as UTF-8 bytes. */
export function readsAsUtf8(charset: string | undefined): boolean {
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

/** bodyText, for a charset already read from the Content-Type. */
export function textInCharset(charset: string | undefined, body: Buffer): string {
  if (readsAsUtf8(charset)) return UTF8.decode(body);
  // Not in the WHATWG list TextDecoder knows, but real: read as UTF-8 it would keep a NUL between
  // every two characters, and an echoed secret would pass redaction that way.
  if (charset === 'utf-32' || charset === 'utf-32le' || charset === 'utf-32be')
    return utf32Text(body, charset);
  try {
    return new TextDecoder(charset).decode(body);
  } catch {
    return UTF8.decode(body);
  }
}

/** UTF-32 text (RFC 2781's rules as for UTF-16: `utf-32` is big-endian unless a BOM says not). */
function utf32Text(body: Buffer, charset: string): string {
  let little = charset === 'utf-32le';
  let start = 0;
  if (charset === 'utf-32' && body.length >= 4) {
    if (body.readUInt32LE(0) === 0xfeff) [little, start] = [true, 4];
    else if (body.readUInt32BE(0) === 0xfeff) start = 4;
  }
  const chars: string[] = [];
  for (let i = start; i + 4 <= body.length; i += 4) {
    const code = little ? body.readUInt32LE(i) : body.readUInt32BE(i);
    chars.push(code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : '\ufffd');
  }
  if ((body.length - start) % 4 !== 0) chars.push('\ufffd');
  return chars.join('');
}

/** A success body as the agent receives it in `data`. */
export function decodeData(contentType: string, body: Buffer): unknown {
  if (body.length === 0) return null;
  if (isTextData(essence(contentType))) return decodeText(contentType, bodyText(contentType, body));
  const envelope: BinaryData = { content_type: contentType, base64: body.toString('base64') };
  return envelope;
}

/** A success body's text as `data`, and the text itself when it parsed as JSON. */
export interface DecodedText {
  readonly data: unknown;
  /**
   * The text, when it parsed as JSON: relayed as it came, it needs no second serialization, and
   * no number in it is rounded to a double on the way.
   */
  readonly json?: string;
}

/** The decoded text of a success body (see isTextData) as `data`: parsed when it is JSON. */
export function decodeText(contentType: string, text: string): unknown {
  return decodeTextKeepingJson(contentType, text).data;
}

/** decodeText, keeping the JSON text of an answer that parsed as JSON. */
export function decodeTextKeepingJson(contentType: string, text: string): DecodedText {
  if (text === '') return { data: null };
  const type = essence(contentType);
  if (type === '' || isJsonLike(type)) {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      // Declared JSON (or undeclared) that does not parse: pass the text rather than fail.
      if (type === '') return { data: text };
      throw new ProtocolError('upstream_error', 'The upstream API answered with invalid JSON.', {
        fields: { upstream_status: 200 },
      });
    }
    if (textDepthExceeds(text, MAX_ANSWER_DEPTH)) {
      throw new ProtocolError(
        'upstream_error',
        `The upstream API answered with JSON nested more than ${MAX_ANSWER_DEPTH} levels deep.`,
        { fields: { upstream_status: 200 } },
      );
    }
    return { data, json: text };
  }
  return { data: text };
}

/**
 * Removes the service's own secrets from an echoed error body's text, in case the upstream
 * repeats a credential back. Undefined: the body is withheld whole.
 */
export type ErrorBodyScrub = (text: string) => string | undefined;

/**
 * The error an agent sees for a non-2xx upstream answer, its body passed through `scrub`. `cut`:
 * the body was read only up to UPSTREAM_ERROR_READ_BYTES (client.ts readCapped), so it is shown
 * truncated whatever its length once decoded.
 */
export function upstreamError(
  status: number,
  contentType: string,
  body: Buffer,
  cut: boolean,
  scrub: ErrorBodyScrub,
): ProtocolError {
  // Scrub before truncating: a secret cut in half at the limit would no longer match, and its
  // first half would reach the agent.
  const shown = scrub(bodyText(contentType, body));
  if (shown === undefined) {
    return withStatus(status, {
      upstream_status: status,
      upstream_body: null,
      upstream_body_withheld: true,
    });
  }
  const scrubbed = Buffer.from(shown, 'utf8');
  const truncated = cut || body.length > MAX_UPSTREAM_ERROR_BODY || scrubbed.length > MAX_UPSTREAM_ERROR_BODY;
  const text = scrubbed.subarray(0, MAX_UPSTREAM_ERROR_BODY).toString('utf8');
  let upstreamBody: unknown = text === '' ? null : text;
  if (!truncated && text !== '' && isJsonLike(essence(contentType) || 'application/json')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (!depthExceeds(parsed, MAX_ANSWER_DEPTH)) upstreamBody = parsed;
    } catch {
      // not JSON after all: keep the text
    }
  }
  return withStatus(status, {
    upstream_status: status,
    upstream_body: upstreamBody,
    ...(truncated ? { upstream_body_truncated: true } : {}),
  });
}

/** The upstream_error for this status: a 4xx keeps it, anything else is 502. */
function withStatus(status: number, fields: Record<string, unknown>): ProtocolError {
  if (status >= 300 && status < 400) {
    return new ProtocolError(
      'upstream_error',
      `The upstream API answered ${status} (a redirect, which the proxy does not follow).`,
      { fields },
    );
  }
  if (status >= 400 && status < 500) {
    return new ProtocolError('upstream_error', `The upstream API rejected the request with ${status}.`, {
      status,
      fields,
    });
  }
  return new ProtocolError('upstream_error', `The upstream API failed with ${status}.`, { fields });
}
