/**
 * Capability arguments → the upstream request's method, path, query, headers, cookies and body,
 * following each ParameterBinding and the BodyBinding. Pure: no I/O. Whatever an agent sends can
 * only ever be data: it cannot change which path is called, add query parameters, split a header
 * or a cookie, or break out of a multipart part.
 */
import type { OperationBinding, ParameterBinding } from '../openapi/types.js';
import { encodeBody } from './body-encoding.js';
import { ArgumentError, isAbsent } from './encoding.js';
import { cookiePairs, headerValue, isEmpty, pathValue, queryPairs, shapeOf } from './styles.js';
import { ownValue } from '../util/own-keys.js';
import { appendAll } from '../util/append-all.js';

export { ArgumentError } from './encoding.js';

export interface UpstreamRequestParts {
  /** Upper case. */
  readonly method: string;
  /**
   * The expanded template plus `?query` when there is one; starts with `/`; fully percent-encoded;
   * relative to the server's base path (the caller joins the base).
   */
  readonly path: string;
  /** Header parameters only, with lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  /** Cookie parameters as already-encoded name/value pairs. */
  readonly cookies: readonly (readonly [string, string])[];
  readonly body?: { readonly contentType: string; readonly bytes: Buffer };
}

type Args = Readonly<Record<string, unknown>>;

/** Throws ArgumentError for an argument that cannot be sent; never mutates `args`. */
export function buildRequestParts(op: OperationBinding, args: Args): UpstreamRequestParts {
  for (const p of op.parameters) {
    if (p.required && isAbsent(ownValue(args, p.argument))) {
      throw new ArgumentError(p.argument, `Missing required ${p.in} parameter ${p.name}.`);
    }
  }
  const query: string[] = [];
  const headers: Record<string, string> = {};
  const cookies: (readonly [string, string])[] = [];
  for (const p of op.parameters) {
    const value = ownValue(args, p.argument);
    if (p.in === 'query') appendAll(query, queryPairs(p, value, p.argument));
    else if (p.in === 'header' || p.in === 'cookie') {
      const shape = shapeOf(value, p.argument, p.contentType);
      if (shape === undefined) continue;
      if (p.in === 'cookie') appendAll(cookies, cookiePairs(p, shape, p.argument));
      else {
        const text = headerValue(p, shape, p.argument);
        if (text !== undefined) headers[p.name.toLowerCase()] = text;
      }
    }
  }
  const path = expandPath(op, args) + (query.length > 0 ? '?' + query.join('&') : '');
  const body = op.body ? encodeBody(op.body, args) : undefined;
  return { method: op.method.toUpperCase(), path, headers, cookies, ...(body ? { body } : {}) };
}

/**
 * `.`, `..` and their encoded spellings, which WHATWG URL parsers (and many servers) resolve
 * case-insensitively (RFC 3986 §5.2.4): a segment like this would move the request to another path.
 */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/** Characters a path template's literal text may keep (RFC 3986 pchar, plus `/`); the rest is encoded. */
const LITERAL_UNSAFE = /%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/]/gu;

/** A segment of a path template: its literal text (encoded once) and the parameters in it. */
interface PathSegment {
  readonly pieces: readonly (string | ParameterBinding)[];
  /** The whole segment, when it holds no parameter. */
  readonly literal?: string;
  /**
   * In a segment holding several parameters (`{name}.{ext}`, `{base}...{head}`), the characters
   * of its literal text that encoding would otherwise leave as they are. A value holding one would
   * move the boundary the upstream's router finds between the values (`name: "setup"`,
   * `ext: "pdf.exe"` read as `setup.pdf` and `exe`), past the constraints checked on each: in
   * values they are percent-encoded, which routers match before decoding.
   */
  readonly separators?: RegExp;
}

/** What encodeStrict leaves unencoded besides letters and digits (RFC 3986 unreserved). */
const UNRESERVED_MARKS = /[-._~]/g;

/** Each operation's template, split and bound once: expansion is then concatenation. */
const compiledPaths = new WeakMap<OperationBinding, readonly PathSegment[]>();

function compilePath(op: OperationBinding): readonly PathSegment[] {
  const cached = compiledPaths.get(op);
  if (cached) return cached;
  const template = op.path;
  const params = new Map(op.parameters.filter((p) => p.in === 'path').map((p) => [p.name, p]));
  const absolute = template.startsWith('/') ? template : '/' + template;
  const compiled = absolute.split('/').map((segment): PathSegment => {
    const pieces = segment.split(/(\{[^{}]*\})/).map((piece, i) => {
      if (i % 2 === 0)
        return piece.replace(LITERAL_UNSAFE, (c) => (c.length === 3 ? c : encodeURIComponent(c)));
      const p = params.get(piece.slice(1, -1));
      if (p === undefined)
        throw new Error(`Path template ${template} names ${piece}, which no parameter binds.`);
      return p;
    });
    if (pieces.length === 1) return { pieces, literal: pieces[0] as string };
    const literalText = pieces.filter((piece) => typeof piece === 'string').join('');
    const marks = new Set(literalText.match(UNRESERVED_MARKS));
    const parameters = pieces.filter((piece) => typeof piece !== 'string').length;
    if (parameters < 2 || marks.size === 0) return { pieces };
    const escaped = [...marks].map((c) => (c === '-' ? '\\-' : c)).join('');
    return { pieces, separators: new RegExp(`[${escaped}]`, 'g') };
  });
  compiledPaths.set(op, compiled);
  return compiled;
}

function expandPath(op: OperationBinding, args: Args): string {
  let path = '';
  for (const [i, segment] of compilePath(op).entries()) {
    if (i > 0) path += '/';
    path += segment.literal ?? expandSegment(segment, op.path, args);
  }
  return path;
}

function expandSegment(segment: PathSegment, template: string, args: Args): string {
  let argument: string | undefined;
  let expanded = '';
  for (const piece of segment.pieces) {
    if (typeof piece === 'string') {
      expanded += piece;
      continue;
    }
    argument ??= piece.argument;
    const shape = shapeOf(ownValue(args, piece.argument), piece.argument, piece.contentType);
    if (shape === undefined) {
      throw new ArgumentError(piece.argument, `Missing required path parameter ${piece.name}.`);
    }
    let text = isEmpty(shape) ? '' : pathValue(piece, shape, piece.argument);
    // Not for label style, whose own `.`s are the value's structure.
    if (segment.separators !== undefined && piece.style !== 'label') {
      text = text.replace(segment.separators, percentEncoded);
    }
    if (text === '')
      throw new ArgumentError(piece.argument, `Path parameter ${piece.name} must not be empty.`);
    // Defence in depth: every value is encoded, so expansion can never add a segment.
    if (text.includes('/')) throw new Error(`Expanding ${template} changed its number of path segments.`);
    expanded += text;
  }
  if (argument !== undefined && DOT_SEGMENT.test(expanded)) {
    throw new ArgumentError(
      argument,
      `Argument ${argument} would make the path segment "${expanded}", a dot segment that changes which path is called (RFC 3986 §5.2.4).`,
    );
  }
  if (argument !== undefined && hidesDotSegment(expanded)) {
    throw new ArgumentError(
      argument,
      `Argument ${argument} would make the path segment "${expanded}", which holds a dot segment between encoded slashes: a server that decodes them first would call another path.`,
    );
  }
  return expanded;
}

function percentEncoded(mark: string): string {
  return `%${mark.charCodeAt(0).toString(16).toUpperCase()}`;
}

/** An encoded `/` or `\` in a path segment. */
const ENCODED_SLASH = /%2f|%5c/i;

/**
 * Whether a segment holds `.` or `..` between encoded slashes (`..%2Fadmin`): sent as one segment,
 * but an upstream (or a proxy in front of it) that decodes `%2F` before it resolves dot segments
 * reads it as a step up. A value with slashes but no dot segment (a file path) goes through.
 */
function hidesDotSegment(segment: string): boolean {
  if (!ENCODED_SLASH.test(segment)) return false;
  return segment.split(/%2f|%5c/i).some((part) => DOT_SEGMENT.test(part));
}

/** Breaks a Cookie header (RFC 6265 §4.2.1): `;`, a control character (CR, LF, NUL…) or non-Latin-1. */
const BAD_COOKIE_CHAR = /[^\x20-\x7e\x80-\xff]|;/;

/**
 * The Cookie header for encoded pairs (credentials, then parameters). Parameter pairs are
 * percent-encoded already; a pair that could still split the header is a configuration error.
 */
export function cookieHeader(pairs: readonly (readonly [string, string])[]): string {
  return pairs
    .map(([name, value]) => {
      if (name === '' || /[=\s]/.test(name) || BAD_COOKIE_CHAR.test(name) || BAD_COOKIE_CHAR.test(value)) {
        throw new Error(`Cookie ${JSON.stringify(name)} cannot be sent in a Cookie header.`);
      }
      return `${name}=${value}`;
    })
    .join('; ');
}
