/** §8.11 proof of presence: which approvals need a passkey, and what an assertion is bound to. */
import { beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors.js';
import type { Catalog } from '../../../src/openapi/catalog.js';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import { parsePolicy } from '../../../src/policy/policy.js';
import { PETSTORE } from '../../helpers/proxy.js';
import {
  approvalBinding,
  capabilitiesNeedingPresence,
  formFieldsHash,
  presenceRequired,
  type PresenceSubject,
} from '../../../src/protocol/presence.js';

const cap = (name: string, method: string | null, highRisk = false): PresenceSubject => ({
  name,
  method,
  highRisk,
});

describe('the presence rule (data_changing, the default)', () => {
  it('read-only GET and HEAD capabilities need no passkey: the weaker methods may approve them', () => {
    const reads = [cap('list_pets', 'GET'), cap('head_pet', 'HEAD')];
    expect(capabilitiesNeedingPresence(reads, 'data_changing')).toEqual([]);
    expect(presenceRequired(reads, 'data_changing')).toBe(false);
  });

  it('every other method needs one: POST, PUT, PATCH, DELETE, and methods that only look harmless', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE']) {
      expect(capabilitiesNeedingPresence([cap('x', method)], 'data_changing')).toEqual(['x']);
    }
  });

  it('a lower-case or unknown method is not taken for a read: it needs a passkey', () => {
    expect(capabilitiesNeedingPresence([cap('odd', 'get')], 'data_changing')).toEqual(['odd']);
    expect(capabilitiesNeedingPresence([cap('gone', null)], 'data_changing')).toEqual(['gone']);
  });

  it('a GET the policy marks high_risk needs one too', () => {
    const caps = [cap('list_pets', 'GET'), cap('export_customers', 'GET', true)];
    expect(capabilitiesNeedingPresence(caps, 'data_changing')).toEqual(['export_customers']);
    expect(presenceRequired(caps, 'data_changing')).toBe(true);
  });

  it('one data-changing capability among reads makes the whole approval need it', () => {
    const caps = [cap('list_pets', 'GET'), cap('create_pet', 'POST'), cap('get_pet', 'GET')];
    expect(capabilitiesNeedingPresence(caps, 'data_changing')).toEqual(['create_pet']);
    expect(presenceRequired(caps, 'data_changing')).toBe(true);
  });

  it('approving only the read-only part of a request (partial approval) needs none', () => {
    expect(presenceRequired([cap('list_pets', 'GET')], 'data_changing')).toBe(false);
  });
});

describe('the presence rule raised to always', () => {
  it('needs a passkey for read-only capabilities too', () => {
    expect(capabilitiesNeedingPresence([cap('list_pets', 'GET')], 'always')).toEqual(['list_pets']);
    expect(presenceRequired([cap('list_pets', 'GET')], 'always')).toBe(true);
  });

  it('needs one even for an approval that grants no capability (a bare registration)', () => {
    expect(presenceRequired([], 'always')).toBe(true);
    expect(presenceRequired([], 'data_changing')).toBe(false);
  });
});

describe('what an approval assertion is bound to', () => {
  const fields: [string, string][] = [
    ['csrf', 'token-1'],
    ['code', 'WDJB-MJHT'],
    ['shown', 'hash-1'],
    ['capability', 'create_pet'],
  ];

  it('does not depend on field order, the CSRF token or the WebAuthn answers themselves', () => {
    const reordered: [string, string][] = [
      ['capability', 'create_pet'],
      ['assertion', '{"id":"x"}'],
      ['shown', 'hash-1'],
      ['code', 'WDJB-MJHT'],
      ['csrf', 'token-2'],
      ['password', 'hunter2'],
    ];
    expect(approvalBinding('apr_1', 'h', reordered)).toBe(approvalBinding('apr_1', 'h', fields));
  });

  it('changes with another approval, another content hash, or any decided field added or changed', () => {
    const base = approvalBinding('apr_1', 'h', fields);
    expect(approvalBinding('apr_2', 'h', fields)).not.toBe(base);
    expect(approvalBinding('apr_1', 'h2', fields)).not.toBe(base);
    expect(approvalBinding('apr_1', 'h', [...fields, ['expires_in', '365d']])).not.toBe(base);
    expect(approvalBinding('apr_1', 'h', [...fields, ['capability', 'delete_pet']])).not.toBe(base);
    const narrowed = fields.map(([k, v]): [string, string] => [k, k === 'capability' ? 'list_pets' : v]);
    expect(approvalBinding('apr_1', 'h', narrowed)).not.toBe(base);
  });

  it('cannot be forged by moving text between a name and its value', () => {
    expect(formFieldsHash([['a', 'b=c']])).not.toBe(formFieldsHash([['a=b', 'c']]));
    expect(formFieldsHash([['a', 'b","c']])).not.toBe(
      formFieldsHash([
        ['a', 'b'],
        ['c', ''],
      ]),
    );
  });
});

describe('policy approval.require_presence', () => {
  let catalog: Catalog;
  beforeAll(async () => {
    catalog = await loadCatalog([{ spec: PETSTORE }], { allowRemoteRefs: false, allowHttp: false });
  });

  it('defaults to data_changing and accepts always', () => {
    expect(parsePolicy('{}', 'p.yaml', catalog).approval.requirePresence).toBe('data_changing');
    const always = parsePolicy('approval: {require_presence: always}', 'p.yaml', catalog);
    expect(always.approval.requirePresence).toBe('always');
  });

  it('refuses a value that would weaken it (never, read_only) with the key path named', () => {
    for (const value of ['never', 'read_only', 'false']) {
      expect(() => parsePolicy(`approval: {require_presence: ${value}}`, 'p.yaml', catalog)).toThrow(
        UserError,
      );
      expect(() => parsePolicy(`approval: {require_presence: ${value}}`, 'p.yaml', catalog)).toThrow(
        /require_presence/,
      );
    }
  });
});
