/**
 * Issue #14: what agents are shown of a capability stays within 256 KiB of input and output
 * schemas. Past that, the components farthest from the operation are summarized (title,
 * description, type), the nearest kept whole, and the schema stays self-contained.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ADVERTISED_SCHEMA_MAX_CHARS,
  advertisedSchemas,
  SUMMARIZED,
} from '../../../src/openapi/advertised-schemas.js';
import { defRef, localRefNames } from '../../../src/openapi/local-ref.js';
import type { Capability, JsonSchema } from '../../../src/openapi/types.js';

const chars = (schema: unknown): number => (schema === undefined ? 0 : JSON.stringify(schema).length);

function capability(input: JsonSchema | undefined, output: JsonSchema | undefined): Capability {
  return {
    name: 'big_one',
    description: 'A big one.',
    ...(input ? { input } : {}),
    ...(output ? { output } : {}),
    argumentsSchema: input ?? { type: 'object' },
    operation: {} as Capability['operation'],
  };
}

/** A component with a field of about `size` characters of description, referring to `next`. */
function component(name: string, size: number, next: readonly string[] = []): JsonSchema {
  return {
    title: name,
    description: `The ${name}.`,
    type: 'object',
    properties: {
      notes: { type: 'string', description: 'n'.repeat(size) },
      ...Object.fromEntries(next.map((n) => [n.toLowerCase(), { $ref: defRef(n) }])),
    },
  };
}

/** Every `$ref` inside `schema` names one of its own `$defs`. */
function selfContained(schema: JsonSchema): void {
  const defs = (schema.$defs ?? {}) as Record<string, unknown>;
  const { $defs: _defs, ...root } = schema;
  for (const node of [root, ...Object.values(defs)])
    for (const name of localRefNames(node)) expect(Object.keys(defs)).toContain(name);
}

const isSummary = (def: unknown): boolean => (def as JsonSchema).$comment === SUMMARIZED;

describe('advertisedSchemas', () => {
  it('returns the schemas themselves when they fit', () => {
    const input = { type: 'object', properties: { id: { type: 'string' } } };
    const output = { $ref: defRef('Pet'), $defs: { Pet: component('Pet', 1000) } };
    const shown = advertisedSchemas(capability(input, output));
    expect(shown.input).toBe(input);
    expect(shown.output).toBe(output);
    expect(advertisedSchemas(capability(undefined, undefined))).toEqual({});
  });

  it('keeps the components nearest the root whole, summarizes the next, leaves out what only those reach', () => {
    // Root → A → B → C → D, 100 KiB each: only A and B fit with the input; C is summarized, and
    // D, which only C refers to, is left out (a summary has no fields, so no references).
    const output: JsonSchema = {
      type: 'object',
      properties: { a: { $ref: defRef('A') } },
      $defs: {
        D: component('D', 100_000),
        C: component('C', 100_000, ['D']),
        B: component('B', 100_000, ['C']),
        A: component('A', 100_000, ['B', 'A']),
      },
    };
    const input = { type: 'object', properties: { id: { type: 'string', description: 'Its id.' } } };
    const shown = advertisedSchemas(capability(input, output));
    expect(shown.input).toBe(input);
    const defs = shown.output!.$defs as Record<string, JsonSchema>;
    expect(defs.A).toBe((output.$defs as Record<string, unknown>).A);
    expect(defs.B).toBe((output.$defs as Record<string, unknown>).B);
    expect(defs.C).toEqual({ title: 'C', description: 'The C.', type: 'object', $comment: SUMMARIZED });
    // Order of $defs and the root's own keys are as they were; the root says what happened.
    expect(Object.keys(defs)).toEqual(['C', 'B', 'A']);
    expect(shown.output!.properties).toBe(output.properties);
    expect(shown.output!.$comment).toMatch(
      /^2 of the 4 components this schema reaches are shown whole and 1 summarized .* The proxy checks arguments against the full schema\.$/,
    );
    expect(chars(shown.input) + chars(shown.output)).toBeLessThanOrEqual(ADVERTISED_SCHEMA_MAX_CHARS);
    selfContained(shown.output!);
    // The capability itself is untouched: execution and the §2.12 version read the full schemas.
    expect(Object.keys(output.$defs as object)).toHaveLength(4);
    expect(isSummary((output.$defs as Record<string, unknown>).D)).toBe(false);
  });

  it('gives a small schema all it needs and the other the rest; two large ones half each', () => {
    const big = (prefix: string): JsonSchema => ({
      $ref: defRef(`${prefix}0`),
      $defs: Object.fromEntries(
        Array.from({ length: 8 }, (_, i) => [
          `${prefix}${i}`,
          component(`${prefix}${i}`, 40_000, i < 7 ? [`${prefix}${i + 1}`] : []),
        ]),
      ),
    });
    const half = ADVERTISED_SCHEMA_MAX_CHARS / 2;
    const both = advertisedSchemas(capability(big('In'), big('Out')));
    expect(chars(both.input)).toBeLessThanOrEqual(half);
    expect(chars(both.output)).toBeLessThanOrEqual(half);
    expect(chars(both.input)).toBeGreaterThan(half - 45_000);

    const small = { type: 'object', properties: { q: { type: 'string', description: 'x'.repeat(20_000) } } };
    const lopsided = advertisedSchemas(capability(small, big('Out')));
    expect(lopsided.input).toBe(small);
    expect(chars(lopsided.output)).toBeLessThanOrEqual(ADVERTISED_SCHEMA_MAX_CHARS - chars(small));
    expect(chars(lopsided.output)).toBeGreaterThan(half);
  });

  it('a root too large by itself gets the components it names summarized, and no more is dropped', () => {
    const output: JsonSchema = {
      type: 'object',
      description: 'r'.repeat(ADVERTISED_SCHEMA_MAX_CHARS),
      properties: { a: { $ref: defRef('A') } },
      $defs: { A: component('A', 10_000) },
    };
    const shown = advertisedSchemas(capability(undefined, output)).output!;
    expect(shown.description).toBe(output.description);
    expect(isSummary((shown.$defs as Record<string, unknown>).A)).toBe(true);
    selfContained(shown);
  });

  it('any graph of components: within the bound, self-contained, the nearest kept whole', () => {
    const graph = fc.array(
      fc.record({
        size: fc.integer({ min: 0, max: 90_000 }),
        refs: fc.uniqueArray(fc.integer({ min: 0, max: 11 }), { maxLength: 3 }),
      }),
      { minLength: 1, maxLength: 12 },
    );
    fc.assert(
      fc.property(
        graph,
        fc.uniqueArray(fc.integer({ min: 0, max: 11 }), { minLength: 1, maxLength: 3 }),
        (nodes, roots) => {
          const name = (i: number): string => `C${i % nodes.length}`;
          const defs = Object.fromEntries(
            nodes.map((n, i) => [name(i), component(name(i), n.size, n.refs.map(name))]),
          );
          const output: JsonSchema = {
            type: 'object',
            properties: Object.fromEntries(roots.map((r) => [`p${r}`, { $ref: defRef(name(r)) }])),
            $defs: defs,
          };
          const shown = advertisedSchemas(capability(undefined, output)).output!;
          selfContained(shown);
          if (shown === output) {
            expect(chars(output)).toBeLessThanOrEqual(ADVERTISED_SCHEMA_MAX_CHARS);
            return;
          }
          expect(chars(shown)).toBeLessThanOrEqual(ADVERTISED_SCHEMA_MAX_CHARS);
          const shownDefs = shown.$defs as Record<string, unknown>;
          // In the document's order, a subset of it.
          const names = Object.keys(defs);
          expect(Object.keys(shownDefs)).toEqual(names.filter((n) => Object.hasOwn(shownDefs, n)));
          // Breadth-first from the root: the whole ones are the first met; summarized are exactly
          // the others the root or a whole one refers to; nothing else is shown.
          const order: string[] = [];
          let frontier = roots.map(name);
          while (frontier.length > 0) {
            const next: string[] = [];
            for (const n of frontier)
              if (!order.includes(n)) {
                order.push(n);
                next.push(...localRefNames(defs[n]));
              }
            frontier = next;
          }
          const whole = order.filter((n) => shownDefs[n] === defs[n]);
          expect(whole).toEqual(order.slice(0, whole.length));
          const referred = new Set([
            ...localRefNames(output.properties),
            ...whole.flatMap((n) => [...localRefNames(defs[n])]),
          ]);
          const summaries = Object.keys(shownDefs).filter((n) => isSummary(shownDefs[n]));
          expect(summaries.sort()).toEqual([...referred].filter((n) => !whole.includes(n)).sort());
        },
      ),
      { numRuns: 200 },
    );
  });
});
