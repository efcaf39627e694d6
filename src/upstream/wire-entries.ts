/**
 * Reads serialized request parts back the way an upstream server does: every query entry, header,
 * cookie and body field as a decoded name/value pair. Pure. Used to find out what the upstream
 * will actually receive (sent-values.ts), independently of how the parts were built.
 */
import { essence, isJsonLike, isTextual } from '../openapi/media.js';
import { decodeCharset } from './body-encoding.js';

export type WireLocation = 'path' | 'query' | 'header' | 'cookie' | 'body';

/** One value as the upstream decodes it. `json`: the parsed value where the location carries JSON. */
export interface WireEntry {
  readonly in: WireLocation;
  /** Decoded; header names in lower case; '' for a body that is one value, not named fields. */
  readonly name: string;
  readonly text: string;
  readonly json?: { readonly value: unknown };
}

/** Percent-decoding as form decoders do it (`+` is a space); text that is not valid stays as is. */
export function formDecode(text: string): string {
  const spaced = text.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/** `a=1&b=2` → entries; a pair without `=` has the value ''. */
export function formEntries(encoded: string, location: WireLocation): WireEntry[] {
  if (encoded === '') return [];
  return encoded
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      const value = eq === -1 ? '' : pair.slice(eq + 1);
      return { in: location, name: formDecode(name), text: formDecode(value) };
    });
}

/** The query entries of `path?query`. */
export function queryEntries(pathAndQuery: string): WireEntry[] {
  const q = pathAndQuery.indexOf('?');
  return q === -1 ? [] : formEntries(pathAndQuery.slice(q + 1), 'query');
}

export function headerEntries(headers: Readonly<Record<string, string>>): WireEntry[] {
  return Object.entries(headers).map(([name, text]) => ({ in: 'header', name: name.toLowerCase(), text }));
}

export function cookieEntries(pairs: readonly (readonly [string, string])[]): WireEntry[] {
  return pairs.map(([name, value]) => ({ in: 'cookie', name: formDecode(name), text: formDecode(value) }));
}

/**
 * A body's fields: the top-level keys of a JSON object, the pairs of a form, the parts of a
 * multipart body (a JSON part parsed); any other body is one unnamed value.
 */
export function bodyEntries(body: { readonly contentType: string; readonly bytes: Buffer }): WireEntry[] {
  const type = essence(body.contentType);
  if (isJsonLike(type)) {
    // In the charset the body was encoded in (body-encoding.ts inCharset), as the upstream reads it.
    const text = decodeCharset(body.bytes, body.contentType);
    const value = parseJson(text);
    if (value !== undefined && isRecord(value.value)) {
      return Object.entries(value.value).map(([name, member]) => ({
        in: 'body',
        name,
        text: JSON.stringify(member),
        json: { value: member },
      }));
    }
    return [{ in: 'body', name: '', text, ...(value ? { json: value } : {}) }];
  }
  if (type === 'application/x-www-form-urlencoded') return formEntries(body.bytes.toString('latin1'), 'body');
  if (type.startsWith('multipart/')) return multipartEntries(body.contentType, body.bytes);
  const text = isTextual(type) ? decodeCharset(body.bytes, body.contentType) : body.bytes.toString('utf8');
  return [{ in: 'body', name: '', text }];
}

function multipartEntries(contentType: string, bytes: Buffer): WireEntry[] {
  const boundary = /;\s*boundary="?([^";]+)"?/i.exec(contentType)?.[1];
  if (boundary === undefined) return [{ in: 'body', name: '', text: bytes.toString('utf8') }];
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // Prefixing CRLF makes the first delimiter look like every other one (RFC 2046 §5.1.1).
  const data = Buffer.concat([Buffer.from('\r\n'), bytes]);
  const entries: WireEntry[] = [];
  let at = data.indexOf(delimiter);
  while (at !== -1) {
    const start = at + delimiter.length;
    if (data.subarray(start, start + 2).toString('latin1') === '--') break;
    const next = data.indexOf(delimiter, start);
    const part = data.subarray(start + 2, next === -1 ? data.length : next);
    const split = part.indexOf('\r\n\r\n');
    if (split !== -1) {
      const head = part.subarray(0, split).toString('utf8');
      const content = part.subarray(split + 4).toString('utf8');
      const name = /content-disposition:[^\r\n]*?;\s*name="([^"]*)"/i.exec(head)?.[1] ?? '';
      const type = /content-type:\s*([^\r\n]*)/i.exec(head)?.[1];
      const json = type !== undefined && isJsonLike(type) ? parseJson(content) : undefined;
      entries.push({ in: 'body', name, text: content, ...(json ? { json } : {}) });
    }
    at = next;
  }
  return entries;
}

export function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
