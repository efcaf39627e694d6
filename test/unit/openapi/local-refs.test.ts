/** Which parsed documents may skip the bundler (local-refs.ts): only plain local pointers that resolve. */
import { describe, expect, it } from 'vitest';
import { hasOnlyPlainLocalRefs } from '../../../src/openapi/local-refs.js';

const doc = (ref: unknown): unknown => ({
  openapi: '3.0.3',
  paths: { '/a/{id}': { get: { responses: { 200: { $ref: ref } } } } },
  components: {
    responses: { Ok: { description: 'ok' } },
    schemas: { S: { properties: { $ref: { type: 'string' } } } },
  },
});

describe('hasOnlyPlainLocalRefs', () => {
  it('accepts local pointers that resolve, and a property named $ref (not a reference)', () => {
    expect(hasOnlyPlainLocalRefs(doc('#/components/responses/Ok'))).toBe(true);
    expect(hasOnlyPlainLocalRefs(doc({ type: 'object' }))).toBe(true);
  });

  it('keeps the bundler for another file, a dangling pointer and percent-encoding', () => {
    expect(hasOnlyPlainLocalRefs(doc('./responses.yaml#/Ok'))).toBe(false);
    expect(hasOnlyPlainLocalRefs(doc('#/components/responses/Missing'))).toBe(false);
    expect(hasOnlyPlainLocalRefs(doc('#/paths/~1a~1%7Bid%7D/get/responses/200'))).toBe(false);
  });
});
