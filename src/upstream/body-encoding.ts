/**
 * The upstream request body from the capability's arguments, by the operation's media type:
 * JSON, form-urlencoded, multipart, text, or raw bytes.
 */
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import { essence, isJsonLike, isTextual } from '../openapi/media.js';
import type { BodyBinding } from '../openapi/types.js';
import {
  ArgumentError,
  decodeBase64,
  encodeStrict,
  isAbsent,
  isPlainObject,
  scalarText,
  wellFormed,
} from './encoding.js';
import { deepPairs, queryPairs } from './styles.js';
import { ownValue } from '../util/own-keys.js';
import { appendAll } from '../util/append-all.js';

export interface EncodedBody {
  readonly contentType: string;
  readonly bytes: Buffer;
}

type Args = Readonly<Record<string, unknown>>;

/**
 * `undefined` when the body is optional and no body argument is present. `random` is only for
 * tests (boundary collisions); production uses crypto.
 */
export function encodeBody(
  body: BodyBinding,
  args: Args,
  random: (size: number) => Buffer = cryptoRandomBytes,
): EncodedBody | undefined {
  const argument = body.mode === 'wrapped' ? (body.argument ?? body.fields[0] ?? 'body') : undefined;
  let value: unknown;
  if (argument !== undefined) value = ownValue(args, argument);
  else {
    const present = body.fields.filter((f) => ownValue(args, f) !== undefined);
    checkFieldCount(body, present.length);
    // Explicit nulls stay in JSON bodies (JSON Merge Patch deletes with them). A required body
    // none of whose fields are required is `{}` (or an empty form) when none is given: what its
    // schema accepts, and what the agent could not otherwise send.
    const type = essence(body.mediaType);
    if (
      present.length > 0 ||
      (body.required && (isJsonLike(type) || type === 'application/x-www-form-urlencoded'))
    ) {
      value = Object.fromEntries(present.map((f) => [f, ownValue(args, f)]));
    }
  }
  const label = argument ?? body.fields[0] ?? 'body';
  const type = essence(body.mediaType);
  const missing = value === undefined || (value === null && !isJsonLike(type));
  if (missing) {
    if (body.required) throw new ArgumentError(label, 'The operation requires a request body.');
    return undefined;
  }
  if (isJsonLike(type)) {
    const contentType = type === '*/*' ? 'application/json' : body.mediaType;
    return inCharset(JSON.stringify(value), contentType, label);
  }
  if (type === 'application/x-www-form-urlencoded' || type.startsWith('multipart/')) {
    if (!isPlainObject(value)) {
      throw new ArgumentError(label, `Argument ${label} must be an object to be sent as ${type}.`);
    }
    if (type.startsWith('multipart/')) return multipart(type, body, value, random);
    return { contentType: type, bytes: Buffer.from(formUrlEncoded(body, value), 'latin1') };
  }
  if (isTextual(type)) {
    if (typeof value !== 'string') {
      throw new ArgumentError(label, `Argument ${label} must be a string to be sent as ${type}.`);
    }
    return inCharset(value, concrete(body.mediaType, 'text/plain; charset=utf-8'), label);
  }
  const contentType = concrete(body.mediaType, 'application/octet-stream');
  if (argument !== undefined && body.binaryFields.includes(argument)) {
    return { contentType, bytes: decodeBase64(value, argument) };
  }
  return { contentType, bytes: utf8(typeof value === 'string' ? value : JSON.stringify(value), label) };
}

/** A flattened body's `minProperties`/`maxProperties`, on the fields the call sends. */
function checkFieldCount(body: BodyBinding, sent: number): void {
  const { min, max } = body.fieldCount ?? {};
  const fields = body.fields.join(', ');
  if (min !== undefined && sent < min) {
    throw new ArgumentError(
      body.fields[0] ?? 'body',
      `The request body needs at least ${min} of its fields (${fields}); ${sent} given.`,
    );
  }
  if (max !== undefined && sent > max) {
    throw new ArgumentError(
      body.fields[0] ?? 'body',
      `The request body takes at most ${max} of its fields (${fields}); ${sent} given.`,
    );
  }
}

const CHARSET_PARAMETER = /;\s*charset\s*=\s*("?)([^";]*)\1/i;
// eslint-disable-next-line no-control-regex -- every character of the charset, controls included
const LATIN1 = /^[\x00-\xff]*$/;
// eslint-disable-next-line no-control-regex -- the same
const ASCII = /^[\x00-\x7f]*$/;

/**
 * `text` as bytes in the charset its media type declares, so that the label and the bytes agree:
 * UTF-8 (none declared, or said), ISO-8859-1 and US-ASCII (refused when the text holds characters
 * beyond them), UTF-16 (little-endian; with a byte order mark when the order is not named). Any
 * other charset is relabelled UTF-8 rather than sent under a label its bytes do not match.
 */
function inCharset(text: string, contentType: string, argument: string): EncodedBody {
  const declared = CHARSET_PARAMETER.exec(contentType)?.[2]?.trim().toLowerCase();
  const checked = wellFormed(text, argument);
  const within = (range: RegExp, name: string): void => {
    if (!range.test(checked)) {
      throw new ArgumentError(
        argument,
        `Argument ${argument} holds characters that ${name} cannot carry, and the operation sends ${contentType}.`,
      );
    }
  };
  switch (declared) {
    case undefined:
    case 'utf-8':
    case 'utf8':
      return { contentType, bytes: Buffer.from(checked, 'utf8') };
    case 'iso-8859-1':
    case 'latin1':
    case 'l1':
      within(LATIN1, 'ISO-8859-1');
      return { contentType, bytes: Buffer.from(checked, 'latin1') };
    case 'us-ascii':
    case 'ascii':
      within(ASCII, 'US-ASCII');
      return { contentType, bytes: Buffer.from(checked, 'latin1') };
    case 'utf-16le':
      return { contentType, bytes: Buffer.from(checked, 'utf16le') };
    case 'utf-16be':
      return { contentType, bytes: Buffer.from(checked, 'utf16le').swap16() };
    case 'utf-16':
      return {
        contentType,
        bytes: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(checked, 'utf16le')]),
      };
    default:
      return {
        contentType: contentType.replace(CHARSET_PARAMETER, '; charset=utf-8'),
        bytes: Buffer.from(checked, 'utf8'),
      };
  }
}

/**
 * The inverse of inCharset: a JSON or text body's bytes as the upstream decodes them under the
 * charset its Content-Type declares (a UTF-16 body read as UTF-8 parses as nothing, and would
 * carry its keys past the checks on what is sent). UTF-16 without a byte order mark is big-endian
 * (RFC 2781 §4.3). Bytes the charset cannot decode throw: what cannot be read back is not sent.
 */
export function decodeCharset(bytes: Buffer, contentType: string): string {
  const declared = CHARSET_PARAMETER.exec(contentType)?.[2]?.trim().toLowerCase();
  switch (declared) {
    case 'iso-8859-1':
    case 'latin1':
    case 'l1':
    case 'us-ascii':
    case 'ascii':
      return bytes.toString('latin1');
    case 'utf-16le':
      return UTF16LE.decode(bytes);
    case 'utf-16be':
      return UTF16LE.decode(swapped(bytes));
    case 'utf-16':
      return UTF16LE.decode(bytes[0] === 0xff && bytes[1] === 0xfe ? bytes : swapped(bytes));
    default:
      // UTF-8, said or not (any other charset is relabelled UTF-8 when sent).
      return UTF8.decode(bytes);
  }
}

// `fatal`: a malformed sequence throws rather than becoming U+FFFD. A leading byte order mark is
// consumed, as decoders that honour it do.
const UTF8 = new TextDecoder('utf-8', { fatal: true });
const UTF16LE = new TextDecoder('utf-16le', { fatal: true });

function swapped(bytes: Buffer): Buffer {
  if (bytes.length % 2 !== 0) throw new Error('A UTF-16 body has an odd number of bytes.');
  return Buffer.from(bytes).swap16();
}

function utf8(text: string, argument: string): Buffer {
  return Buffer.from(wellFormed(text, argument), 'utf8');
}

/** A wildcard (`image/*`) or a list cannot be a Content-Type: use the fallback instead. */
function concrete(mediaType: string | undefined, fallback: string): string {
  const first = (mediaType ?? '').split(',')[0]?.trim() ?? '';
  if (first === '' || first.includes('*') || /[^\t\x20-\x7e]/.test(first)) return fallback;
  return first;
}

type Encoding = BodyBinding['encoding'][string];

/**
 * RFC 3986 percent-encoding of every name and value (space is `%20`, `+` is `%2B`), which every
 * form decoder reads back. Per field: the `encoding` style/explode as for a query parameter; a
 * JSON `contentType` sends the field as JSON; otherwise arrays repeat the name and objects
 * become `field[key]=value` (deepObject-like).
 */
function formUrlEncoded(body: BodyBinding, value: Readonly<Record<string, unknown>>): string {
  const pairs: string[] = [];
  for (const [field, member] of Object.entries(value)) {
    if (isAbsent(member)) continue;
    const enc: Encoding | undefined = body.encoding[field];
    const v = (s: string): string => encodeStrict(s, field);
    const name = encodeStrict(field, field);
    if (enc?.contentType !== undefined && isJsonLike(enc.contentType)) {
      pairs.push(`${name}=${v(JSON.stringify(member))}`);
    } else if (enc?.style !== undefined || enc?.explode !== undefined) {
      const style = enc.style ?? 'form';
      const binding = { name: field, style, explode: enc.explode ?? style === 'form', allowReserved: false };
      appendAll(pairs, queryPairs(binding, member, field));
    } else if (isPlainObject(member)) {
      appendAll(pairs, deepPairs(name, member, v, field));
    } else if (Array.isArray(member)) {
      for (const item of member) if (!isAbsent(item)) pairs.push(`${name}=${v(scalarText(item, field))}`);
    } else {
      pairs.push(`${name}=${v(scalarText(member, field))}`);
    }
  }
  return pairs.join('&');
}

interface Part {
  readonly name: string;
  readonly filename?: string;
  readonly contentType?: string;
  readonly bytes: Buffer;
}

/**
 * RFC 7578 multipart: one part per field. Binary fields are base64-decoded into file parts
 * (`filename` = the field name), objects and arrays are JSON parts, primitives are text parts.
 */
function multipart(
  type: string,
  body: BodyBinding,
  value: Readonly<Record<string, unknown>>,
  random: (size: number) => Buffer,
): EncodedBody {
  const parts: Part[] = [];
  for (const [field, member] of Object.entries(value)) {
    if (isAbsent(member)) continue;
    const declared = body.encoding[field]?.contentType;
    if (body.binaryFields.includes(field)) {
      const files = Array.isArray(member) ? member.filter((m) => !isAbsent(m)) : [member];
      const contentType = concrete(declared, 'application/octet-stream');
      for (const file of files) {
        parts.push({ name: field, filename: field, contentType, bytes: decodeBase64(file, field) });
      }
    } else if (typeof member === 'object') {
      const contentType =
        declared !== undefined && isJsonLike(declared)
          ? concrete(declared, 'application/json')
          : 'application/json';
      parts.push({ name: field, contentType, bytes: utf8(JSON.stringify(member), field) });
    } else {
      const contentType = declared === undefined ? undefined : concrete(declared, 'text/plain');
      parts.push({
        name: field,
        ...(contentType ? { contentType } : {}),
        bytes: utf8(scalarText(member, field), field),
      });
    }
  }
  const boundary = chooseBoundary(parts, random);
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(part.name)}"`;
    if (part.filename !== undefined) head += `; filename="${quoted(part.filename)}"`;
    if (part.contentType !== undefined) head += `\r\nContent-Type: ${part.contentType}`;
    chunks.push(Buffer.from(head + '\r\n\r\n', 'utf8'), part.bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { contentType: `${type}; boundary=${boundary}`, bytes: Buffer.concat(chunks) };
}

/** WHATWG multipart/form-data encoding of names: `"`, CR and LF cannot end the header or the quote. */
function quoted(name: string): string {
  return wellFormed(name, name).replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** A random boundary that occurs in no part (RFC 2046 §5.1.1), at most 70 characters. */
function chooseBoundary(parts: readonly Part[], random: (size: number) => Buffer): string {
  for (let attempt = 0; attempt < 8; attempt++) {
    const boundary = `agent-auth-proxy-${random(16).toString('hex')}`;
    const needle = Buffer.from(boundary);
    if (!parts.some((p) => p.bytes.includes(needle) || p.name.includes(boundary))) return boundary;
  }
  throw new Error('No multipart boundary found that the content does not contain.');
}
