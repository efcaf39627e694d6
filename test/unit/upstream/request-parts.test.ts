import { describe, expect, it } from 'vitest';
import type { BodyBinding, OperationBinding } from '../../../src/openapi/types.js';
import { encodeBody } from '../../../src/upstream/body-encoding.js';
import {
  ArgumentError,
  buildRequestParts,
  cookieHeader,
  type UpstreamRequestParts,
} from '../../../src/upstream/request-parts.js';
import { body, opWith, param } from '../../helpers/bindings.js';

// Fixtures are built by hand: one binding per test keeps each rule visible.

const op = opWith({ pointer: '/paths/x/get' });

function wrapped(mediaType: string, extra: Partial<BodyBinding> = {}): BodyBinding {
  return body(mediaType, { mode: 'wrapped', argument: 'body', fields: ['body'], ...extra });
}

/** Runs the builder and returns the ArgumentError it throws (fails the test if it does not). */
function argumentError(operation: OperationBinding, args: Record<string, unknown>): ArgumentError {
  try {
    buildRequestParts(operation, args);
  } catch (err) {
    expect(err).toBeInstanceOf(ArgumentError);
    return err as ArgumentError;
  }
  throw new Error('expected an ArgumentError');
}

function query(parts: UpstreamRequestParts): string {
  const i = parts.path.indexOf('?');
  return i < 0 ? '' : parts.path.slice(i + 1);
}

/** How a WHATWG URL parser (undici, most servers' routers) reads the path the executor sends. */
function upstreamUrl(parts: UpstreamRequestParts): URL {
  return new URL('http://upstream.test/v1' + parts.path);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Parses a multipart body with undici's spec-conformant parser, to prove the encoding is valid. */
async function formData(b: { contentType: string; bytes: Buffer }): Promise<FormData> {
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- a test oracle, not a server path
  return new Response(b.bytes, { headers: { 'content-type': b.contentType } }).formData();
}

/** A file part's name, type and bytes. */
async function file(value: unknown): Promise<{ name: string; type: string; bytes: Buffer }> {
  if (!(value instanceof Blob) || !('name' in value) || typeof value.name !== 'string') {
    throw new Error(`expected a file part, got ${JSON.stringify(value)}`);
  }
  return { name: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) };
}

const STRING = 'blue';
const ARRAY = ['blue', 'black', 'brown'];
const OBJECT = { R: 100, G: 200, B: 150 };
type Kind = 'string' | 'array' | 'object';
const VALUES: Record<Kind, unknown> = { string: STRING, array: ARRAY, object: OBJECT };

describe('several parameters in one path segment', () => {
  /** The two values as a router splitting at the first separator and one splitting at the last read them. */
  function readBack(segment: string, separator: string): [string, string][] {
    const at = [segment.indexOf(separator), segment.lastIndexOf(separator)];
    return at.map((i) => [
      decodeURIComponent(segment.slice(0, i)),
      decodeURIComponent(segment.slice(i + separator.length)),
    ]);
  }

  it('encodes the separator inside values, so every router finds the boundary where it is ({name}.{ext})', () => {
    const files = op('/files/{name}.{ext}', [param('name', 'path'), param('ext', 'path')]);
    for (const [name, ext] of [
      ['setup', 'pdf.exe'],
      ['archive.tar', 'gz'],
      ['a', 'b'],
    ] as const) {
      const { path } = buildRequestParts(files, { name, ext });
      const segment = path.slice('/files/'.length);
      expect(readBack(segment, '.')).toEqual([
        [name, ext],
        [name, ext],
      ]);
    }
    expect(buildRequestParts(files, { name: 'setup', ext: 'pdf.exe' }).path).toBe('/files/setup.pdf%2Eexe');
  });

  it('encodes every mark of the literal text ({base}...{head}, {from}-{to}), and nothing in a lone parameter', () => {
    const compare = op('/compare/{base}...{head}', [param('base', 'path'), param('head', 'path')]);
    expect(buildRequestParts(compare, { base: 'main', head: 'release...topic' }).path).toBe(
      '/compare/main...release%2E%2E%2Etopic',
    );
    const range = op('/range/{from}-{to}', [param('from', 'path'), param('to', 'path')]);
    expect(buildRequestParts(range, { from: '2024-01', to: '2024-02.x' }).path).toBe(
      '/range/2024%2D01-2024%2D02.x',
    );
    // One parameter beside literal text: the template's own text fixes the boundary.
    const one = op('/files/{name}.json', [param('name', 'path')]);
    expect(buildRequestParts(one, { name: 'a.b-c' }).path).toBe('/files/a.b-c.json');
  });
});

describe('OpenAPI 3.1 Style Examples: path parameters', () => {
  // Non-exploded label follows RFC 6570 §3.2.5 ({.list} → .red,green,blue), as OpenAPI 3.1.1 corrected.
  const table: [string, boolean, Kind, string][] = [
    ['matrix', false, 'string', ';color=blue'],
    ['matrix', false, 'array', ';color=blue,black,brown'],
    ['matrix', false, 'object', ';color=R,100,G,200,B,150'],
    ['matrix', true, 'string', ';color=blue'],
    ['matrix', true, 'array', ';color=blue;color=black;color=brown'],
    ['matrix', true, 'object', ';R=100;G=200;B=150'],
    ['label', false, 'string', '.blue'],
    ['label', false, 'array', '.blue,black,brown'],
    ['label', false, 'object', '.R,100,G,200,B,150'],
    ['label', true, 'string', '.blue'],
    ['label', true, 'array', '.blue.black.brown'],
    ['label', true, 'object', '.R=100.G=200.B=150'],
    ['simple', false, 'string', 'blue'],
    ['simple', false, 'array', 'blue,black,brown'],
    ['simple', false, 'object', 'R,100,G,200,B,150'],
    ['simple', true, 'string', 'blue'],
    ['simple', true, 'array', 'blue,black,brown'],
    ['simple', true, 'object', 'R=100,G=200,B=150'],
  ];
  it.each(table)('%s explode=%s %s → %s', (style, explode, kind, expected) => {
    const parts = buildRequestParts(op('/colors/{color}/x', [param('color', 'path', { style, explode })]), {
      color: VALUES[kind],
    });
    expect(parts.path).toBe(`/colors/${expected}/x`);
  });

  it('matrix with an empty string is `;color` (the "empty" column)', () => {
    const parts = buildRequestParts(op('/c/{color}', [param('color', 'path', { style: 'matrix' })]), {
      color: '',
    });
    expect(parts.path).toBe('/c/;color');
  });

  it('numbers and booleans use String(); separators inside values are encoded', () => {
    const o = op('/a/{n}/{b}/{list}', [param('n', 'path'), param('b', 'path'), param('list', 'path')]);
    expect(buildRequestParts(o, { n: 1.5, b: false, list: ['x,y', 'z'] }).path).toBe('/a/1.5/false/x%2Cy,z');
  });

  it('a template with several expressions is expanded in one pass (a value cannot name another)', () => {
    const o = op('/{a}/{b}', [param('a', 'path'), param('b', 'path')]);
    expect(buildRequestParts(o, { a: '{b}', b: 'x' }).path).toBe('/%7Bb%7D/x');
  });

  it('a parameter with `content: application/json` is sent as encoded JSON', () => {
    const o = op('/f/{filter}', [param('filter', 'path', { contentType: 'application/json' })]);
    const parts = buildRequestParts(o, { filter: { a: '/' } });
    expect(parts.path).toBe('/f/%7B%22a%22%3A%22%2F%22%7D');
    expect(JSON.parse(decodeURIComponent(parts.path.slice(3)))).toEqual({ a: '/' });
  });
});

describe('path parameters cannot change which path is called', () => {
  const o = op('/users/{id}/profile', [param('id', 'path')]);
  const accepted: [string, string][] = [
    ['..%2fadmin', '..%252fadmin'],
    ['%2e%2e', '%252e%252e'],
    ['%2E%2E', '%252E%252E'],
    ['.%2e', '.%252e'],
    ['%2e', '%252e'],
    ['...', '...'],
    ['a/b', 'a%2Fb'],
    ['?x=1', '%3Fx%3D1'],
    ['#frag', '%23frag'],
    ['a;b=c', 'a%3Bb%3Dc'],
    ['100%', '100%25'],
    ['sp ace+plus', 'sp%20ace%2Bplus'],
    ["it's(*)!", 'it%27s%28%2A%29%21'],
    ['ünï/😀', '%C3%BCn%C3%AF%2F%F0%9F%98%80'],
    ['\r\n\0', '%0D%0A%00'],
  ];
  it.each(accepted)('%j stays inside its one segment as %s', (value, encoded) => {
    const parts = buildRequestParts(o, { id: value });
    expect(parts.path).toBe(`/users/${encoded}/profile`);
    const url = upstreamUrl(parts);
    expect(url.pathname).toBe(`/v1/users/${encoded}/profile`);
    expect(url.search).toBe('');
    expect(url.hash).toBe('');
    expect(decodeURIComponent(url.pathname.split('/')[3]!)).toBe(value);
  });

  const rejected: [string, unknown][] = [
    ['..', '..'],
    ['.', '.'],
    ['empty string', ''],
    ['empty array', []],
    ['empty object', {}],
    ['null', null],
    ['missing', undefined],
    ['lone surrogate', 'a\ud800b'],
    // One segment as sent (..%2Fadmin), but a step up for a server that decodes %2F first.
    ['../admin', '../admin'],
    ['\\..\\admin', '\\..\\admin'],
  ];
  it.each(rejected)('%s is rejected with an ArgumentError naming the argument', (_label, value) => {
    const err = argumentError(o, { id: value });
    expect(err.argument).toBe('id');
  });

  it('a dot segment made of a label prefix, two expressions or an encoded dot is rejected', () => {
    const label = op('/u/{id}', [param('id', 'path', { style: 'label' })]);
    expect(argumentError(label, { id: '.' }).argument).toBe('id');
    expect(argumentError(label, { id: '' }).argument).toBe('id');
    const two = op('/u/{a}{b}/x', [param('a', 'path'), param('b', 'path')]);
    expect(argumentError(two, { a: '.', b: '.' }).argument).toBe('a');
    expect(buildRequestParts(two, { a: '.', b: 'x' }).path).toBe('/u/.x/x');
    const array = op('/u/{ids}', [param('ids', 'path')]);
    expect(argumentError(array, { ids: ['.'] }).argument).toBe('ids');
    expect(buildRequestParts(array, { ids: ['.', '.'] }).path).toBe('/u/.,.');
  });

  it('a literal suffix in the segment keeps a dot value harmless', () => {
    const o2 = op('/files/{name}.json', [param('name', 'path')]);
    expect(buildRequestParts(o2, { name: '.' }).path).toBe('/files/..json');
    expect(upstreamUrl(buildRequestParts(o2, { name: '.' })).pathname).toBe('/v1/files/..json');
  });

  it('a template expression no parameter binds is a programming error, not an argument error', () => {
    expect(() => buildRequestParts(op('/x/{other}'), {})).toThrow(/no parameter binds/);
  });

  it('literal template text outside RFC 3986 pchar is encoded; existing %XX kept', () => {
    expect(buildRequestParts(op('/a b/%20/{x}', [param('x', 'path')]), { x: '1' }).path).toBe('/a%20b/%20/1');
  });
});

describe('OpenAPI 3.1 Style Examples: query parameters', () => {
  const table: [string, boolean, Kind, string][] = [
    ['form', false, 'string', 'color=blue'],
    ['form', false, 'array', 'color=blue,black,brown'],
    ['form', false, 'object', 'color=R,100,G,200,B,150'],
    ['form', true, 'string', 'color=blue'],
    ['form', true, 'array', 'color=blue&color=black&color=brown'],
    ['form', true, 'object', 'R=100&G=200&B=150'],
    ['spaceDelimited', false, 'string', 'color=blue'],
    ['spaceDelimited', false, 'array', 'color=blue%20black%20brown'],
    ['spaceDelimited', false, 'object', 'color=R%20100%20G%20200%20B%20150'],
    ['spaceDelimited', true, 'array', 'color=blue&color=black&color=brown'],
    ['spaceDelimited', true, 'object', 'R=100&G=200&B=150'],
    ['pipeDelimited', false, 'string', 'color=blue'],
    ['pipeDelimited', false, 'array', 'color=blue%7Cblack%7Cbrown'],
    ['pipeDelimited', false, 'object', 'color=R%7C100%7CG%7C200%7CB%7C150'],
    ['pipeDelimited', true, 'array', 'color=blue&color=black&color=brown'],
    ['tabDelimited', false, 'array', 'color=blue%09black%09brown'],
    ['deepObject', true, 'object', 'color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150'],
    ['deepObject', false, 'object', 'color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150'],
    ['deepObject', true, 'string', 'color=blue'],
    ['deepObject', true, 'array', 'color=blue&color=black&color=brown'],
  ];
  it.each(table)('%s explode=%s %s → %s', (style, explode, kind, expected) => {
    const parts = buildRequestParts(op('/q', [param('color', 'query', { style, explode })]), {
      color: VALUES[kind],
    });
    expect(parts.path).toBe(`/q?${expected}`);
  });

  it('form: an empty string is `color=`; an empty list is `color=` unexploded and omitted exploded', () => {
    const form = (explode: boolean): OperationBinding => op('/q', [param('color', 'query', { explode })]);
    expect(buildRequestParts(form(true), { color: '' }).path).toBe('/q?color=');
    expect(buildRequestParts(form(false), { color: [] }).path).toBe('/q?color=');
    expect(buildRequestParts(form(true), { color: [] }).path).toBe('/q');
    expect(buildRequestParts(form(true), { color: {} }).path).toBe('/q');
  });

  it('null and undefined omit the parameter; 0, false and null list members behave', () => {
    const o = op('/q', [param('a', 'query'), param('b', 'query'), param('c', 'query'), param('d', 'query')]);
    expect(buildRequestParts(o, { a: null, b: 0, c: false, d: ['x', null, 'y'] }).path).toBe(
      '/q?b=0&c=false&d=x&d=y',
    );
    expect(buildRequestParts(o, {}).path).toBe('/q');
  });

  it('parameters keep the binding order, not the argument order', () => {
    const o = op('/q', [param('z', 'query'), param('a', 'query'), param('m', 'query')]);
    expect(buildRequestParts(o, { m: 3, a: 2, z: 1 }).path).toBe('/q?z=1&a=2&m=3');
  });

  it('the wire name is used, not the argument name', () => {
    const o = op('/q', [param('page_size', 'query', { name: 'page[size]' })]);
    const parts = buildRequestParts(o, { page_size: 10 });
    expect(query(parts)).toBe('page%5Bsize%5D=10');
    expect(upstreamUrl(parts).searchParams.get('page[size]')).toBe('10');
  });

  it('deepObject nests objects and repeats array members, and decodes back with brackets', () => {
    const o = op('/q', [param('filter', 'query', { style: 'deepObject', explode: true })]);
    const parts = buildRequestParts(o, { filter: { a: { b: 'x y' }, tags: ['p', 'q'], skip: null } });
    expect(query(parts)).toBe('filter%5Ba%5D%5Bb%5D=x%20y&filter%5Btags%5D=p&filter%5Btags%5D=q');
    const params = upstreamUrl(parts).searchParams;
    expect(params.get('filter[a][b]')).toBe('x y');
    expect(params.getAll('filter[tags]')).toEqual(['p', 'q']);
  });

  it('deepObject refuses a key servers would read as structure: empty, or holding [ or ]', () => {
    const o = op('/q', [param('group', 'query', { style: 'deepObject', explode: true })]);
    for (const key of ['cloud][$ne', '', '[x', 'x]']) {
      expect(argumentError(o, { group: { [key]: 'aws' } }).message).toMatch(/cannot be sent in brackets/);
    }
    // Nested keys too, and in form bodies, which share the encoding.
    expect(argumentError(o, { group: { a: { 'b]': 'x' } } }).argument).toBe('group');
    expect(query(buildRequestParts(o, { group: { 'cloud.region': 'eu' } }))).toBe(
      'group%5Bcloud.region%5D=eu',
    );
  });

  it('a `content: application/json` parameter is JSON then encoded', () => {
    const o = op('/q', [param('filter', 'query', { contentType: 'application/json' })]);
    const value = { a: 1, b: 'x y&z=1', c: [true, null] };
    const parts = buildRequestParts(o, { filter: value });
    expect(query(parts)).toBe('filter=' + encodeURIComponent(JSON.stringify(value)));
    expect(JSON.parse(upstreamUrl(parts).searchParams.get('filter')!)).toEqual(value);
    const text = op('/q', [param('s', 'query', { contentType: 'text/plain' })]);
    expect(buildRequestParts(text, { s: 'a b' }).path).toBe('/q?s=a%20b');
  });
});

describe('query values cannot add parameters or cut the URL', () => {
  const attacks = ['a&admin=true', 'x=1', 'a#frag', 'a+b', '100%', '%26admin%3Dtrue', 'a b\r\nc', 'ü&?/:@'];

  it.each(attacks)('%j without allowReserved is one parameter with the exact value', (value) => {
    const parts = buildRequestParts(op('/q', [param('q', 'query')]), { q: value });
    expect(query(parts)).toMatch(/^q=[A-Za-z0-9\-._~%]*$/);
    const url = upstreamUrl(parts);
    expect([...url.searchParams.keys()]).toEqual(['q']);
    expect(url.searchParams.get('q')).toBe(value);
    expect(url.hash).toBe('');
  });

  it.each(attacks)('%j with allowReserved is still one parameter with the exact value', (value) => {
    const parts = buildRequestParts(op('/q', [param('q', 'query', { allowReserved: true })]), { q: value });
    expect(query(parts).slice('q='.length)).not.toMatch(/[&=#+% ](?![0-9A-F]{2})|[&=#+ ]/);
    const url = upstreamUrl(parts);
    expect([...url.searchParams.keys()]).toEqual(['q']);
    expect(url.searchParams.get('q')).toBe(value);
    expect(url.hash).toBe('');
  });

  it("allowReserved keeps :/?@!$'()*,[] raw and always encodes & = # + ; % space", () => {
    const o = op('/q', [param('q', 'query', { allowReserved: true })]);
    // `;` separates pairs for Rack 2 and Python's parse_qs before 3.10: always encoded.
    expect(buildRequestParts(o, { q: ":/?@!$'()*,;[]" }).path).toBe("/q?q=:/?@!$'()*,%3B[]");
    expect(buildRequestParts(o, { q: '&=#+% ' }).path).toBe('/q?q=%26%3D%23%2B%25%20');
    // Without allowReserved every reserved character is encoded.
    const strict = op('/q', [param('q', 'query')]);
    expect(buildRequestParts(strict, { q: ":/?@!$'()*,;[]" }).path).toBe(
      '/q?q=%3A%2F%3F%40%21%24%27%28%29%2A%2C%3B%5B%5D',
    );
  });

  it('exploded object keys are names: strictly encoded even with allowReserved', () => {
    const o = op('/q', [param('f', 'query', { allowReserved: true })]);
    const parts = buildRequestParts(o, { f: { 'a&b=c#': 'v&w', 'x/y': '1/2' } });
    expect(query(parts)).toBe('a%26b%3Dc%23=v%26w&x%2Fy=1/2');
    expect([...upstreamUrl(parts).searchParams]).toEqual([
      ['a&b=c#', 'v&w'],
      ['x/y', '1/2'],
    ]);
  });

  it('a lone surrogate in a query value is an ArgumentError, not a URIError', () => {
    expect(argumentError(op('/q', [param('q', 'query')]), { q: '\udc00' }).argument).toBe('q');
  });
});

describe('header parameters (simple style)', () => {
  const table: [boolean, Kind, string][] = [
    [false, 'string', 'blue'],
    [false, 'array', 'blue,black,brown'],
    [false, 'object', 'R,100,G,200,B,150'],
    [true, 'string', 'blue'],
    [true, 'array', 'blue,black,brown'],
    [true, 'object', 'R=100,G=200,B=150'],
  ];
  it.each(table)('explode=%s %s → %s, under the lower-case name', (explode, kind, expected) => {
    const parts = buildRequestParts(op('/h', [param('color', 'header', { name: 'X-Color', explode })]), {
      color: VALUES[kind],
    });
    expect(parts.headers).toEqual({ 'x-color': expected });
    expect(parts.path).toBe('/h');
    expect(parts.cookies).toEqual([]);
  });

  it("Swagger's collectionFormat on a path or header list: ssv, pipes and tsv join with their own delimiter", () => {
    const path = op('/p/{ids}', [param('ids', 'path', { style: 'spaceDelimited' })]);
    expect(buildRequestParts(path, { ids: ['a', 'b'] }).path).toBe('/p/a%20b');
    const header = op('/h', [param('tags', 'header', { name: 'X-Tags', style: 'pipeDelimited' })]);
    expect(buildRequestParts(header, { tags: ['x', 'y,z'] }).headers).toEqual({ 'x-tags': 'x|y,z' });
    expect(argumentError(header, { tags: ['x|y'] }).message).toMatch(/an item holding "\|"/);
  });

  it('refuses separators inside what they separate: "," in a list item, "," or "=" in a map key or value', () => {
    const tags = op('/h', [param('tags', 'header', { name: 'X-Tags' })]);
    expect(argumentError(tags, { tags: ['a,b,c'] }).message).toMatch(/an item holding ","/);
    const scope = op('/h', [param('scope', 'header', { name: 'X-Scope', explode: true })]);
    expect(argumentError(scope, { scope: { role: 'viewer', note: 'x,role=admin' } }).message).toMatch(
      /a key or value holding "," or "="/,
    );
    expect(argumentError(scope, { scope: { 'a=b': 'c' } }).argument).toBe('scope');
    // A scalar is one value, separators and all.
    const one = op('/h', [param('note', 'header', { name: 'X-Note' })]);
    expect(buildRequestParts(one, { note: 'a,b=c' }).headers).toEqual({ 'x-note': 'a,b=c' });
  });

  it('numbers, booleans, HTAB and Latin-1 pass; absent values and empty lists are left out', () => {
    const o = op('/h', [
      param('a', 'header'),
      param('b', 'header'),
      param('c', 'header'),
      param('d', 'header'),
      param('e', 'header'),
    ]);
    expect(buildRequestParts(o, { a: 7, b: true, c: 'x\ty é', d: null, e: [] }).headers).toEqual({
      a: '7',
      b: 'true',
      c: 'x\ty é',
    });
  });

  const injections: [string, unknown][] = [
    ['CRLF', 'a\r\nX-Admin: true'],
    ['LF', 'a\nb'],
    ['CR', 'a\rb'],
    ['NUL', 'a\0b'],
    ['DEL', 'a\x7fb'],
    ['vertical tab', 'a\vb'],
    ['beyond Latin-1', 'a\u0100b'],
    ['CRLF in an array item', ['ok', 'x\r\ny']],
    ['CRLF in an object value', { k: 'v\r\nX-Admin: true' }],
    ['CRLF in an object key', { 'k\r\nX-Admin': 'v' }],
  ];
  it.each(injections)('%s → ArgumentError (RFC 9110 §5.5)', (_label, value) => {
    const err = argumentError(op('/h', [param('x', 'header', { name: 'X-Thing' })]), { x: value });
    expect(err.argument).toBe('x');
    expect(err.message).toMatch(/X-Thing/);
  });
});

describe('cookie parameters (form style)', () => {
  const table: [boolean, Kind, [string, string][]][] = [
    [true, 'string', [['color', 'blue']]],
    [
      true,
      'array',
      [
        ['color', 'blue'],
        ['color', 'black'],
        ['color', 'brown'],
      ],
    ],
    [
      true,
      'object',
      [
        ['R', '100'],
        ['G', '200'],
        ['B', '150'],
      ],
    ],
    [false, 'string', [['color', 'blue']]],
    [false, 'array', [['color', 'blue,black,brown']]],
    [false, 'object', [['color', 'R,100,G,200,B,150']]],
  ];
  it.each(table)('explode=%s %s', (explode, kind, expected) => {
    const parts = buildRequestParts(op('/c', [param('color', 'cookie', { explode })]), {
      color: VALUES[kind],
    });
    expect(parts.cookies).toEqual(expected);
    expect(parts.headers).toEqual({});
  });

  const injections = ['a; admin=1', 'a,b', 'a b', 'x="y"', 'a\r\nX-Admin: 1', '\\', 'é', '%3B'];
  it.each(injections)('%j cannot end the cookie or start another', (value) => {
    const parts = buildRequestParts(op('/c', [param('session', 'cookie'), param('other', 'cookie')]), {
      session: value,
      other: 'z',
    });
    const header = cookieHeader(parts.cookies);
    const crumbs = header.split('; ');
    expect(crumbs).toHaveLength(2);
    expect(crumbs[0]).toMatch(/^session=[A-Za-z0-9\-._~%]*$/);
    expect(crumbs[1]).toBe('other=z');
    expect(decodeURIComponent(crumbs[0]!.slice('session='.length))).toBe(value);
  });

  it('exploded object keys (agent-chosen cookie names) are encoded too', () => {
    const parts = buildRequestParts(op('/c', [param('prefs', 'cookie')]), { prefs: { 'a=b; c': 'd' } });
    expect(parts.cookies).toEqual([['a%3Db%3B%20c', 'd']]);
  });

  it('a wire name that is not a cookie token is encoded', () => {
    const parts = buildRequestParts(op('/c', [param('n', 'cookie', { name: 'my cookie' })]), { n: 'v' });
    expect(parts.cookies).toEqual([['my%20cookie', 'v']]);
  });
});

describe('cookieHeader', () => {
  it('joins encoded pairs with "; "', () => {
    expect(
      cookieHeader([
        ['a', '1'],
        ['b', 'x%20y'],
      ]),
    ).toBe('a=1; b=x%20y');
    expect(cookieHeader([])).toBe('');
  });

  it.each([
    ['a', 'x;y'],
    ['a', 'x\r\ny'],
    ['a', 'x\0'],
    ['a;b', 'x'],
    ['a=b', 'x'],
    ['a b', 'x'],
    ['', 'x'],
  ])('refuses %j=%j, which would split the header', (name, value) => {
    expect(() => cookieHeader([[name, value]])).toThrow(/cannot be sent/);
  });
});

describe('method, arguments and required parameters', () => {
  it('the method is upper case', () => {
    expect(buildRequestParts(op('/x', [], undefined, 'patch'), {}).method).toBe('PATCH');
  });

  it('required query, header and cookie parameters must be present', () => {
    for (const location of ['query', 'header', 'cookie'] as const) {
      const o = op('/x', [param('p', location, { required: true })]);
      const err = argumentError(o, { p: null });
      expect(err.argument).toBe('p');
      expect(err.message).toBe(`Missing required ${location} parameter p.`);
    }
  });

  it('never mutates the arguments', () => {
    const o = op(
      '/a/{id}',
      [param('id', 'path'), param('f', 'query', { style: 'deepObject' }), param('h', 'header')],
      body('multipart/form-data', { fields: ['meta', 'file'], binaryFields: ['file'] }),
      'post',
    );
    const args = { id: ['a', 'b'], f: { x: { y: [1, 2] } }, h: { k: 'v' }, meta: { n: [1] }, file: 'AAE=' };
    const copy = structuredClone(args);
    const parts = buildRequestParts(o, deepFreeze(args));
    expect(args).toEqual(copy);
    expect(parts.path).toBe('/a/a,b?f%5Bx%5D%5By%5D=1&f%5Bx%5D%5By%5D=2');
  });
});

describe('request bodies', () => {
  it('JSON, flattened: an object of the present body fields only', () => {
    const o = op(
      '/pets',
      [param('tag', 'query')],
      body('application/json', { fields: ['name', 'age', 'owner'] }),
      'post',
    );
    const parts = buildRequestParts(o, { tag: 't', name: 'Rex', owner: { id: 1 } });
    expect(parts.body?.contentType).toBe('application/json');
    expect(JSON.parse(parts.body!.bytes.toString('utf8'))).toEqual({ name: 'Rex', owner: { id: 1 } });
    expect(parts.path).toBe('/pets?tag=t');
  });

  it('JSON keeps a concrete declared media type and explicit nulls (JSON Merge Patch)', () => {
    const o = op('/p', [], body('application/merge-patch+json', { fields: ['name', 'tag'] }), 'patch');
    const parts = buildRequestParts(o, { tag: null });
    expect(parts.body?.contentType).toBe('application/merge-patch+json');
    expect(parts.body?.bytes.toString()).toBe('{"tag":null}');
    const charset = op('/p', [], wrapped('Application/JSON; charset=utf-8'), 'post');
    expect(buildRequestParts(charset, { body: 'ü' }).body).toEqual({
      contentType: 'Application/JSON; charset=utf-8',
      bytes: Buffer.from('"ü"'),
    });
  });

  it('JSON, wrapped: the one argument as it is; */* is sent as application/json', () => {
    const o = op('/p', [], wrapped('*/*', { argument: 'request_body', fields: ['request_body'] }), 'post');
    const parts = buildRequestParts(o, { request_body: [1, 'two', { three: 3 }] });
    expect(parts.body?.contentType).toBe('application/json');
    expect(JSON.parse(parts.body!.bytes.toString())).toEqual([1, 'two', { three: 3 }]);
  });

  it('a required body none of whose fields is given is {} (its schema accepts it); a wrapped one is an ArgumentError; an optional one is left out', () => {
    const required = op('/p', [], body('application/json', { fields: ['a'], required: true }), 'post');
    expect(buildRequestParts(required, {}).body).toEqual({
      contentType: 'application/json',
      bytes: Buffer.from('{}'),
    });
    const requiredForm = op(
      '/p',
      [],
      body('application/x-www-form-urlencoded', { fields: ['a'], required: true }),
      'post',
    );
    expect(buildRequestParts(requiredForm, {}).body?.bytes.toString()).toBe('');
    const requiredWrapped = op('/p', [], wrapped('text/plain', { required: true }), 'post');
    expect(argumentError(requiredWrapped, {}).argument).toBe('body');
    const optional = op('/p', [param('q', 'query')], body('application/json', { fields: ['a'] }), 'post');
    expect(buildRequestParts(optional, { q: 1 })).toEqual({
      method: 'POST',
      path: '/p?q=1',
      headers: {},
      cookies: [],
    });
  });

  it("a flattened body's minProperties and maxProperties hold on the fields sent", () => {
    const counted = op(
      '/p',
      [],
      body('application/json', { fields: ['a', 'b', 'c'], required: true, fieldCount: { min: 1, max: 2 } }),
      'patch',
    );
    expect(argumentError(counted, {}).message).toBe(
      'The request body needs at least 1 of its fields (a, b, c); 0 given.',
    );
    expect(argumentError(counted, { a: 1, b: 2, c: 3 }).message).toBe(
      'The request body takes at most 2 of its fields (a, b, c); 3 given.',
    );
    expect(buildRequestParts(counted, { b: 2 }).body?.bytes.toString()).toBe('{"b":2}');
  });

  describe('application/x-www-form-urlencoded', () => {
    const fields = ['name', 'tags', 'meta', 'count', 'flag', 'gone'];

    it('encodes primitives, repeats arrays, nests objects as a[b]=c, with %20 for spaces', () => {
      const o = op('/f', [], body('application/x-www-form-urlencoded', { fields }), 'post');
      const parts = buildRequestParts(o, {
        name: 'a b&c=d+e%',
        tags: ['x', 'y'],
        meta: { k: 'v', n: { m: 1 } },
        count: 3,
        flag: false,
        gone: null,
      });
      expect(parts.body?.contentType).toBe('application/x-www-form-urlencoded');
      const text = parts.body!.bytes.toString();
      expect(text).toBe(
        'name=a%20b%26c%3Dd%2Be%25&tags=x&tags=y&meta%5Bk%5D=v&meta%5Bn%5D%5Bm%5D=1&count=3&flag=false',
      );
      const form = new URLSearchParams(text);
      expect(form.get('name')).toBe('a b&c=d+e%');
      expect(form.getAll('tags')).toEqual(['x', 'y']);
      expect(form.get('meta[n][m]')).toBe('1');
      expect(form.has('gone')).toBe(false);
    });

    it('per-field encoding: style/explode as a query parameter, JSON contentType as JSON', () => {
      const o = op(
        '/f',
        [],
        body('application/x-www-form-urlencoded', {
          fields: ['a', 'b', 'c', 'd'],
          encoding: {
            a: { style: 'form', explode: false },
            b: { style: 'pipeDelimited' },
            c: { contentType: 'application/json' },
            d: { style: 'deepObject', explode: true },
          },
        }),
        'post',
      );
      const parts = buildRequestParts(o, { a: ['1', '2'], b: ['x', 'y'], c: { k: [1] }, d: { k: 'v' } });
      expect(parts.body!.bytes.toString()).toBe('a=1,2&b=x%7Cy&c=%7B%22k%22%3A%5B1%5D%7D&d%5Bk%5D=v');
      expect(new URLSearchParams(parts.body!.bytes.toString()).get('c')).toBe('{"k":[1]}');
    });

    it('a wrapped body must be an object', () => {
      const o = op('/f', [], wrapped('application/x-www-form-urlencoded'), 'post');
      expect(argumentError(o, { body: 'a=b' }).argument).toBe('body');
      expect(buildRequestParts(o, { body: { a: 'b' } }).body!.bytes.toString()).toBe('a=b');
    });
  });

  describe('multipart/form-data', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff]);

    it('parses back: text, JSON and file parts; base64 file bytes round-trip', async () => {
      const o = op(
        '/upload',
        [],
        body('multipart/form-data', {
          fields: ['name', 'count', 'tags', 'meta', 'photo', 'doc', 'skip'],
          binaryFields: ['photo', 'doc'],
          encoding: { photo: { contentType: 'image/png, image/jpeg' }, doc: { contentType: 'image/*' } },
        }),
        'post',
      );
      const parts = buildRequestParts(o, {
        name: 'Rex "the" dog\r\n--',
        count: 2,
        tags: ['a', 'b'],
        meta: { k: 'v' },
        photo: png.toString('base64'),
        doc: '',
        skip: null,
      });
      const ct = parts.body!.contentType;
      const boundary = /^multipart\/form-data; boundary=([A-Za-z0-9-]{1,70})$/.exec(ct)?.[1];
      expect(boundary).toBeDefined();
      expect(parts.body!.bytes.toString('latin1').split(`--${boundary}`)).toHaveLength(8);
      const form = await formData(parts.body!);
      expect([...form.keys()]).toEqual(['name', 'count', 'tags', 'meta', 'photo', 'doc']);
      expect(form.get('name')).toBe('Rex "the" dog\r\n--');
      expect(form.get('count')).toBe('2');
      expect(JSON.parse(form.get('tags') as string)).toEqual(['a', 'b']);
      expect(JSON.parse(form.get('meta') as string)).toEqual({ k: 'v' });
      expect(await file(form.get('photo'))).toEqual({ name: 'photo', type: 'image/png', bytes: png });
      expect(await file(form.get('doc'))).toEqual({
        name: 'doc',
        type: 'application/octet-stream',
        bytes: Buffer.alloc(0),
      });
    });

    it('an array of binary values is one file part per item', async () => {
      const o = op(
        '/u',
        [],
        body('multipart/form-data', { fields: ['files'], binaryFields: ['files'] }),
        'post',
      );
      const parts = buildRequestParts(o, { files: ['AAE=', 'AgME'] });
      const files = await Promise.all((await formData(parts.body!)).getAll('files').map(file));
      expect(files).toEqual([
        { name: 'files', type: 'application/octet-stream', bytes: Buffer.from([0, 1]) },
        { name: 'files', type: 'application/octet-stream', bytes: Buffer.from([2, 3, 4]) },
      ]);
    });

    it('part names with quotes, CR and LF cannot add headers or parts', async () => {
      const o = op('/u', [], wrapped('multipart/form-data'), 'post');
      const evil = 'a"; filename="x\r\nContent-Type: text/html\r\n\r\nboom';
      const parts = buildRequestParts(o, { body: { [evil]: 'v', ok: 'w' } });
      const raw = parts.body!.bytes.toString('latin1');
      expect(raw.match(/Content-Disposition/g)).toHaveLength(2);
      expect(raw).not.toContain('\r\nContent-Type');
      const form = await formData(parts.body!);
      expect([...form.entries()]).toEqual([
        [evil, 'v'],
        ['ok', 'w'],
      ]);
    });

    it('the boundary never occurs in the content (RFC 2046 §5.1.1)', () => {
      const b = body('multipart/form-data', { fields: ['text'] });
      const taken = `agent-auth-proxy-${'00'.repeat(16)}`;
      const draws = [Buffer.alloc(16, 0), Buffer.alloc(16, 0x11)];
      const encoded = encodeBody(b, { text: `x--${taken}--y` }, () => draws.shift()!);
      expect(encoded?.contentType).toBe(`multipart/form-data; boundary=agent-auth-proxy-${'11'.repeat(16)}`);
      expect(() => encodeBody(b, { text: taken }, () => Buffer.alloc(16, 0))).toThrow(/boundary/);
    });

    it('two builds use different random boundaries', () => {
      const o = op('/u', [], body('multipart/form-data', { fields: ['a'] }), 'post');
      const one = buildRequestParts(o, { a: '1' }).body!.contentType;
      const two = buildRequestParts(o, { a: '1' }).body!.contentType;
      expect(one).not.toBe(two);
    });
  });

  describe('base64 is strictly validated', () => {
    const o = op('/u', [], body('multipart/form-data', { fields: ['file'], binaryFields: ['file'] }), 'post');
    it.each([
      ['not base64!'],
      ['QUJD\n'],
      ['QU JD'],
      ['QQ'],
      ['QR=='],
      ['QUJD===='],
      ['-_8='],
      ['=QUJ'],
      [123],
      [{ a: 1 }],
    ])('%j → ArgumentError', (value) => {
      const err = argumentError(o, { file: value });
      expect(err.argument).toBe('file');
      expect(err.message).toMatch(/base64/);
    });

    it('an octet-stream body with an invalid wrapped value is rejected too', () => {
      const raw = op('/b', [], wrapped('application/octet-stream', { binaryFields: ['body'] }), 'put');
      expect(argumentError(raw, { body: 'AB$=' }).argument).toBe('body');
    });
  });

  it('octet-stream and other media: base64-decoded bytes when binary, else the string bytes', () => {
    const raw = op('/b', [], wrapped('application/octet-stream', { binaryFields: ['body'] }), 'put');
    expect(buildRequestParts(raw, { body: '/wABAg==' }).body).toEqual({
      contentType: 'application/octet-stream',
      bytes: Buffer.from([0xff, 0x00, 0x01, 0x02]),
    });
    const image = op('/b', [], wrapped('image/png', { binaryFields: ['body'] }), 'put');
    expect(buildRequestParts(image, { body: 'AAE=' }).body?.contentType).toBe('image/png');
    const anyImage = op('/b', [], wrapped('image/*', { binaryFields: ['body'] }), 'put');
    expect(buildRequestParts(anyImage, { body: 'AAE=' }).body?.contentType).toBe('application/octet-stream');
    const csv = op('/b', [], wrapped('application/csv'), 'put');
    expect(buildRequestParts(csv, { body: 'a,b\n1,2' }).body).toEqual({
      contentType: 'application/csv',
      bytes: Buffer.from('a,b\n1,2'),
    });
  });

  it('text/* and XML: the string as UTF-8; anything else is an ArgumentError', () => {
    const text = op('/t', [], wrapped('text/plain; charset=utf-8'), 'post');
    expect(buildRequestParts(text, { body: 'héllo' }).body).toEqual({
      contentType: 'text/plain; charset=utf-8',
      bytes: Buffer.from('héllo', 'utf8'),
    });
    const xml = op('/t', [], wrapped('application/xml'), 'post');
    expect(buildRequestParts(xml, { body: '<a/>' }).body?.contentType).toBe('application/xml');
    const anyText = op('/t', [], wrapped('text/*'), 'post');
    expect(buildRequestParts(anyText, { body: 'x' }).body?.contentType).toBe('text/plain; charset=utf-8');
    expect(argumentError(text, { body: 42 }).argument).toBe('body');
    expect(argumentError(xml, { body: { a: 1 } }).argument).toBe('body');
    expect(argumentError(text, { body: 'a\ud800' }).argument).toBe('body');
  });

  it('text and JSON go out in the charset their media type declares, so bytes and label agree', () => {
    const send = (mediaType: string, value: unknown) =>
      buildRequestParts(op('/t', [], wrapped(mediaType), 'post'), { body: value }).body;
    expect(send('text/plain; charset=iso-8859-1', 'café')?.bytes).toEqual(
      Buffer.from([0x63, 0x61, 0x66, 0xe9]),
    );
    expect(send('text/plain; charset="US-ASCII"', 'cafe')?.bytes).toEqual(Buffer.from('cafe'));
    expect(send('application/json; charset=utf-16le', 'é')?.bytes).toEqual(Buffer.from('"é"', 'utf16le'));
    expect(send('application/json; charset=utf-16be', 'é')?.bytes).toEqual(
      Buffer.from([0, 0x22, 0, 0xe9, 0, 0x22]),
    );
    expect(send('text/plain; charset=utf-16', 'a')?.bytes).toEqual(Buffer.from([0xff, 0xfe, 0x61, 0]));
    // Characters the charset lacks are refused, naming it; an unknown charset is relabelled UTF-8.
    expect(
      argumentError(op('/t', [], wrapped('text/plain; charset=iso-8859-1'), 'post'), { body: '€' }).message,
    ).toMatch(/ISO-8859-1 cannot carry/);
    expect(send('text/plain; charset=windows-1252; format=flowed', 'é')).toEqual({
      contentType: 'text/plain; charset=utf-8; format=flowed',
      bytes: Buffer.from('é', 'utf8'),
    });
  });
});
