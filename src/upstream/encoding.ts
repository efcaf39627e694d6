/**
 * Percent-encoding and value helpers for building upstream requests from agent arguments.
 * Everything an agent supplies is encoded so that it can only ever be data, never structure.
 */
import { hasLoneSurrogate } from '../util/control-characters.js';

/** An argument that cannot be sent as given; the executor answers it with `invalid_request`. */
export class ArgumentError extends Error {
  constructor(
    readonly argument: string,
    message: string,
  ) {
    super(message);
    this.name = 'ArgumentError';
  }
}

export function wellFormed(value: string, argument: string): string {
  // No UTF-8 form: encodeURIComponent would throw, Buffer would alter it.
  if (hasLoneSurrogate(value)) {
    throw new ArgumentError(argument, `Argument ${argument} contains an unpaired UTF-16 surrogate.`);
  }
  return value;
}

const hex = (c: string): string => '%' + (c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(2, '0');

/**
 * RFC 3986 §2.3: everything except the unreserved characters `A-Za-z0-9-._~` is percent-encoded
 * (UTF-8), so `/ ? # % ; , = & + [ ]` and spaces can never act as delimiters.
 */
export function encodeStrict(value: string, argument: string): string {
  return encodeURIComponent(wellFormed(value, argument)).replace(/[!'()*]/g, hex);
}

/** Reserved characters an `allowReserved` query value keeps as they are. */
const KEPT_RESERVED = /%(3A|2F|3F|40|21|24|27|28|29|2A|2C|5B|5D)/g;

/**
 * OpenAPI `allowReserved: true`: the RFC 3986 reserved characters `:/?@!$'()*,[]` pass unencoded,
 * but `& = # + ;` and `%` are always encoded, as are spaces, controls and non-ASCII: with them an
 * agent could end the value, add query parameters of its own, cut the URL at a fragment, change
 * how a form decoder reads the value, or smuggle a pre-encoded delimiter. `;` is a pair separator
 * to Rack 2 and to Python's `parse_qs` before 3.10 (`?amount=5&q=x;amount` reads `amount` again,
 * as nil), so it is encoded too.
 */
export function encodeReserved(value: string, argument: string): string {
  return encodeStrict(value, argument).replace(KEPT_RESERVED, (_m, code: string) =>
    String.fromCharCode(parseInt(code, 16)),
  );
}

/** A value with no representation: an absent argument (RFC 6570 §2.3 "undefined"). */
export function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}

/**
 * One scalar as text: strings as they are, numbers and booleans via `String()`, anything nested
 * (an object inside an array, say, which the OpenAPI styles do not define) as JSON.
 */
export function scalarText(value: unknown, argument: string): string {
  if (typeof value === 'string') return wellFormed(value, argument);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return wellFormed(JSON.stringify(value) ?? '', argument);
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Strict RFC 4648 §4 base64 (padding required, no whitespace, no URL-safe alphabet, canonical
 * trailing bits). Node's decoder silently skips junk, which would send bytes the agent never meant.
 */
export function decodeBase64(value: unknown, argument: string): Buffer {
  if (typeof value !== 'string' || !BASE64.test(value)) {
    throw new ArgumentError(argument, `Argument ${argument} must be base64-encoded (RFC 4648 §4).`);
  }
  const bytes = Buffer.from(value, 'base64');
  if (bytes.toString('base64') !== value) {
    throw new ArgumentError(argument, `Argument ${argument} is not canonical base64 (RFC 4648 §3.5).`);
  }
  return bytes;
}
