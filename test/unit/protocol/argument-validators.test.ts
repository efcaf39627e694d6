/**
 * Compiled argument validators within their budget (argument-validators.ts): kept and compiled
 * once while the budget holds; the next one compiled past it starts a new generation, whose
 * validators (compiled again) still validate; the warm-up compiles only what it is given and
 * stops at the budget. Engines sharing one compiler (start-up's and a reload's) share the
 * validator of a schema that did not change, and never one that did.
 */
import type { ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { Capability } from '../../../src/openapi/types.js';
import {
  CompiledValidators,
  SchemaCompiler,
  SchemaCompilers,
} from '../../../src/protocol/argument-validators.js';

/**
 * Five capabilities whose arguments have the same size: `count` an integer from 1 to 10 (a, and
 * by default b to e too, each with its own maximum, 11 to 14, so that no two schemas are alike).
 */
function capabilities(maximumOfA = 10): Capability[] {
  const op = (id: string, maximum: number) => ({
    get: {
      operationId: id,
      parameters: [
        { name: 'count', in: 'query', required: true, schema: { type: 'integer', minimum: 1, maximum } },
      ],
      responses: { '200': { description: 'ok' } },
    },
  });
  const paths = Object.fromEntries(
    ['a', 'b', 'c', 'd', 'e'].map((n, i) => [`/${n}`, op(`get_${n}`, i === 0 ? maximumOfA : 10 + i)]),
  );
  const doc = { openapi: '3.0.3', info: { title: 'T', version: '1' }, paths };
  return [...deriveCatalog([{ source: 't.yaml', doc }]).capabilities];
}

const [a, b, c, d, e] = capabilities() as [Capability, Capability, Capability, Capability, Capability];
const size = JSON.stringify(a.argumentsSchema).length;

/** A validator these small schemas get at once (compiled on this thread). */
function now(got: ValidateFunction | Promise<ValidateFunction>): ValidateFunction {
  if (typeof got !== 'function') throw new Error('expected a validator at once');
  return got;
}

/** Validators of one engine, with a compiler of its own holding `chars` of schemas. */
function validators(chars: number): CompiledValidators {
  return new CompiledValidators(new SchemaCompiler([], chars));
}

describe('CompiledValidators within a budget of schema characters', () => {
  it('keeps every validator while the budget holds, and compiles each once', () => {
    const v = validators(10 * size);
    const first = now(v.get(a));
    now(v.get(b));
    expect(v.get(a)).toBe(first);
    expect(v.kept()).toEqual(['get_a', 'get_b']);
  });

  it('the first compile past the budget starts a new generation; its validators validate', () => {
    const v = validators(3 * size);
    const firstA = now(v.get(a));
    now(v.get(b));
    now(v.get(c));
    expect(v.kept()).toEqual(['get_a', 'get_b', 'get_c']);
    expect(v.get(a)).toBe(firstA); // a hit compiles nothing and keeps the generation

    now(v.get(d)); // the budget is spent: a fresh instance, d alone in it
    expect(v.kept()).toEqual(['get_d']);
    const againA = now(v.get(a));
    expect(againA).not.toBe(firstA);
    expect(v.kept()).toEqual(['get_d', 'get_a']);
    expect(againA({ count: 3 })).toBe(true);
    expect(againA({ count: 11 })).toBe(false);
    expect(againA({})).toBe(false);
  });

  it('compiles a schema larger than the whole budget, which alone fills its generation', () => {
    const v = validators(size - 1);
    now(v.get(a));
    expect(v.kept()).toEqual(['get_a']);
    now(v.get(b));
    expect(v.kept()).toEqual(['get_b']);
  });

  it('warm-up compiles only the capabilities it is given, and stops at the budget', async () => {
    const v = validators(10 * size);
    await v.warm([b, d], new AbortController().signal);
    expect(v.kept()).toEqual(['get_b', 'get_d']);

    const w = validators(2 * size);
    await w.warm([a, b, c, d, e], new AbortController().signal);
    expect(w.kept()).toEqual(['get_a', 'get_b']);
  });

  it('warm-up stops when its signal is aborted', async () => {
    const v = validators(10 * size);
    const stop = new AbortController();
    stop.abort();
    await v.warm([a, b], stop.signal);
    expect(v.kept()).toEqual([]);
  });
});

describe('validators across a reload (engines sharing one compiler)', () => {
  it('an unchanged schema keeps its compiled validator; a changed one is compiled anew', () => {
    const compiler = new SchemaCompiler([], 10 * size);
    const before = new CompiledValidators(compiler);
    const firstA = now(before.get(a));
    const firstB = now(before.get(b));

    // The reloaded document: get_a's maximum changed from 10 to 9, get_b is as it was.
    const [a2, b2] = capabilities(9) as [Capability, Capability];
    const after = new CompiledValidators(compiler);
    expect(after.get(b2)).toBe(firstB);
    const secondA = now(after.get(a2));
    expect(secondA).not.toBe(firstA);
    expect(secondA({ count: 10 })).toBe(false);

    // A request that started before the reload still validates against its own catalog.
    expect(now(before.get(a))({ count: 10 })).toBe(true);
  });

  it('a catalog with other formats gets a compiler of its own; the same formats keep it', () => {
    const compilers = new SchemaCompilers();
    const first = compilers.for(['uuid', 'int32']);
    expect(compilers.for(['int32', 'uuid'])).toBe(first);
    expect(compilers.for(['int32'])).not.toBe(first);
  });

  it("a new generation drops every engine's kept validators with it", () => {
    const compiler = new SchemaCompiler([], 2 * size);
    const one = new CompiledValidators(compiler);
    const two = new CompiledValidators(compiler);
    now(one.get(a));
    now(two.get(b));
    expect(two.get(a)).toBe(now(one.get(a)));
    expect(two.kept()).toEqual(['get_b', 'get_a']);
    now(one.get(c)); // past the budget: a fresh generation
    expect(one.kept()).toEqual(['get_c']);
    expect(two.kept()).toEqual([]);
  });
});
