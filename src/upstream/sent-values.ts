/**
 * What the upstream will actually receive for one input field, read from the serialized request
 * (after styles, explode, arrays, free-form objects and pinned arguments), so grant constraints
 * (§2.13) can be checked against it and not only against the agent's arguments. Pure, no I/O.
 *
 * For a field: `own` is every value its own argument puts into the request, decoded; `foreign` is
 * every value that reaches the upstream under the field's name, or a name a server may read as it
 * (aliasKey), from anything else: an exploded free-form object, a deepObject, a form or JSON body
 * key, another parameter. Servers differ in how they merge query, path and body parameters and in
 * how they match names, so the aliases are deliberately broad.
 */
import { fold } from '../lookalike.js';
import { parameterAlias } from '../openapi/credential-names.js';
import { essence, isJsonLike } from '../openapi/media.js';
import type { BodyBinding, OperationBinding, ParameterBinding } from '../openapi/types.js';
import { decodeCharset, encodeBody } from './body-encoding.js';
import { decodedOrAsIs } from './path-template.js';
import { ArgumentError, type UpstreamRequestParts } from './request-parts.js';
import { cookiePairs, headerValue, pathValue, queryPairs, shapeOf, type Shape } from './styles.js';
import {
  bodyEntries,
  cookieEntries,
  formEntries,
  headerEntries,
  parseJson,
  queryEntries,
  type WireEntry,
  type WireLocation,
} from './wire-entries.js';
import { ownValue } from '../util/own-keys.js';
import { appendAll } from '../util/append-all.js';

export interface SentValue extends WireEntry {
  /** The style's list separators: an upstream reading a list splits `text` on them. */
  readonly separators: readonly string[];
}

export interface SentField {
  readonly own: readonly SentValue[];
  /** Whether some own value is sent under the field's own name (not only under an object's keys). */
  readonly named: boolean;
  /** `by`: the argument that sent it ('' when no single argument did). */
  readonly foreign: readonly (SentValue & { readonly by: string })[];
}

export interface SentRequest {
  field(argument: string): SentField;
}

/**
 * Called by the executor once the request is built and before anything is sent; throws to refuse.
 * `request` names the capability and the caller so that the check can find the grant.
 */

type Args = Readonly<Record<string, unknown>>;

/**
 * `args`: the arguments the parts were built from (pinned ones included). Cheap until a field is
 * asked for: a grant without constraints costs nothing.
 *
 * `pinned`: the operator's pinned arguments (src/openapi/pins.ts), which the agent can neither see
 * nor set. Anything else sending under a pinned name (an exploded object's key `owner`, say) would
 * override the pin at a server that reads the first or last of repeated names, so it throws an
 * ArgumentError naming the argument that tried.
 */
export function sentRequest(
  op: OperationBinding,
  args: Args,
  parts: UpstreamRequestParts,
  pinned: readonly string[] = [],
): SentRequest {
  let all: WireEntry[] | undefined;
  let producers: ReadonlyMap<string, readonly string[]> | undefined;
  const request: SentRequest = {
    field(argument: string): SentField {
      const own = ownValues(op, args, argument);
      const keys = protectedKeys(op, argument);
      // A wrapped body has no name: the whole body is the field.
      if (keys.size === 0) return { own, named: own.length > 0, foreign: [] };
      const named = own.some((entry) => keys.has(aliasKey(entry.in, entry.name)));
      all ??= requestEntries(op, args, parts);
      // The field's own entries are taken out once each; whatever else carries its name is foreign.
      const mine = new Map<string, number>();
      for (const entry of own) mine.set(identity(entry), (mine.get(identity(entry)) ?? 0) + 1);
      const foreign: (SentValue & { by: string })[] = [];
      for (const entry of all) {
        if (!keys.has(aliasKey(entry.in, entry.name))) continue;
        const left = mine.get(identity(entry)) ?? 0;
        if (left > 0) {
          mine.set(identity(entry), left - 1);
          continue;
        }
        producers ??= producersOf(op, args);
        foreign.push({ ...entry, separators: [','], by: producer(op, producers, argument, entry) });
      }
      return { own, named, foreign };
    },
  };
  for (const pin of pinned) {
    const [smuggled] = request.field(pin).foreign;
    if (smuggled !== undefined) {
      const by = smuggled.by === '' ? pin : smuggled.by;
      throw new ArgumentError(
        by,
        `Argument ${by} would send ${JSON.stringify(smuggled.name)} (${smuggled.in}), which the operator pins; it cannot be set by an agent.`,
      );
    }
  }
  return request;
}

/**
 * The name a server may read a value under. Query, path, body and cookie names are one namespace
 * (many frameworks merge them: PHP's $_REQUEST takes cookies last, so `Cookie: amount=5000` beside
 * `?amount=5` is read as 5000), read as parameterAlias reads them (lookalike folding, `.` or spaces
 * as `_`, a NUL or Rack's brackets ending the name: src/openapi/credential-names.ts).
 * Header names fold `-` and `_` together (CGI reads both as `_`).
 */
export function aliasKey(location: WireLocation, name: string): string {
  if (location === 'header') return `header:${fold(name).replace(/-/g, '_')}`;
  return `param:${parameterAlias(name)}`;
}

/** The names only `argument` may send under: its parameter's, or its flattened body field's. */
function protectedKeys(op: OperationBinding, argument: string): Set<string> {
  const keys = new Set<string>();
  for (const p of op.parameters) if (p.argument === argument) keys.add(aliasKey(p.in, p.name));
  if (op.body?.mode === 'flattened' && op.body.fields.includes(argument))
    keys.add(aliasKey('body', argument));
  return keys;
}

/** Everything in the request an agent's arguments can shape, as the upstream decodes it. */
function requestEntries(op: OperationBinding, args: Args, parts: UpstreamRequestParts): WireEntry[] {
  // Path values cannot move between parameters (the template fixes them), so they are read per
  // parameter; the rest is read back from the serialized parts.
  const path = op.parameters
    .filter((p) => p.in === 'path')
    .flatMap((p) => parameterValues(p, ownValue(args, p.argument)));
  return [
    ...path,
    ...queryEntries(parts.path),
    ...headerEntries(parts.headers),
    ...cookieEntries(parts.cookies),
    ...(parts.body ? bodyEntries(parts.body) : []),
  ];
}

/** Every value `argument` alone puts into the request, serialized by the same code as the request. */
export function ownValues(op: OperationBinding, args: Args, argument: string): SentValue[] {
  const value = ownValue(args, argument);
  if (value === undefined) return [];
  const out: SentValue[] = [];
  for (const p of op.parameters) if (p.argument === argument) appendAll(out, parameterValues(p, value));
  if (op.body && bodyArgument(op.body) === argument)
    appendAll(out, wrappedBodyValues(op.body, argument, value));
  else if (op.body?.mode === 'flattened' && op.body.fields.includes(argument)) {
    appendAll(out, bodyFieldValues(op.body, argument, value));
  }
  return out;
}

function parameterValues(p: ParameterBinding, value: unknown): SentValue[] {
  const shape = shapeOf(value, p.argument, p.contentType);
  if (shape === undefined) return [];
  const json = p.contentType !== undefined && isJsonLike(p.contentType);
  const separators = json ? [] : separatorsOf(p.style, shape, p.in);
  const entries = ((): WireEntry[] => {
    if (p.in === 'query') return formEntries(queryPairs(p, value, p.argument).join('&'), 'query');
    if (p.in === 'cookie') return cookieEntries(cookiePairs(p, shape, p.argument));
    if (p.in === 'header') {
      const text = headerValue(p, shape, p.argument);
      return text === undefined ? [] : [{ in: 'header', name: p.name.toLowerCase(), text }];
    }
    return pathEntries(p, shape);
  })();
  return entries.map((entry) => {
    const parsed = json ? parseJson(entry.text) : undefined;
    return { ...entry, ...(parsed ? { json: parsed } : {}), separators };
  });
}

/** Path styles read back: `simple` as is, `label` without its dot, `matrix` as `;name=value` pairs. */
function pathEntries(p: ParameterBinding, shape: Shape): WireEntry[] {
  if (shape.kind !== 'scalar' && (shape.kind === 'list' ? shape.items : shape.entries).length === 0)
    return [];
  const raw = pathValue(p, shape, p.argument);
  if (p.style === 'matrix') {
    return raw
      .split(';')
      .slice(1)
      .map((chunk) => {
        const eq = chunk.indexOf('=');
        const name = decodedOrAsIs(eq === -1 ? chunk : chunk.slice(0, eq));
        return { in: 'path', name, text: eq === -1 ? '' : decodedOrAsIs(chunk.slice(eq + 1)) };
      });
  }
  return [{ in: 'path', name: p.name, text: decodedOrAsIs(p.style === 'label' ? raw.slice(1) : raw) }];
}

/** The argument that is the whole body, when the body is wrapped. */
function bodyArgument(body: BodyBinding): string | undefined {
  return body.mode === 'wrapped' ? (body.argument ?? body.fields[0] ?? 'body') : undefined;
}

function wrappedBodyValues(body: BodyBinding, argument: string, value: unknown): SentValue[] {
  const encoded = encodeBody(body, { [argument]: value });
  if (!encoded) return [];
  if (isJsonLike(essence(encoded.contentType))) {
    const text = decodeCharset(encoded.bytes, encoded.contentType);
    const json = parseJson(text);
    return [{ in: 'body', name: '', text, ...(json ? { json } : {}), separators: [] }];
  }
  return bodyEntries(encoded).map((entry) => withBodySeparators(body, entry));
}

function bodyFieldValues(body: BodyBinding, field: string, value: unknown): SentValue[] {
  const encoded = encodeBody(body, { [field]: value });
  if (!encoded) return [];
  return bodyEntries(encoded).map((entry) => withBodySeparators(body, entry));
}

function withBodySeparators(body: BodyBinding, entry: WireEntry): SentValue {
  const bracket = entry.name.indexOf('[');
  const enc = body.encoding[bracket > 0 ? entry.name.slice(0, bracket) : entry.name];
  if (entry.json === undefined && enc?.contentType !== undefined && isJsonLike(enc.contentType)) {
    const json = parseJson(entry.text);
    if (json) return { ...entry, json, separators: [] };
  }
  return { ...entry, separators: separatorsOf(enc?.style ?? 'form', undefined, 'body') };
}

const STYLE_SEPARATORS: Readonly<Record<string, string>> = {
  spaceDelimited: ' ',
  pipeDelimited: '|',
  tabDelimited: '\t',
  label: '.',
};

/**
 * `,` always (the common list separator), the style's own, and `=` wherever an object is written
 * as `key=value` inside one value (headers and path segments, and any non-exploded object).
 */
function separatorsOf(style: string, shape: Shape | undefined, location: WireLocation): string[] {
  const out = [','];
  const own = STYLE_SEPARATORS[style];
  if (own !== undefined) out.push(own);
  if (shape?.kind === 'map' || location === 'header' || location === 'path') out.push('=');
  return out;
}

function identity(entry: WireEntry): string {
  return `${entry.in}\u0000${entry.name}\u0000${entry.text}`;
}

/**
 * Each value's identity → the arguments that send it, in argument order: worked out once per
 * request, so that naming who sent each of many smuggled values costs one pass over the arguments
 * (asking every other argument for every value was quadratic: 2,000 keys of one free-form object
 * held the event loop for 7.5 s).
 */
function producersOf(op: OperationBinding, args: Args): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const argument of Object.keys(args)) {
    for (const value of ownValues(op, args, argument)) {
      const id = identity(value);
      const list = out.get(id);
      if (list === undefined) out.set(id, [argument]);
      else if (list.at(-1) !== argument) list.push(argument);
    }
  }
  return out;
}

/** Which other argument sends `entry` ('' when none alone does); only asked of a refused value. */
function producer(
  op: OperationBinding,
  producers: ReadonlyMap<string, readonly string[]>,
  argument: string,
  entry: WireEntry,
): string {
  // A wrapped body is one argument: every key in it is that argument's.
  const wrapped = op.body ? bodyArgument(op.body) : undefined;
  if (entry.in === 'body' && wrapped !== undefined) return wrapped;
  return producers.get(identity(entry))?.find((other) => other !== argument) ?? '';
}
