/**
 * OpenAPI parameter styles (3.1 "Style Values" / "Style Examples", RFC 6570 §3.2) for one value.
 * Agent data is always percent-encoded; only the separators the style defines are written raw.
 * Where the OpenAPI table and RFC 6570 disagree (non-exploded `label`), RFC 6570 wins, as in
 * OpenAPI 3.1.1: `.blue,black,brown`. Pipes, tabs and brackets are percent-encoded (3.1.1 tables).
 */
import { isJsonLike } from '../openapi/media.js';
import type { ParameterBinding } from '../openapi/types.js';
import {
  ArgumentError,
  encodeReserved,
  encodeStrict,
  isAbsent,
  isPlainObject,
  scalarText,
  wellFormed,
} from './encoding.js';
import { appendAll } from '../util/append-all.js';

export type Shape =
  | { readonly kind: 'scalar'; readonly value: string }
  | { readonly kind: 'list'; readonly items: readonly string[] }
  | { readonly kind: 'map'; readonly entries: readonly (readonly [string, string])[] };

type Style = Pick<ParameterBinding, 'name' | 'style' | 'explode'>;

/**
 * The value as a primitive, list or map of text; `undefined` when absent (null or undefined).
 * Null members of lists and maps are dropped (RFC 6570 §2.3). A `content` parameter is one
 * scalar: JSON for a JSON media type, else the string itself.
 */
export function shapeOf(value: unknown, argument: string, contentType?: string): Shape | undefined {
  if (isAbsent(value)) return undefined;
  if (contentType !== undefined) {
    const text = isJsonLike(contentType) || typeof value !== 'string' ? JSON.stringify(value) : value;
    return { kind: 'scalar', value: wellFormed(text, argument) };
  }
  if (Array.isArray(value)) {
    return { kind: 'list', items: value.filter((v) => !isAbsent(v)).map((v) => scalarText(v, argument)) };
  }
  if (isPlainObject(value)) {
    const entries = Object.entries(value)
      .filter(([, v]) => !isAbsent(v))
      .map(([k, v]) => [wellFormed(k, argument), scalarText(v, argument)] as const);
    return { kind: 'map', entries };
  }
  return { kind: 'scalar', value: scalarText(value, argument) };
}

export function isEmpty(shape: Shape): boolean {
  return (
    (shape.kind === 'list' && shape.items.length === 0) ||
    (shape.kind === 'map' && shape.entries.length === 0)
  );
}

/** Path styles `simple` (default), `label`, `matrix`; every character but unreserved is encoded. */
export function pathValue(p: Style, shape: Shape, argument: string): string {
  const e = (s: string): string => encodeStrict(s, argument);
  const flat = (entries: readonly (readonly [string, string])[]): string[] =>
    entries.flatMap(([k, v]) => [e(k), e(v)]);
  const assigned = (entries: readonly (readonly [string, string])[], sep: string): string =>
    entries.map(([k, v]) => `${e(k)}=${e(v)}`).join(sep);
  if (p.style === 'label') {
    if (shape.kind === 'scalar') return '.' + e(shape.value);
    if (shape.kind === 'list') return '.' + shape.items.map(e).join(p.explode ? '.' : ',');
    return '.' + (p.explode ? assigned(shape.entries, '.') : flat(shape.entries).join(','));
  }
  if (p.style === 'matrix') {
    const named = (name: string, v: string): string => (v === '' ? `;${name}` : `;${name}=${e(v)}`);
    const n = e(p.name);
    if (shape.kind === 'scalar') return named(n, shape.value);
    if (shape.kind === 'list') {
      return p.explode
        ? shape.items.map((v) => named(n, v)).join('')
        : `;${n}=${shape.items.map(e).join(',')}`;
    }
    return p.explode
      ? shape.entries.map(([k, v]) => named(e(k), v)).join('')
      : `;${n}=${flat(shape.entries).join(',')}`;
  }
  if (shape.kind === 'scalar') return e(shape.value);
  // Swagger 2.0's `collectionFormat` (ssv, pipes, tsv) maps to these styles for path parameters too.
  if (shape.kind === 'list') return shape.items.map(e).join(DELIMITERS[p.style] ?? ',');
  return p.explode ? assigned(shape.entries, ',') : flat(shape.entries).join(',');
}

const DELIMITERS: Readonly<Record<string, string>> = {
  form: ',',
  spaceDelimited: '%20',
  pipeDelimited: '%7C',
  // Swagger 2.0 `collectionFormat: tsv`.
  tabDelimited: '%09',
};

/**
 * Query styles `form` (default), `spaceDelimited`, `pipeDelimited`, `deepObject`, as encoded
 * `name=value` pairs. Names and object keys are always strictly encoded; values too unless
 * `allowReserved` (see encodeReserved: `& = # + %` stay encoded, so no extra parameter can appear).
 * An empty list or object is omitted when exploded and `name=` otherwise.
 */
export function queryPairs(
  p: Style & Pick<ParameterBinding, 'allowReserved' | 'contentType'>,
  value: unknown,
  argument: string,
): string[] {
  const shape = shapeOf(value, argument, p.contentType);
  if (shape === undefined) return [];
  const k = (s: string): string => encodeStrict(s, argument);
  const v = (s: string): string =>
    p.allowReserved ? encodeReserved(s, argument) : encodeStrict(s, argument);
  const n = k(p.name);
  if (p.style === 'deepObject' && p.contentType === undefined && isPlainObject(value)) {
    return deepPairs(n, value, v, argument);
  }
  if (shape.kind === 'scalar') return [`${n}=${v(shape.value)}`];
  const sep = DELIMITERS[p.style] ?? ',';
  const exploded = p.explode || p.style === 'deepObject';
  if (shape.kind === 'list') {
    return exploded ? shape.items.map((i) => `${n}=${v(i)}`) : [`${n}=${shape.items.map(v).join(sep)}`];
  }
  return exploded
    ? shape.entries.map(([key, val]) => `${k(key)}=${v(val)}`)
    : [`${n}=${shape.entries.flatMap(([key, val]) => [v(key), v(val)]).join(sep)}`];
}

/**
 * `color%5BR%5D=100`: nested objects recurse, arrays repeat the key (undefined by OpenAPI). A key
 * that is empty or holds a bracket cannot be told apart from structure: Rack, PHP and qs decode
 * `%5B`/`%5D` before they read brackets, so `{"cloud][$ne": "aws"}` would arrive as the nested
 * `{cloud: {$ne: "aws"}}` and `{"": "x"}` as a list, neither of which the schema allowed.
 */
export function deepPairs(
  prefix: string,
  value: Readonly<Record<string, unknown>>,
  v: (s: string) => string,
  argument: string,
): string[] {
  const out: string[] = [];
  for (const [key, member] of Object.entries(value)) {
    if (isAbsent(member)) continue;
    if (key === '' || /[[\]]/.test(key)) {
      throw new ArgumentError(
        argument,
        `Argument ${argument} has the key ${JSON.stringify(key)}, which cannot be sent in brackets: servers would read it as structure (an empty key, or one holding [ or ]).`,
      );
    }
    const name = `${prefix}%5B${encodeStrict(key, argument)}%5D`;
    if (isPlainObject(member)) appendAll(out, deepPairs(name, member, v, argument));
    else if (Array.isArray(member)) {
      for (const item of member) if (!isAbsent(item)) out.push(`${name}=${v(scalarText(item, argument))}`);
    } else out.push(`${name}=${v(scalarText(member, argument))}`);
  }
  return out;
}

/** Swagger 2.0's `collectionFormat` for a header (ssv, pipes, tsv), unencoded: headers are not. */
const HEADER_DELIMITERS: Readonly<Record<string, string>> = {
  spaceDelimited: ' ',
  pipeDelimited: '|',
  tabDelimited: '\t',
};

/** Anything but HTAB, SP, VCHAR and obs-text (RFC 9110 §5.5): CR/LF/NUL would split the header. */
const BAD_HEADER_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * Header style `simple`; `undefined` for an empty list or object (the header is left out). Header
 * values have no escaping, so the separators cannot appear inside what they separate: a list item
 * holding `,` would arrive as several items, a map key or value holding `,` or `=` as other
 * entries (`note: "x,role=admin"` beside `role: viewer`).
 */
export function headerValue(p: Style, shape: Shape, argument: string): string | undefined {
  if (isEmpty(shape)) return undefined;
  const listDelimiter = HEADER_DELIMITERS[p.style] ?? ',';
  const separated = (pieces: readonly string[], separators: readonly string[], what: string): void => {
    if (pieces.some((piece) => separators.some((separator) => piece.includes(separator)))) {
      throw new ArgumentError(
        argument,
        `Header parameter ${p.name} has ${what} holding ${separators.map((x) => JSON.stringify(x)).join(' or ')}, which would arrive as more than one (a header value has no escaping).`,
      );
    }
  };
  let text: string;
  if (shape.kind === 'scalar') text = shape.value;
  else if (shape.kind === 'list') {
    separated(shape.items, [listDelimiter], 'an item');
    text = shape.items.join(listDelimiter);
  } else {
    separated(
      shape.entries.flatMap(([k, v]) => [k, v]),
      [',', '='],
      'a key or value',
    );
    text = p.explode
      ? shape.entries.map(([k, v]) => `${k}=${v}`).join(',')
      : shape.entries.flatMap(([k, v]) => [k, v]).join(',');
  }
  if (BAD_HEADER_CHAR.test(text)) {
    throw new ArgumentError(
      argument,
      `Header parameter ${p.name} contains a control character or a character outside Latin-1, which an HTTP header cannot carry (RFC 9110 §5.5).`,
    );
  }
  return text;
}

/** RFC 6265 §4.1.1 cookie-name (an RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Cookie style `form`, as `[name, value]` pairs with every value strictly percent-encoded, so no
 * `;`, `,`, space, `=` or quote of the agent's can end a cookie or start another. An exploded
 * object's keys become cookie names and are strictly encoded too.
 */
export function cookiePairs(p: Style, shape: Shape, argument: string): [string, string][] {
  const e = (s: string): string => encodeStrict(s, argument);
  const n = TOKEN.test(p.name) ? p.name : e(p.name);
  if (shape.kind === 'scalar') return [[n, e(shape.value)]];
  if (shape.kind === 'list') {
    return p.explode ? shape.items.map((i) => [n, e(i)]) : [[n, shape.items.map(e).join(',')]];
  }
  return p.explode
    ? shape.entries.map(([k, v]) => [e(k), e(v)])
    : [[n, shape.entries.flatMap(([k, v]) => [e(k), e(v)]).join(',')]];
}
