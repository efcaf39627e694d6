/** README "The upstream request": values cannot change the path, add query parameters or split headers. */
import { describe, expect, it } from 'vitest';
import type { OperationBinding, ParameterBinding } from '../../../src/openapi/types.js';
import { buildRequestParts } from '../../../src/upstream/request-parts.js';

function op(path: string, parameters: Partial<ParameterBinding>[]): OperationBinding {
  return {
    apiId: 'a',
    method: 'get',
    path,
    parameters: parameters.map((p) => ({
      argument: p.name!,
      in: 'path',
      required: false,
      style: 'simple',
      explode: false,
      allowReserved: false,
      ...p,
    })) as ParameterBinding[],
    servers: [],
    security: [],
    tags: [],
    deprecated: false,
    responseMediaTypes: [],
    success: {} as OperationBinding['success'],
    pointer: '#',
  } as unknown as OperationBinding;
}

const refused = (o: OperationBinding, args: Record<string, unknown>): boolean => {
  try {
    buildRequestParts(o, args);
    return false;
  } catch {
    return true;
  }
};

describe('path values', () => {
  it('dot segments from one value, two values, label style, lists are refused', () => {
    expect(refused(op('/f/{a}', [{ name: 'a' }]), { a: '..' })).toBe(true);
    expect(refused(op('/f/{a}{b}', [{ name: 'a' }, { name: 'b' }]), { a: '.', b: '.' })).toBe(true);
    expect(refused(op('/f/{a}', [{ name: 'a', style: 'label' }]), { a: '.' })).toBe(true);
    expect(refused(op('/f/{a}', [{ name: 'a', style: 'label', explode: true }]), { a: ['', ''] })).toBe(true);
    expect(refused(op('/f/{a}', [{ name: 'a' }]), { a: ['.'] })).toBe(true);
    expect(refused(op('/f/.{a}', [{ name: 'a' }]), { a: '.' })).toBe(true);
  });
  it('slashes, ?, #, %, backslash and encoded dots stay inside the segment', () => {
    const o = op('/f/{a}/g', [{ name: 'a' }]);
    for (const a of ['src/app.ts', 'x?y=1', 'x#y', '%2e%2e', '%2F', 'a\\b', '..;x', 'x\r\nHost: evil']) {
      const { path } = buildRequestParts(o, { a });
      expect(path.split('/'), a).toHaveLength(4);
      expect(path, a).not.toMatch(/[?#\\\r\n]/);
      expect(decodeURIComponent(path.split('/')[2]!), a).toBe(a);
    }
  });
  it('a dot segment between slashes is refused: a server that decodes %2F first would step up', () => {
    const o = op('/f/{a}/g', [{ name: 'a' }]);
    for (const a of ['../admin', 'x/../../admin', 'a/./b', '..\\x', './x', 'x/..']) {
      expect(refused(o, { a }), a).toBe(true);
    }
    for (const a of ['src/app.ts', 'a/b/c', 'v1.2/x', '.../x', 'a..b/c', '.x/y']) {
      expect(refused(o, { a }), a).toBe(false);
    }
  });
});

describe('query and header values', () => {
  it('& = # stay encoded even with allowReserved; header CR/LF refused', () => {
    const q = op('/s', [{ name: 'q', in: 'query', style: 'form', explode: true, allowReserved: true }]);
    expect(buildRequestParts(q, { q: 'a&b=c#d' }).path).toBe('/s?q=a%26b%3Dc%23d');
    const h = op('/s', [{ name: 'X-T', in: 'header' }]);
    expect(refused(h, { 'X-T': 'a\r\nX-Evil: 1' })).toBe(true);
    expect(refused(h, { 'X-T': 'a\nb' })).toBe(true);
    expect(refused(h, { 'X-T': 'a\u0000b' })).toBe(true);
    expect(refused(h, { 'X-T': { k: 'v\r\n' } })).toBe(true);
  });
});
