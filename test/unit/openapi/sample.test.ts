import Ajv2020 from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { sampleFromSchema } from '../../../src/openapi/sample.js';
import type { JsonSchema } from '../../../src/openapi/types.js';

// Both packages are CommonJS whose typings describe `exports.default`; under NodeNext the default
// import is `module.exports`, which also carries `.default`, so that works for tsc and at runtime.
const Ajv = Ajv2020.default;
const addFormats = addFormatsPlugin.default;

function validator(): InstanceType<typeof Ajv> {
  const ajv = new Ajv({ allErrors: true });
  addFormats(ajv);
  return ajv;
}

describe('sampleFromSchema: literal values', () => {
  it('prefers const, then examples[0], then default, then enum[0]', () => {
    const base = { type: 'string', enum: ['n'] };
    expect(sampleFromSchema(base)).toBe('n');
    expect(sampleFromSchema({ ...base, default: 'd' })).toBe('d');
    expect(sampleFromSchema({ ...base, default: 'd', examples: ['e'] })).toBe('e');
    expect(sampleFromSchema({ ...base, default: 'd', examples: ['e'], const: 'c' })).toBe('c');
  });

  it('returns null const and falsy defaults as they are', () => {
    expect(sampleFromSchema({ const: null })).toBeNull();
    expect(sampleFromSchema({ type: 'integer', default: 0 })).toBe(0);
    expect(sampleFromSchema({ type: 'boolean', default: true })).toBe(true);
  });

  it('skips empty examples and enum arrays', () => {
    expect(sampleFromSchema({ type: 'integer', examples: [], enum: [] })).toBe(0);
  });

  it('returns object examples without touching them', () => {
    const example = { id: 7, nested: { a: [1, 2] } };
    expect(sampleFromSchema({ type: 'object', examples: [example] })).toBe(example);
  });
});

describe('sampleFromSchema: strings', () => {
  it.each([
    ['date-time', '2026-01-01T00:00:00Z'],
    ['date', '2026-01-01'],
    ['uuid', '00000000-0000-4000-8000-000000000000'],
    ['email', 'user@example.com'],
    ['uri', 'https://example.com/'],
    ['url', 'https://example.com/'],
    ['ipv4', '192.0.2.1'],
    ['no-such-format', 'string'],
  ])('format %s → %s', (format, expected) => {
    expect(sampleFromSchema({ type: 'string', format })).toBe(expected);
  });

  it('is "string" without a format', () => {
    expect(sampleFromSchema({ type: 'string' })).toBe('string');
  });

  it('pads to minLength and trims to maxLength', () => {
    const padded = sampleFromSchema({ type: 'string', minLength: 10 });
    expect(padded).toMatch(/^string/);
    expect(padded).toHaveLength(10);
    expect(sampleFromSchema({ type: 'string', maxLength: 3 })).toBe('str');
  });

  it('is empty for base64 content', () => {
    expect(sampleFromSchema({ type: 'string', contentEncoding: 'base64' })).toBe('');
    const padded = sampleFromSchema({ type: 'string', contentEncoding: 'base64', minLength: 2 });
    expect(typeof padded === 'string' && padded.length >= 2 && padded.length % 4 === 0).toBe(true);
  });
});

describe('sampleFromSchema: numbers and booleans', () => {
  it('is 0 without bounds', () => {
    expect(sampleFromSchema({ type: 'integer' })).toBe(0);
    expect(sampleFromSchema({ type: 'number' })).toBe(0);
  });

  it('uses minimum, or exclusiveMinimum + 1', () => {
    expect(sampleFromSchema({ type: 'integer', minimum: 5 })).toBe(5);
    expect(sampleFromSchema({ type: 'integer', exclusiveMinimum: 5 })).toBe(6);
    expect(sampleFromSchema({ type: 'number', minimum: 1.5 })).toBe(1.5);
    expect(sampleFromSchema({ type: 'number', exclusiveMinimum: 1.5 })).toBe(2.5);
    expect(sampleFromSchema({ type: 'integer', minimum: 1.5 })).toBe(2);
  });

  it('stays inside ranges that 0 or the +1 step would leave', () => {
    expect(sampleFromSchema({ type: 'integer', maximum: -3 })).toBe(-3);
    const narrow = sampleFromSchema({ type: 'number', exclusiveMinimum: 0, maximum: 0.5 });
    expect(typeof narrow === 'number' && narrow > 0 && narrow <= 0.5).toBe(true);
  });

  it('is false for booleans', () => {
    expect(sampleFromSchema({ type: 'boolean' })).toBe(false);
  });
});

describe('sampleFromSchema: types', () => {
  it('takes the first non-null type of a type array', () => {
    expect(sampleFromSchema({ type: ['null', 'integer'] })).toBe(0);
    expect(sampleFromSchema({ type: ['string', 'null'] })).toBe('string');
    expect(sampleFromSchema({ type: ['null'] })).toBeNull();
    expect(sampleFromSchema({ type: 'null' })).toBeNull();
  });

  it('is null for a schema without type or keywords', () => {
    expect(sampleFromSchema({})).toBeNull();
    expect(sampleFromSchema({ description: 'anything' })).toBeNull();
  });

  it('infers the type from keywords when it is missing', () => {
    expect(sampleFromSchema({ properties: { a: { type: 'integer' } } })).toEqual({ a: 0 });
    expect(sampleFromSchema({ items: { type: 'boolean' } })).toEqual([false]);
    expect(sampleFromSchema({ format: 'date' })).toBe('2026-01-01');
    expect(sampleFromSchema({ minimum: 3 })).toBe(3);
  });
});

describe('sampleFromSchema: objects', () => {
  it('includes required properties, then at most five optional ones', () => {
    const properties = Object.fromEntries(
      ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((name) => [name, { type: 'integer' }]),
    );
    const sample = sampleFromSchema({ type: 'object', properties, required: ['h', 'g'] });
    expect(sample).toEqual({ h: 0, g: 0, a: 0, b: 0, c: 0, d: 0, e: 0 });
  });

  it('samples a required property missing from properties from additionalProperties', () => {
    expect(
      sampleFromSchema({ type: 'object', required: ['x'], additionalProperties: { type: 'string' } }),
    ).toEqual({ x: 'string' });
    expect(sampleFromSchema({ type: 'object', required: ['x'] })).toEqual({ x: null });
  });

  it('samples nested objects and arrays', () => {
    const schema = {
      type: 'object',
      required: ['tags'],
      properties: {
        tags: { type: 'array', items: { type: 'string' } },
        owner: { type: 'object', properties: { email: { type: 'string', format: 'email' } } },
      },
    };
    expect(sampleFromSchema(schema)).toEqual({ tags: ['string'], owner: { email: 'user@example.com' } });
  });
});

describe('sampleFromSchema: arrays', () => {
  it('has one item by default', () => {
    expect(sampleFromSchema({ type: 'array', items: { type: 'integer', minimum: 2 } })).toEqual([2]);
  });

  it('repeats the item up to minItems', () => {
    expect(sampleFromSchema({ type: 'array', minItems: 3, items: { type: 'string' } })).toEqual([
      'string',
      'string',
      'string',
    ]);
  });

  it('is empty when maxItems is 0', () => {
    expect(sampleFromSchema({ type: 'array', maxItems: 0, items: { type: 'string' } })).toEqual([]);
  });

  it('samples every prefixItems entry and adds none when items is false', () => {
    expect(
      sampleFromSchema({
        type: 'array',
        prefixItems: [{ type: 'integer' }, { type: 'string' }],
        items: false,
      }),
    ).toEqual([0, 'string']);
  });

  it('has a null item when items is missing', () => {
    expect(sampleFromSchema({ type: 'array' })).toEqual([null]);
  });
});

describe('sampleFromSchema: composition', () => {
  it('merges object parts of allOf', () => {
    const schema = {
      allOf: [
        { type: 'object', required: ['id'], properties: { id: { type: 'integer' } } },
        { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
      ],
    };
    expect(sampleFromSchema(schema)).toEqual({ id: 0, name: 'string' });
  });

  it('merges the siblings of allOf into its object sample', () => {
    const schema = {
      type: 'object',
      properties: { own: { type: 'boolean' } },
      allOf: [{ properties: { part: { type: 'integer' } } }],
    };
    expect(sampleFromSchema(schema)).toEqual({ own: false, part: 0 });
  });

  it('takes the first part of a non-object allOf', () => {
    expect(sampleFromSchema({ allOf: [{ type: 'string', format: 'uuid' }, { maxLength: 100 }] })).toBe(
      '00000000-0000-4000-8000-000000000000',
    );
  });

  it('takes the first non-null alternative of anyOf and oneOf', () => {
    expect(sampleFromSchema({ anyOf: [{ type: 'null' }, { type: 'integer', minimum: 4 }] })).toBe(4);
    expect(sampleFromSchema({ oneOf: [{ type: 'string', format: 'date' }, { type: 'integer' }] })).toBe(
      '2026-01-01',
    );
    expect(sampleFromSchema({ anyOf: [{ type: 'null' }] })).toBeNull();
  });

  it('folds object siblings of oneOf into the chosen alternative', () => {
    const schema = {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'integer' } },
      oneOf: [{ required: ['a'] }, { required: ['b'] }],
    };
    expect(sampleFromSchema(schema)).toMatchObject({ a: 'string' });
  });
});

describe('sampleFromSchema: $ref', () => {
  it('resolves #/$defs refs against the root, also from nested schemas', () => {
    const schema = {
      $defs: {
        Id: { type: 'string', format: 'uuid' },
        Pet: { type: 'object', required: ['id'], properties: { id: { $ref: '#/$defs/Id' } } },
      },
      type: 'array',
      items: { $ref: '#/$defs/Pet' },
    };
    expect(sampleFromSchema(schema)).toEqual([{ id: '00000000-0000-4000-8000-000000000000' }]);
  });

  it('is null for a ref that points nowhere or is not local', () => {
    expect(sampleFromSchema({ $ref: '#/$defs/Missing' })).toBeNull();
    expect(sampleFromSchema({ $ref: 'https://example.com/schema' })).toBeNull();
  });

  it('terminates on a tree through optional children', () => {
    const schema = {
      $defs: {
        Node: {
          type: 'object',
          required: ['value'],
          properties: {
            value: { type: 'integer' },
            children: { type: 'array', items: { $ref: '#/$defs/Node' } },
          },
        },
      },
      $ref: '#/$defs/Node',
    };
    const sample = sampleFromSchema(schema);
    expect(depthOf(sample, 'children')).toBeGreaterThanOrEqual(2);
    expect(depthOf(sample, 'children')).toBeLessThanOrEqual(4);
  });

  it('ends required nullable recursion with null', () => {
    const schema = {
      $defs: {
        List: {
          type: 'object',
          required: ['head', 'tail'],
          properties: {
            head: { type: 'string' },
            tail: { anyOf: [{ $ref: '#/$defs/List' }, { type: 'null' }] },
          },
        },
      },
      $ref: '#/$defs/List',
    };
    const sample = sampleFromSchema(schema);
    expect(JSON.stringify(sample)).toContain('"tail":null');
    expect(depthOf(sample, 'tail')).toBeLessThanOrEqual(4);
  });

  it('terminates when recursion is required and not nullable', () => {
    const schema = {
      $defs: {
        Loop: { type: 'object', required: ['next'], properties: { next: { $ref: '#/$defs/Loop' } } },
        Items: { type: 'array', minItems: 1, items: { $ref: '#/$defs/Items' } },
      },
      type: 'object',
      required: ['loop', 'items'],
      properties: { loop: { $ref: '#/$defs/Loop' }, items: { $ref: '#/$defs/Items' } },
    };
    expect(() => JSON.stringify(sampleFromSchema(schema))).not.toThrow();
  });

  it('terminates on mutual recursion', () => {
    const schema = {
      $defs: {
        A: { type: 'object', properties: { b: { $ref: '#/$defs/B' } } },
        B: { type: ['object', 'null'], properties: { a: { $ref: '#/$defs/A' } } },
      },
      $ref: '#/$defs/A',
    };
    expect(sampleFromSchema(schema)).toBeTypeOf('object');
  });
});

describe('sampleFromSchema: odd input', () => {
  it.each<[string, JsonSchema]>([
    ['non-array type', { type: 42 }],
    ['non-object properties', { type: 'object', properties: 'nope', required: 'x' }],
    ['boolean subschemas', { type: 'object', properties: { a: true, b: false }, required: ['a'] }],
    ['non-numeric bounds', { type: 'integer', minimum: 'five', maxLength: -1 }],
    ['non-string format', { type: 'string', format: 7, minLength: 'x' }],
    ['empty allOf/anyOf', { allOf: [], anyOf: [] }],
    ['non-string $ref', { $ref: 5 }],
    ['garbage composition', { allOf: [null, 3, 'x'], oneOf: [null] }],
  ])('does not throw on %s', (_label, schema) => {
    expect(() => sampleFromSchema(schema)).not.toThrow();
  });

  it('does not overflow the stack on a cyclic object graph', () => {
    const cyclic: JsonSchema = { type: 'object', required: ['self'] };
    cyclic.properties = { self: cyclic };
    expect(() => sampleFromSchema(cyclic)).not.toThrow();
  });
});

describe('sampleFromSchema: samples validate', () => {
  const schemas: Record<string, JsonSchema> = {
    pet: {
      type: 'object',
      required: ['id', 'name', 'createdAt'],
      properties: {
        id: { type: 'integer', format: 'int64', minimum: 1 },
        name: { type: 'string', minLength: 12, maxLength: 40 },
        createdAt: { type: 'string', format: 'date-time' },
        status: { type: 'string', enum: ['available', 'sold'] },
        owner: { type: ['object', 'null'], properties: { email: { type: 'string', format: 'email' } } },
        photo: { type: 'string', contentEncoding: 'base64' },
      },
      additionalProperties: false,
    },
    composed: {
      allOf: [
        { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } },
        {
          type: 'object',
          required: ['score', 'links'],
          properties: {
            score: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
            links: { type: 'array', minItems: 2, items: { type: 'string', format: 'uri' } },
          },
        },
      ],
    },
    alternatives: {
      type: 'array',
      items: {
        oneOf: [
          { type: 'integer', maximum: -10 },
          { type: 'string', format: 'ipv4' },
        ],
      },
    },
    tuple: {
      type: 'array',
      prefixItems: [{ type: 'string', format: 'date' }, { type: 'boolean' }],
      minItems: 2,
      items: false,
    },
    recursive: {
      $defs: {
        Category: {
          type: 'object',
          required: ['name', 'parent'],
          properties: {
            name: { type: 'string' },
            parent: { anyOf: [{ $ref: '#/$defs/Category' }, { type: 'null' }] },
            children: { type: 'array', items: { $ref: '#/$defs/Category' } },
          },
        },
      },
      type: 'object',
      required: ['root'],
      properties: { root: { $ref: '#/$defs/Category' } },
    },
  };

  it.each(Object.entries(schemas))('%s', (_name, schema) => {
    const validate = validator().compile(schema);
    const sample = sampleFromSchema(schema);
    expect(validate(sample), JSON.stringify(validate.errors)).toBe(true);
  });
});

/** How many times `key` nests inside itself (following the first array element when it is one). */
function depthOf(value: unknown, key: string): number {
  let depth = 0;
  let node: unknown = value;
  for (;;) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return depth;
    const next: unknown = (node as Record<string, unknown>)[key];
    const child: unknown = Array.isArray(next) ? (next as unknown[])[0] : next;
    if (typeof child !== 'object' || child === null) return depth;
    depth += 1;
    node = child;
  }
}
