/**
 * JSON in pieces: the same text as JSON.stringify(value, null, 2), wherever the value stands, and
 * no piece much longer than the longest leaf.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emitJson } from '../../../src/util/json-pieces.js';

function pieces(value: unknown, level = 0): string[] {
  const out: string[] = [];
  emitJson(value, (piece) => out.push(piece), level);
  return out;
}

/** Nests `value` `levels` deep as the one member of objects, so JSON.stringify indents it there. */
function nested(value: unknown, levels: number): unknown {
  return levels === 0 ? value : { a: nested(value, levels - 1) };
}

/** JSON.stringify's text of `value` at `levels` deep, cut out of `nested(value, levels)`. */
function stringifiedAt(value: unknown, levels: number): string {
  const text = JSON.stringify(nested(value, levels), null, 2);
  const lead = Array.from({ length: levels }, (_, i) => `{\n${'  '.repeat(i + 1)}"a": `).join('');
  const tail = Array.from({ length: levels }, (_, i) => `\n${'  '.repeat(levels - 1 - i)}}`).join('');
  expect(text.startsWith(lead) && text.endsWith(tail)).toBe(true);
  return text.slice(lead.length, text.length - tail.length);
}

describe('emitJson', () => {
  it('is JSON.stringify(value, null, 2), at any level, for any JSON value (deeper than it splits too)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 9 }), fc.integer({ min: 0, max: 4 }), (value, level) => {
        expect(pieces(value, level).join('')).toBe(stringifiedAt(value, level));
      }),
      { numRuns: 400 },
    );
  });

  it('leaves out what JSON.stringify leaves out, and hands other objects to it whole', () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { k: [1, {}] });
    const value = {
      gone: undefined,
      fn: () => 1,
      sym: Symbol('s'),
      list: [undefined, () => 1, Symbol('t'), null, Number.NaN, -0, 1e21],
      when: new Date(0),
      custom: { toJSON: (key: string) => `custom ${key}` },
      absent: { toJSON: () => undefined },
      point: new Point(1, 2),
      bare,
      empty: { a: undefined },
      nothing: [],
      text: 'line\nbreak "quoted" \u2028 \ud83d\ude00',
      [Symbol('hidden')]: 'not JSON',
    };
    for (const level of [0, 1, 3]) {
      expect(pieces(value, level).join('')).toBe(stringifiedAt(value, level));
    }
  });

  it('gives pieces no longer than the longest leaf, however long the whole', () => {
    const leaf = 'x'.repeat(10_000);
    const value = {
      defs: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`d${i}`, { description: leaf }])),
    };
    const out = pieces(value, 2);
    expect(out.join('').length).toBeGreaterThan(200 * leaf.length);
    expect(Math.max(...out.map((p) => p.length))).toBe(leaf.length + 2);
  });
});
