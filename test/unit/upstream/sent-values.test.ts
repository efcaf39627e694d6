/**
 * Issue 10, class 5: what the upstream actually receives for a constrained field, read back from
 * the request the real serializer builds (src/upstream/sent-values.ts), and the check over it
 * (checkSentConstraints). Each smuggling shape sends a value under a constrained name that the
 * argument check never saw; each must show up as `foreign`, naming the argument that sent it.
 */
import { describe, expect, it } from 'vitest';
import type { OperationBinding } from '../../../src/openapi/types.js';
import { type Constraints } from '../../../src/protocol/constraints.js';
import { checkConstraints, checkSentConstraints } from '../../../src/protocol/constraint-checks.js';
import { buildRequestParts } from '../../../src/upstream/request-parts.js';
import { sentRequest, type SentField } from '../../../src/upstream/sent-values.js';
import { body, op, param } from '../../helpers/bindings.js';

function sent(operation: OperationBinding, args: Record<string, unknown>, field: string): SentField {
  return sentRequest(operation, args, buildRequestParts(operation, args)).field(field);
}

/** The arguments pass the argument check; what is sent does not. */
function refusedOnlyWhenSent(
  operation: OperationBinding,
  constraints: Constraints,
  args: Record<string, unknown>,
): ReturnType<typeof checkSentConstraints> {
  expect(checkConstraints(constraints, args)).toEqual([]);
  const request = sentRequest(operation, args, buildRequestParts(operation, args));
  return checkSentConstraints(constraints, (f) => request.field(f));
}

const FILTER = param('filter', 'query'); // a free-form object, exploded (form): keys become query names

describe('sent values: a constrained name sent by another argument is foreign', () => {
  const payments = op('/payments', [param('amount', 'query'), FILTER]);

  it('refuses an exploded free-form object that repeats the constrained query key (amount=5000)', () => {
    const violations = refusedOnlyWhenSent(
      payments,
      { amount: { max: 1000 } },
      { amount: 5, filter: { amount: 5000 } },
    );
    expect(violations).toEqual([
      {
        field: 'amount',
        constraint: { max: 1000 },
        actual: '5000',
        sent: { in: 'query', name: 'amount', by: 'filter' },
      },
    ]);
  });

  it('refuses it even when the smuggled value is within the grant: only the field may speak for itself', () => {
    expect(sent(payments, { amount: 5, filter: { amount: 1000 } }, 'amount').foreign).toHaveLength(1);
  });

  for (const alias of [
    'AMOUNT',
    'Amount',
    'amount[]',
    'amount[0]',
    'ａｍｏｕｎｔ',
    'am\u200bount',
    ' amount',
  ]) {
    it(`refuses the alias ${JSON.stringify(alias)} that servers read as amount`, () => {
      const field = sent(payments, { amount: 5, filter: { [alias]: 5000 } }, 'amount');
      expect(field.foreign).toMatchObject([{ in: 'query', name: alias, text: '5000', by: 'filter' }]);
    });
  }

  it('refuses PHP-style name mangling: am.ount and "am ount" are read as am_ount', () => {
    const o = op('/x', [param('am_ount', 'query'), FILTER]);
    expect(sent(o, { am_ount: 1, filter: { 'am.ount': 2, 'am ount': 3 } }, 'am_ount').foreign).toHaveLength(
      2,
    );
  });

  it('names who sent each of many smuggled values in one pass over the arguments, not one per value', () => {
    const filter: Record<string, number> = {};
    for (let i = 0; i < 2000; i++) filter[`amount[${i}]`] = 5000;
    let filterReads = 0;
    // Each read of `filter` serializes its 2,000 keys: asked once per refused value, that was quadratic.
    const args = new Proxy<Record<string, unknown>>(
      { amount: 5, filter },
      {
        get(target, key) {
          if (key === 'filter') filterReads += 1;
          return Reflect.get(target, key) as unknown;
        },
      },
    );
    const field = sentRequest(payments, args, buildRequestParts(payments, { amount: 5, filter })).field(
      'amount',
    );
    expect(field.foreign).toHaveLength(2000);
    expect(field.foreign.every((f) => f.by === 'filter')).toBe(true);
    expect(filterReads).toBeLessThan(10);
  });

  it('does not count a deepObject member (filter[amount]) or another word as the field', () => {
    const o = op('/x', [
      param('amount', 'query'),
      param('opts', 'query', { style: 'deepObject', explode: true }),
      FILTER,
    ]);
    const field = sent(o, { amount: 5, opts: { amount: 5000 }, filter: { amounts: 1, mount: 2 } }, 'amount');
    expect(field).toEqual({
      own: [{ in: 'query', name: 'amount', text: '5', separators: [','] }],
      named: true,
      foreign: [],
    });
  });

  it('refuses a path parameter smuggled through the query (frameworks merge path and query)', () => {
    const o = op('/accounts/{account}', [param('account', 'path'), FILTER]);
    expect(sent(o, { account: 'acc_1', filter: { account: 'admin' } }, 'account').foreign).toMatchObject([
      { in: 'query', name: 'account', text: 'admin', by: 'filter' },
    ]);
  });

  it('refuses a name set by an exploded matrix object in the path', () => {
    const o = op('/ledger/{entry}', [
      param('entry', 'path', { style: 'matrix', explode: true }),
      param('amount', 'query'),
    ]);
    expect(sent(o, { entry: { id: 'e1', amount: 5000 }, amount: 5 }, 'amount').foreign).toMatchObject([
      { in: 'path', name: 'amount', text: '5000', by: 'entry' },
    ]);
  });

  it('refuses a header alias that differs only in case, - or _ (X_Account for X-Account)', () => {
    const o = op('/h', [param('X-Account', 'header'), param('X_ACCOUNT', 'header')]);
    expect(sent(o, { 'X-Account': 'acc_1', X_ACCOUNT: 'admin' }, 'X-Account').foreign).toMatchObject([
      { in: 'header', name: 'x_account', text: 'admin', by: 'X_ACCOUNT' },
    ]);
  });

  it('refuses a cookie of the same name from an exploded cookie object (sent first, read first)', () => {
    const o = op('/c', [param('prefs', 'cookie'), param('region', 'cookie')]);
    expect(sent(o, { prefs: { Region: 'us' }, region: 'eu' }, 'region').foreign).toMatchObject([
      { in: 'cookie', name: 'Region', text: 'us', by: 'prefs' },
    ]);
  });

  it('refuses a form body field repeated by an exploded free-form field', () => {
    const form = body('application/x-www-form-urlencoded', {
      fields: ['amount', 'extra'],
      encoding: { extra: { style: 'form', explode: true } },
    });
    const o = op('/forms', [], form);
    expect(sent(o, { amount: 5, extra: { amount: 5000 } }, 'amount').foreign).toMatchObject([
      { in: 'body', name: 'amount', text: '5000', by: 'extra' },
    ]);
  });

  it('refuses a query parameter repeated as a key of a wrapped JSON body (Rails merges them)', () => {
    const json = body('application/json', { mode: 'wrapped', argument: 'body', fields: ['body'] });
    const o = op('/transfers', [param('amount', 'query')], json);
    expect(
      sent(o, { amount: 5, body: { amount: 5000, nested: { amount: 1 } } }, 'amount').foreign,
    ).toMatchObject([{ in: 'body', name: 'amount', text: '5000', json: { value: 5000 }, by: 'body' }]);
  });

  it('refuses a multipart part of the same name from a wrapped multipart body', () => {
    const multipart = body('multipart/form-data', { mode: 'wrapped', argument: 'body', fields: ['body'] });
    const o = op('/upload', [param('amount', 'query')], multipart);
    expect(sent(o, { amount: 5, body: { AMOUNT: 5000 } }, 'amount').foreign).toMatchObject([
      { in: 'body', name: 'AMOUNT', text: '5000', by: 'body' },
    ]);
  });

  it('throws for an argument that sends under a pinned name: the agent cannot override a pin', () => {
    const o = op('/x', [param('owner', 'query'), FILTER]);
    const args = { owner: 'alice', filter: { OWNER: 'bob' } };
    expect(() => sentRequest(o, args, buildRequestParts(o, args), ['owner'])).toThrow(
      /filter would send "OWNER"/,
    );
    const fine = { owner: 'alice', filter: { status: 'open' } };
    expect(() => sentRequest(o, fine, buildRequestParts(o, fine), ['owner'])).not.toThrow();
  });

  it('refuses a pinned argument that sends under the constrained name', () => {
    const o = op('/x', [param('amount', 'query'), param('Amount', 'query')]);
    // The executor adds pins to the arguments before building; they are checked like the rest.
    expect(sent(o, { amount: 5, Amount: 99 }, 'amount').foreign).toMatchObject([{ by: 'Amount' }]);
  });
});

describe('sent values: the field’s own values, decoded as the upstream reads them', () => {
  it('an exploded array repeats the key: each repetition is a value of the field', () => {
    const o = op('/x', [param('account', 'query')]);
    expect(sent(o, { account: ['acc_1', 'admin'] }, 'account').own.map((v) => v.text)).toEqual([
      'acc_1',
      'admin',
    ]);
  });

  it('delimited styles keep their separator, so a list-reading upstream split is checked', () => {
    const o = op('/x', [
      param('a', 'query', { style: 'pipeDelimited', explode: false }),
      param('b', 'query', { style: 'spaceDelimited', explode: false }),
      param('c', 'path', { style: 'label' }),
      param('d', 'path', { style: 'matrix' }),
      param('e', 'header'),
    ]);
    const args = {
      a: ['x', 'admin'],
      b: ['x', 'admin'],
      c: ['x', 'admin'],
      d: ['x', 'admin'],
      e: { k: 'admin' },
    };
    const operation = { ...o, path: '/x/{c}/{d}' };
    expect(sent(operation, args, 'a').own).toEqual([
      { in: 'query', name: 'a', text: 'x|admin', separators: [',', '|'] },
    ]);
    expect(sent(operation, args, 'b').own).toEqual([
      { in: 'query', name: 'b', text: 'x admin', separators: [',', ' '] },
    ]);
    expect(sent(operation, args, 'c').own).toEqual([
      { in: 'path', name: 'c', text: 'x,admin', separators: [',', '.', '='] },
    ]);
    expect(sent(operation, args, 'd').own).toEqual([
      { in: 'path', name: 'd', text: 'x,admin', separators: [',', '='] },
    ]);
    expect(sent(operation, args, 'e').own).toEqual([
      { in: 'header', name: 'e', text: 'k,admin', separators: [',', '='] },
    ]);
  });

  it('refuses not_in values that arrive as list elements, pieces or JSON array members', () => {
    const c: Constraints = { account: { not_in: ['admin'] } };
    const query = op('/x', [param('account', 'query')]);
    const csv = op('/x', [param('account', 'query', { explode: false })]);
    const json = op('/x', [], body('application/json', { fields: ['account'] }));
    const content = op('/x', [param('account', 'query', { contentType: 'application/json' })]);
    for (const o of [query, csv, json, content]) {
      expect(refusedOnlyWhenSent(o, c, { account: ['acc_1', 'ADMIN'] })).toHaveLength(1);
    }
    expect(refusedOnlyWhenSent(query, c, { account: { x: 'admin' } })).toHaveLength(1);
  });

  it('refuses a constrained field that reaches the upstream only as other names or not at all', () => {
    const c: Constraints = { account: { not_in: ['admin'] } };
    const query = op('/x', [param('account', 'query')]);
    for (const account of [{}, [], null, { owner: 'acc_1' }]) {
      expect(refusedOnlyWhenSent(query, c, { account })).toEqual([
        { field: 'account', constraint: c.account, actual: null },
      ]);
    }
    // An approved object value is sent as its keys when exploded: that is the approved request.
    const objects: Constraints = { account: { in: [{ owner: 'acc_1' }] } };
    expect(refusedOnlyWhenSent(query, objects, { account: { owner: 'acc_1' } })).toEqual([]);
  });

  it('JSON bodies and JSON content keep their types: 5 is a number, "5" is text', () => {
    const json = op('/x', [], body('application/json', { fields: ['amount'] }));
    expect(sent(json, { amount: 5 }, 'amount').own).toEqual([
      { in: 'body', name: 'amount', text: '5', json: { value: 5 }, separators: [','] },
    ]);
    const c: Constraints = { amount: { max: 1000 } };
    const request = sentRequest(json, { amount: 5 }, buildRequestParts(json, { amount: 5 }));
    expect(checkSentConstraints(c, (f) => request.field(f))).toEqual([]);
  });

  /** The field `f` sent once, as `text` in the query. */
  const own = (text: string): SentField => ({
    own: [{ in: 'query', name: 'f', text, separators: [','] }],
    named: true,
    foreign: [],
  });

  it('min/max need a plain number in the sent text; exact values and in-lists need its exact text', () => {
    expect(checkSentConstraints({ f: { min: 0, max: 10 } }, () => own('5'))).toEqual([]);
    for (const text of ['0x5', ' 5', '5abc', '', '+5', '5.', 'Infinity']) {
      expect(checkSentConstraints({ f: { min: 0, max: 10 } }, () => own(text)).length).toBeGreaterThan(0);
    }
    expect(checkSentConstraints({ f: 'acc_456' }, () => own('acc_456'))).toEqual([]);
    expect(checkSentConstraints({ f: 'acc_456' }, () => own('ACC_456'))).toHaveLength(1);
    expect(checkSentConstraints({ f: { in: ['USD', 7] } }, () => own('7'))).toEqual([]);
    expect(checkSentConstraints({ f: { in: ['USD', 7] } }, () => own('usd'))).toHaveLength(1);
  });

  it('min alone bounds the sent number', () => {
    expect(checkSentConstraints({ f: { min: 10 } }, () => own('50'))).toEqual([]);
    expect(checkSentConstraints({ f: { min: 10 } }, () => own('5'))).toEqual([
      { field: 'f', constraint: { min: 10 }, actual: '5', sent: { in: 'query', name: 'f' } },
    ]);
    for (const text of ['0x10', ' 50', '50abc', '']) {
      expect(
        checkSentConstraints({ f: { min: 10 } }, () => own(text)),
        text,
      ).toHaveLength(1);
    }
  });

  // Number(' 16'), Number('+16') and Number('0x10') are 16, but a server parsing the text need not
  // read them so (§2.13: the constraint holds for what is sent).
  it('an exact number matches only its JSON number text', () => {
    expect(checkSentConstraints({ f: 16 }, () => own('16'))).toEqual([]);
    for (const text of ['0x10', ' 16', '16 ', '+16', '016']) {
      expect(
        checkSentConstraints({ f: 16 }, () => own(text)),
        text,
      ).toHaveLength(1);
    }
  });

  it('costs nothing for a field that is not asked for (grants without constraints)', () => {
    const o = op('/x', [param('amount', 'query'), FILTER]);
    const request = sentRequest(
      o,
      { amount: 5, filter: { amount: 1 } },
      buildRequestParts(o, { amount: 5, filter: { amount: 1 } }),
    );
    expect(checkSentConstraints(undefined, (f) => request.field(f))).toEqual([]);
  });
});
