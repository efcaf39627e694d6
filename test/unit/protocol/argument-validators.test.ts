/**
 * Compiled argument validators within their budget (argument-validators.ts): kept and compiled
 * once while the budget holds; the next one compiled past it starts a new generation, whose
 * validators (compiled again) still validate; the warm-up compiles only what it is given and
 * stops at the budget.
 */
import { describe, expect, it } from 'vitest';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { Capability } from '../../../src/openapi/types.js';
import { CompiledValidators } from '../../../src/protocol/argument-validators.js';

/** Five capabilities with the same shape of arguments: `count` an integer 1–10. */
function capabilities(): Capability[] {
  const op = (id: string) => ({
    get: {
      operationId: id,
      parameters: [
        { name: 'count', in: 'query', required: true, schema: { type: 'integer', minimum: 1, maximum: 10 } },
      ],
      responses: { '200': { description: 'ok' } },
    },
  });
  const paths = Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((n) => [`/${n}`, op(`get_${n}`)]));
  const doc = { openapi: '3.0.3', info: { title: 'T', version: '1' }, paths };
  return [...deriveCatalog([{ source: 't.yaml', doc }]).capabilities];
}

const [a, b, c, d, e] = capabilities() as [Capability, Capability, Capability, Capability, Capability];
const size = JSON.stringify(a.argumentsSchema).length;

describe('CompiledValidators within a budget of schema characters', () => {
  it('keeps every validator while the budget holds, and compiles each once', () => {
    const v = new CompiledValidators([], 10 * size);
    const first = v.get(a);
    v.get(b);
    expect(v.get(a)).toBe(first);
    expect(v.kept()).toEqual(['get_a', 'get_b']);
  });

  it('the first compile past the budget starts a new generation; its validators validate', () => {
    const v = new CompiledValidators([], 3 * size);
    const firstA = v.get(a);
    v.get(b);
    v.get(c);
    expect(v.kept()).toEqual(['get_a', 'get_b', 'get_c']);
    expect(v.get(a)).toBe(firstA); // a hit compiles nothing and keeps the generation

    v.get(d); // the budget is spent: a fresh instance, d alone in it
    expect(v.kept()).toEqual(['get_d']);
    const againA = v.get(a);
    expect(againA).not.toBe(firstA);
    expect(v.kept()).toEqual(['get_d', 'get_a']);
    expect(againA({ count: 3 })).toBe(true);
    expect(againA({ count: 11 })).toBe(false);
    expect(againA({})).toBe(false);
  });

  it('compiles a schema larger than the whole budget, which alone fills its generation', () => {
    const v = new CompiledValidators([], size - 1);
    v.get(a);
    expect(v.kept()).toEqual(['get_a']);
    v.get(b);
    expect(v.kept()).toEqual(['get_b']);
  });

  it('warm-up compiles only the capabilities it is given, and stops at the budget', async () => {
    const v = new CompiledValidators([], 10 * size);
    await v.warm([b, d], new AbortController().signal);
    expect(v.kept()).toEqual(['get_b', 'get_d']);

    const w = new CompiledValidators([], 2 * size);
    await w.warm([a, b, c, d, e], new AbortController().signal);
    expect(w.kept()).toEqual(['get_a', 'get_b']);
  });

  it('warm-up stops when its signal is aborted', async () => {
    const v = new CompiledValidators([], 10 * size);
    const stop = new AbortController();
    stop.abort();
    await v.warm([a, b], stop.signal);
    expect(v.kept()).toEqual([]);
  });
});
