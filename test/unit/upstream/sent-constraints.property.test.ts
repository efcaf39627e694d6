/**
 * Issue 10, class 5, property: whatever arguments an agent sends, when both constraint checks pass
 * (on the arguments, and on the request as serialized), the upstream never receives a value outside
 * the grant. fast-check generates adversarial arguments (arrays, objects exploded into query keys,
 * repeated and aliased names, case and width variants, invisible characters, unicode) for
 * capabilities with constrained fields under every parameter style and body type; the real
 * serializer builds the request; an independent, deliberately lenient model of an upstream server
 * (written here, sharing no code with src/upstream/sent-values.ts) reads it back, merging names the
 * way common frameworks do and splitting lists on the style's separators, and checks every value
 * it finds under a constrained name against the grant.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BodyBinding, OperationBinding } from '../../../src/openapi/types.js';
import { type Constraints } from '../../../src/protocol/constraints.js';
import { checkConstraints, checkSentConstraints } from '../../../src/protocol/constraint-checks.js';
import {
  ArgumentError,
  buildRequestParts,
  type UpstreamRequestParts,
} from '../../../src/upstream/request-parts.js';
import { sentRequest } from '../../../src/upstream/sent-values.js';
import { body, opWith, param } from '../../helpers/bindings.js';

// ---------------------------------------------------------------------------------------------
// The grant: one field per operator kind, any subset of them constrained in a run.

const GRANT = {
  amount: { min: 0, max: 1000 },
  account: { not_in: ['admin', 'root', 5] },
  currency: { in: ['USD', 'EUR'] },
  dest: 'acc_456',
} as const satisfies Constraints;
type Field = keyof typeof GRANT;
const FIELDS = Object.keys(GRANT) as Field[];

// ---------------------------------------------------------------------------------------------
// Scenarios: where the constrained fields go, and what else can write into the request.

type Namespace = 'param' | 'header' | 'cookie';

interface Placement {
  readonly ns: Namespace;
  readonly name: string;
  /** The separators of the field's style: the upstream model splits on them. */
  readonly split: RegExp;
  /** The value is JSON text (a `content: application/json` parameter). */
  readonly jsonText?: boolean;
}

interface Scenario {
  readonly name: string;
  readonly op: OperationBinding;
  readonly placement: Readonly<Record<Field, Placement>>;
  /** Arguments other than the constrained ones, all free to carry anything. */
  readonly companions: readonly string[];
  /** Arguments always generated (path parameters: without them nothing is built). */
  readonly required?: readonly string[];
}

const operation = opWith({ apiId: 'prop', pointer: '/paths/prop' });

function flatBody(mediaType: string, fields: string[], encoding: BodyBinding['encoding'] = {}): BodyBinding {
  return body(mediaType, { fields, encoding });
}

const COMMA = /,/;
const at =
  (ns: Namespace, split: RegExp = COMMA, jsonText = false) =>
  (name: string): Placement => ({
    ns,
    name,
    split,
    ...(jsonText ? { jsonText } : {}),
  });
const inParams = (split: RegExp = COMMA): Record<Field, Placement> => ({
  amount: at('param', split)('amount'),
  account: at('param', split)('account'),
  currency: at('param', split)('currency'),
  dest: at('param', split)('dest'),
});

const FREE_QUERY = [
  param('filter', 'query'), // form, exploded: its keys become query names
  param('deep', 'query', { style: 'deepObject', explode: true }),
  param('tags', 'query', { style: 'pipeDelimited', explode: false }),
];
const FREE_QUERY_ARGS = ['filter', 'deep', 'tags'];

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'query, form style, exploded',
    op: operation('/q', [...FIELDS.map((f) => param(f, 'query')), ...FREE_QUERY]),
    placement: inParams(),
    companions: FREE_QUERY_ARGS,
  },
  {
    name: 'query, delimited and deepObject styles, not exploded',
    op: operation('/q', [
      param('amount', 'query', { explode: false }),
      param('account', 'query', { style: 'spaceDelimited', explode: false }),
      param('currency', 'query', { style: 'pipeDelimited', explode: false }),
      param('dest', 'query', { style: 'deepObject', explode: true }),
      ...FREE_QUERY,
    ]),
    placement: {
      ...inParams(),
      account: at('param', /[, ]/)('account'),
      currency: at('param', /[,|]/)('currency'),
    },
    companions: FREE_QUERY_ARGS,
  },
  {
    name: 'path, simple, label and matrix styles, with an exploded matrix object',
    op: operation('/p/{amount}/{account}/{currency}/{dest}/{m}', [
      param('amount', 'path'),
      param('account', 'path', { style: 'label' }),
      param('currency', 'path', { style: 'matrix' }),
      param('dest', 'path', { style: 'label', explode: true }),
      param('m', 'path', { style: 'matrix', explode: true }),
      ...FREE_QUERY,
    ]),
    placement: {
      ...inParams(/[,=]/),
      account: at('param', /[,.=]/)('account'),
      dest: at('param', /[,.=]/)('dest'),
    },
    companions: ['m', ...FREE_QUERY_ARGS],
    required: [...FIELDS, 'm'],
  },
  {
    name: 'headers, with aliases differing in case, - and _',
    op: operation('/h', [
      param('amount', 'header', { name: 'X-Amount' }),
      param('account', 'header', { name: 'X-Account' }),
      param('currency', 'header', { name: 'X-Currency' }),
      param('dest', 'header', { name: 'X-Dest' }),
      param('h1', 'header', { name: 'X_Amount' }),
      param('h2', 'header', { name: 'x_account' }),
      param('h3', 'header', { name: 'X-Extra', explode: true }),
      ...FREE_QUERY,
    ]),
    placement: {
      amount: at('header', /[,=]/)('X-Amount'),
      account: at('header', /[,=]/)('X-Account'),
      currency: at('header', /[,=]/)('X-Currency'),
      dest: at('header', /[,=]/)('X-Dest'),
    },
    companions: ['h1', 'h2', 'h3', ...FREE_QUERY_ARGS],
  },
  {
    name: 'cookies, with an exploded cookie object',
    op: operation('/c', [...FIELDS.map((f) => param(f, 'cookie')), param('jar', 'cookie')]),
    placement: {
      amount: at('cookie')('amount'),
      account: at('cookie')('account'),
      currency: at('cookie')('currency'),
      dest: at('cookie')('dest'),
    },
    companions: ['jar'],
  },
  {
    name: 'form body, with an exploded free-form field and a nested one',
    op: operation(
      '/f',
      FREE_QUERY,
      flatBody('application/x-www-form-urlencoded', [...FIELDS, 'extra', 'nested'], {
        extra: { style: 'form', explode: true },
      }),
    ),
    placement: inParams(),
    companions: ['extra', 'nested', ...FREE_QUERY_ARGS],
  },
  {
    name: 'multipart body, with a JSON part',
    op: operation('/m', FREE_QUERY, flatBody('multipart/form-data', [...FIELDS, 'meta'])),
    placement: inParams(),
    companions: ['meta', ...FREE_QUERY_ARGS],
  },
  {
    name: 'JSON body, flattened, next to a free-form query object',
    op: operation('/j', FREE_QUERY, flatBody('application/json', [...FIELDS, 'other'])),
    placement: inParams(),
    companions: ['other', ...FREE_QUERY_ARGS],
  },
  {
    name: 'query parameters next to a wrapped, free-form JSON body',
    op: operation('/w', [...FIELDS.map((f) => param(f, 'query')), ...FREE_QUERY], {
      ...flatBody('application/json', ['body']),
      mode: 'wrapped',
      argument: 'body',
    }),
    placement: inParams(),
    companions: ['body', ...FREE_QUERY_ARGS],
  },
  {
    name: 'query parameters with JSON content',
    op: operation('/k', [
      ...FIELDS.map((f) => param(f, 'query', { contentType: 'application/json' })),
      ...FREE_QUERY,
    ]),
    placement: {
      amount: at('param', COMMA, true)('amount'),
      account: at('param', COMMA, true)('account'),
      currency: at('param', COMMA, true)('currency'),
      dest: at('param', COMMA, true)('dest'),
    },
    companions: FREE_QUERY_ARGS,
  },
];

// ---------------------------------------------------------------------------------------------
// Adversarial arguments

const forbiddenLike = fc.constantFrom(
  'admin',
  'ADMIN',
  'Admin ',
  'ａｄｍｉｎ',
  'ad\u200bmin',
  'ad\u00admin',
  '\u202eadmin',
  'admin\ufe0f',
  'root',
  'ROOT',
  'r\u200coot',
  '5',
  '05',
  '5.0',
  '５',
  'x,admin',
  'x|admin',
  'x admin',
  'x.admin',
  'x=admin',
);
const benign = fc.constantFrom(
  'acc_1',
  'acc_456',
  'ACC_456',
  'acc_456 ',
  'USD',
  'EUR',
  'usd',
  'ＵＳＤ',
  'x',
  '',
);
const text = fc.oneof(
  { arbitrary: forbiddenLike, weight: 3 },
  { arbitrary: benign, weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }), weight: 1 },
  { arbitrary: fc.string({ maxLength: 6 }), weight: 1 },
);
const number = fc.oneof(
  fc.integer({ min: -2, max: 1002 }),
  fc.constantFrom(0, 1000, 1000.5, -0.5, 5, 1e21, 1e-7),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const scalar = fc.oneof(text, number, fc.boolean(), fc.constant(null));
/** Names that servers may read as a constrained one, and some that they should not. */
const aliasName = fc.constantFrom(
  'amount',
  'AMOUNT',
  'Amount',
  'amount[]',
  'amount[x]',
  'ａｍｏｕｎｔ',
  'am\u200bount',
  'account',
  'ACCOUNT',
  'account[]',
  'currency',
  'Currency',
  'dest',
  'DEST',
  'dest[0]',
  'x',
  'y',
);
const shaped = fc.oneof(
  { arbitrary: scalar, weight: 3 },
  { arbitrary: fc.array(scalar, { maxLength: 3 }), weight: 1 },
  { arbitrary: fc.dictionary(aliasName, scalar, { maxKeys: 3 }), weight: 2 },
);
const FIELD_VALUE: Record<Field, fc.Arbitrary<unknown>> = {
  amount: fc.oneof({ arbitrary: number, weight: 4 }, { arbitrary: shaped, weight: 1 }),
  account: fc.oneof({ arbitrary: text, weight: 4 }, { arbitrary: shaped, weight: 1 }),
  currency: fc.oneof(
    { arbitrary: fc.constantFrom('USD', 'EUR'), weight: 3 },
    { arbitrary: shaped, weight: 1 },
  ),
  dest: fc.oneof({ arbitrary: fc.constant('acc_456'), weight: 3 }, { arbitrary: shaped, weight: 1 }),
};

function argsFor(scenario: Scenario): fc.Arbitrary<Record<string, unknown>> {
  const fields = Object.fromEntries(FIELDS.map((f) => [f, FIELD_VALUE[f]]));
  const companions = Object.fromEntries(
    scenario.companions.map((c) => [
      c,
      fc.oneof(
        { arbitrary: fc.dictionary(aliasName, scalar, { maxKeys: 3 }), weight: 3 },
        { arbitrary: shaped, weight: 1 },
      ),
    ]),
  );
  return fc.record({ ...fields, ...companions }, { requiredKeys: [...(scenario.required ?? [])] });
}

const constraintsArb: fc.Arbitrary<Constraints> = fc
  .subarray(FIELDS, { minLength: 1 })
  .map((fields) => Object.fromEntries(fields.map((f) => [f, GRANT[f]])));

// ---------------------------------------------------------------------------------------------
// The upstream model: reads the request back as a lenient server would.

interface Received {
  readonly ns: Namespace;
  readonly name: string;
  readonly value: { readonly text: string } | { readonly json: unknown };
}

// Alternatives, not one class: a class holding combining characters reads as misleading.
const INVISIBLE =
  /\u00ad|\u034f|[\u200b-\u200f]|[\u202a-\u202e]|[\u2060-\u2064]|[\u2066-\u206f]|[\ufe00-\ufe0f]|\ufeff/gu;
const norm = (s: string): string => s.normalize('NFKC').replace(INVISIBLE, '').toLowerCase().trim();

/** Names a lenient framework would treat as one: case, width, `[…]` suffix, `.`/space as `_`. */
function serverKey(ns: Namespace, name: string): string {
  if (ns === 'header') return name.toLowerCase().replace(/_/g, '-');
  if (ns === 'cookie') return name.toLowerCase();
  const base = name.includes('[') && !name.startsWith('[') ? name.slice(0, name.indexOf('[')) : name;
  return norm(base).replace(/[. ]/g, '_');
}

const decode = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

function receivedBy(op: OperationBinding, parts: UpstreamRequestParts): Received[] {
  const out: Received[] = [];
  const q = parts.path.indexOf('?');
  const path = q === -1 ? parts.path : parts.path.slice(0, q);
  for (const [name, text] of new URLSearchParams(q === -1 ? '' : parts.path.slice(q + 1))) {
    out.push({ ns: 'param', name, value: { text } });
  }
  const segments = path.split('/');
  op.path.split('/').forEach((template, i) => {
    const m = /^\{(.+)\}$/.exec(template);
    const p = m ? op.parameters.find((x) => x.in === 'path' && x.name === m[1]) : undefined;
    const segment = segments[i] ?? '';
    if (!p) return;
    if (p.style === 'matrix') {
      for (const chunk of segment.split(';').slice(1)) {
        const [name = '', text = ''] = chunk.split('=');
        out.push({ ns: 'param', name: decode(name), value: { text: decode(text) } });
      }
    } else {
      out.push({
        ns: 'param',
        name: p.name,
        value: { text: decode(p.style === 'label' ? segment.slice(1) : segment) },
      });
    }
  });
  for (const [name, text] of Object.entries(parts.headers)) out.push({ ns: 'header', name, value: { text } });
  for (const [name, text] of parts.cookies)
    out.push({ ns: 'cookie', name: decode(name), value: { text: decode(text) } });
  if (parts.body) {
    const type = parts.body.contentType.split(';')[0]!.trim();
    if (type === 'application/json') {
      const value: unknown = JSON.parse(parts.body.bytes.toString('utf8'));
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        for (const [name, json] of Object.entries(value)) out.push({ ns: 'param', name, value: { json } });
      }
    } else if (type === 'application/x-www-form-urlencoded') {
      for (const [name, text] of new URLSearchParams(parts.body.bytes.toString('latin1'))) {
        out.push({ ns: 'param', name, value: { text } });
      }
    } else if (type === 'multipart/form-data') {
      out.push(...multipartFields(parts.body.contentType, parts.body.bytes.toString('utf8')));
    }
  }
  return out;
}

function multipartFields(contentType: string, body: string): Received[] {
  const boundary = /boundary=([^;]+)/.exec(contentType)![1]!;
  return body
    .split(`--${boundary}`)
    .slice(1, -1)
    .map((part) => {
      const [head = '', ...rest] = part.slice(2).split('\r\n\r\n');
      const content = rest.join('\r\n\r\n').slice(0, -2);
      const name = /name="([^"]*)"/.exec(head)?.[1] ?? '';
      const json = /content-type: *application\/json/i.test(head);
      return {
        ns: 'param' as const,
        name,
        value: json ? { json: JSON.parse(content) as unknown } : { text: content },
      };
    });
}

// ---------------------------------------------------------------------------------------------
// What the grant allows, as the model reads values

const NUMERIC = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i;

function forbiddenAccount(value: unknown): boolean {
  if (typeof value === 'number') return value === 5;
  if (typeof value === 'string') {
    const n = norm(value);
    return n === 'admin' || n === 'root' || (NUMERIC.test(n) && Number(n) === 5);
  }
  return Array.isArray(value) && value.some(forbiddenAccount);
}

/** Why the received value is outside the grant for `field`, or undefined when it is inside. */
function outside(field: Field, placement: Placement, received: Received['value']): string | undefined {
  let value: unknown;
  if ('json' in received) value = received.json;
  else if (placement.jsonText) value = JSON.parse(received.text);
  if (value === undefined && 'text' in received) {
    const text = received.text;
    const pieces = [text, ...text.split(placement.split)];
    switch (field) {
      case 'amount': {
        const n = Number(text);
        return text.trim() === text && text !== '' && n >= 0 && n <= 1000 && parseFloat(text) === n
          ? undefined
          : `amount ${JSON.stringify(text)}`;
      }
      case 'account':
        return pieces.some(forbiddenAccount) ? `account ${JSON.stringify(text)}` : undefined;
      case 'currency':
        return text === 'USD' || text === 'EUR' ? undefined : `currency ${JSON.stringify(text)}`;
      case 'dest':
        return text === 'acc_456' ? undefined : `dest ${JSON.stringify(text)}`;
    }
  }
  switch (field) {
    case 'amount':
      return typeof value === 'number' && value >= 0 && value <= 1000
        ? undefined
        : `amount ${JSON.stringify(value)}`;
    case 'account':
      return forbiddenAccount(value) ? `account ${JSON.stringify(value)}` : undefined;
    case 'currency':
      return value === 'USD' || value === 'EUR' ? undefined : `currency ${JSON.stringify(value)}`;
    case 'dest':
      return value === 'acc_456' ? undefined : `dest ${JSON.stringify(value)}`;
  }
}

// ---------------------------------------------------------------------------------------------

type Outcome = 'invalid' | 'refused_on_arguments' | 'refused_as_sent' | 'sent';

/** Runs one execution through the real checks and serializer; asserts the property when it is sent. */
function execute(scenario: Scenario, constraints: Constraints, args: Record<string, unknown>): Outcome {
  if (checkConstraints(constraints, args).length > 0) return 'refused_on_arguments';
  let parts: UpstreamRequestParts;
  try {
    parts = buildRequestParts(scenario.op, args);
  } catch (err) {
    if (err instanceof ArgumentError) return 'invalid';
    throw err;
  }
  const sent = sentRequest(scenario.op, args, parts);
  if (checkSentConstraints(constraints, (f) => sent.field(f)).length > 0) return 'refused_as_sent';
  const received = receivedBy(scenario.op, parts);
  for (const field of Object.keys(constraints) as Field[]) {
    const placement = scenario.placement[field];
    const key = serverKey(placement.ns, placement.name);
    const values = received.filter((r) => r.ns === placement.ns && serverKey(r.ns, r.name) === key);
    // A constrained field always arrives (a missing one is refused): the check above is not vacuous.
    expect(values.length).toBeGreaterThan(0);
    for (const r of values) {
      const why = outside(field, placement, r.value);
      if (why !== undefined) {
        throw new Error(`the upstream received ${why} under ${r.name} (${placement.ns}), outside the grant`);
      }
    }
  }
  return 'sent';
}

describe('constraints hold for what the upstream receives (fast-check, every style)', () => {
  for (const scenario of SCENARIOS) {
    it(`no generated arguments smuggle a value outside the grant: ${scenario.name}`, () => {
      const seen: Record<Outcome, number> = {
        invalid: 0,
        refused_on_arguments: 0,
        refused_as_sent: 0,
        sent: 0,
      };
      fc.assert(
        fc.property(constraintsArb, argsFor(scenario), (constraints, args) => {
          seen[execute(scenario, constraints, args)]++;
        }),
        { numRuns: 600, seed: 0x5e17 },
      );
      // Both outcomes must be exercised, or the property would hold vacuously.
      expect(seen.sent).toBeGreaterThan(30);
      expect(seen.refused_as_sent).toBeGreaterThan(10);
    });
  }
});
