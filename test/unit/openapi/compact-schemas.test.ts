/**
 * Issue #14: every component a capability schema reaches appears once under that root's `$defs`,
 * converted once per direction and shared across capabilities, and the result means exactly what
 * the inlined schemas of before meant.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import {
  followLocalRefs,
  localRefNames,
  propertySchema,
  withReachableDefs,
} from '../../../src/openapi/local-ref.js';
import { removeInputs } from '../../../src/openapi/pins.js';
import { SchemaConverter, type Direction } from '../../../src/openapi/schema-convert.js';
import type { Capability, JsonSchema } from '../../../src/openapi/types.js';

const NOOP = (): void => undefined;

function compact(doc: unknown, node: unknown, direction: Direction = 'input'): JsonSchema {
  const converter = new SchemaConverter(doc, 'openapi-3.0', NOOP);
  return converter.finish(converter.convert(node, direction, '#/test'), direction);
}

function ref(name: string): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

/** `$defs` names reached from the root itself (not counting what only unreached defs refer to). */
function reachedDefs(root: JsonSchema): string[] {
  const { $defs: defs = {}, ...rest } = root as { $defs?: Record<string, unknown> };
  const queue = [...localRefNames(rest)];
  for (let i = 0; i < queue.length; i++)
    for (const next of localRefNames(defs[queue[i] as string])) if (!queue.includes(next)) queue.push(next);
  return queue.sort();
}

describe('compact capability schemas', () => {
  const doc = {
    components: {
      schemas: {
        Pet: {
          type: 'object',
          required: ['id', 'name'],
          properties: {
            id: { type: 'integer', readOnly: true },
            name: { type: 'string', description: 'The pet name.' },
            secret: { type: 'string', writeOnly: true },
            tag: ref('Tag'),
          },
        },
        Tag: { type: 'string', description: 'A label.' },
        Unused: { type: 'object', properties: { x: ref('Tag') } },
        A: { type: 'object', properties: { b: ref('B') } },
        B: { type: 'object', properties: { a: ref('A') } },
        Alias: ref('Tag'),
      },
    },
  };

  it('puts a component referenced twice once under $defs, with local references to it', () => {
    const schema = compact(doc, {
      type: 'object',
      properties: { first: ref('Pet'), second: ref('Pet'), many: { type: 'array', items: ref('Pet') } },
    });
    expect(schema.properties).toEqual({
      first: { $ref: '#/$defs/Pet' },
      second: { $ref: '#/$defs/Pet' },
      many: { type: 'array', items: { $ref: '#/$defs/Pet' } },
    });
    expect(Object.keys(schema.$defs as object)).toEqual(['Pet', 'Tag']);
    expect((schema.$defs as any).Pet.properties.name.description).toBe('The pet name.');
  });

  it('keeps a cycle a cycle of $refs', () => {
    const schema = compact(doc, ref('A'));
    expect(schema.$ref).toBe('#/$defs/A');
    expect(schema.$defs).toEqual({
      A: { type: 'object', properties: { b: { $ref: '#/$defs/B' } } },
      B: { type: 'object', properties: { a: { $ref: '#/$defs/A' } } },
    });
    const validate = createSchemaValidator().compile(schema);
    expect(validate({ b: { a: { b: {} } } })).toBe(true);
    expect(validate({ b: { a: { b: 3 } } })).toBe(false);
  });

  it('leaves out components the schema does not reach', () => {
    const schema = compact(doc, ref('Pet'));
    expect(Object.keys(schema.$defs as object)).toEqual(['Pet', 'Tag']);
    expect(reachedDefs(schema)).toEqual(['Pet', 'Tag']);
  });

  it('converts a component per direction: readOnly leaves inputs, writeOnly leaves outputs', () => {
    const input = compact(doc, ref('Pet'), 'input');
    const output = compact(doc, ref('Pet'), 'output');
    expect(Object.keys((input.$defs as any).Pet.properties)).toEqual(['name', 'secret', 'tag']);
    expect((input.$defs as any).Pet.required).toEqual(['name']);
    expect(Object.keys((output.$defs as any).Pet.properties)).toEqual(['id', 'name', 'tag']);
    expect((output.$defs as any).Pet.required).toEqual(['id', 'name']);
  });

  it('follows a $ref to a $ref (an alias) to the schema behind it', () => {
    const schema = compact(doc, ref('Alias'));
    expect(schema.$ref).toBe('#/$defs/Alias');
    expect(schema.$defs).toEqual({ Alias: { $ref: '#/$defs/Tag' }, Tag: doc.components.schemas.Tag });
    expect(propertySchema({ ...schema, properties: { x: { $ref: '#/$defs/Alias' } } }, 'x')).toEqual(
      doc.components.schemas.Tag,
    );
    expect(createSchemaValidator().validate(schema, 3)).toBe(false);
  });

  it('names colliding components the same way whichever capability reaches them first', () => {
    const twoNodes = {
      components: { schemas: { Node: { type: 'string' } } },
      definitions: { Node: { type: 'integer' } },
      paths: {
        '/x': { get: { parameters: [{ schema: ref('Node') }, { schema: { $ref: '#/definitions/Node' } }] } },
      },
    };
    // The second one alone still gets the second name: names are assigned over the whole document.
    expect(Object.keys(compact(twoNodes, { $ref: '#/definitions/Node' }).$defs as object)).toEqual([
      'Node_2',
    ]);
    expect(Object.keys(compact(twoNodes, ref('Node')).$defs as object)).toEqual(['Node']);
  });

  it('shares one frozen object per component and direction across root schemas', () => {
    const converter = new SchemaConverter(doc, 'openapi-3.0', NOOP);
    const one = converter.finish(converter.convert(ref('Pet'), 'output', '#/test'), 'output');
    const two = converter.finish(converter.convert({ items: ref('Pet') }, 'output', '#/test'), 'output');
    const input = converter.finish(converter.convert(ref('Pet'), 'input', '#/test'), 'input');
    expect((one.$defs as any).Pet).toBe((two.$defs as any).Pet);
    expect((one.$defs as any).Pet).not.toBe((input.$defs as any).Pet);
    expect(Object.isFrozen((one.$defs as any).Pet)).toBe(true);
    expect(Object.isFrozen((one.$defs as any).Pet.properties.name)).toBe(true);
    expect(() => {
      (one.$defs as any).Pet.properties.name.type = 'integer';
    }).toThrow(TypeError);
  });
  it('shares one frozen $defs object per set of components and direction across root schemas', () => {
    const converter = new SchemaConverter(doc, 'openapi-3.0', NOOP);
    const root = (node: unknown, direction: Direction): JsonSchema =>
      converter.finish(converter.convert(node, direction, '#/test'), direction);
    const pet = root(ref('Pet'), 'output');
    const pets = root({ type: 'array', items: ref('Pet') }, 'output');
    const tag = root(ref('Tag'), 'output');
    const input = root(ref('Pet'), 'input');
    expect(Object.keys(pet.$defs as object)).toEqual(['Pet', 'Tag']);
    expect(pets.$defs).toBe(pet.$defs);
    expect(Object.keys(tag.$defs as object)).toEqual(['Tag']);
    expect(tag.$defs).not.toBe(pet.$defs);
    expect(Object.keys(input.$defs as object)).toEqual(['Pet', 'Tag']);
    expect(input.$defs).not.toBe(pet.$defs);
    expect(Object.isFrozen(pet.$defs)).toBe(true);
  });
});

describe('the local $ref helper', () => {
  it('lets the annotations beside a reference win over the target', () => {
    const lookup = (name: string): unknown =>
      ({ A: { $ref: '#/$defs/B', description: 'a' }, B: { type: 'string', description: 'b', title: 'B' } })[
        name
      ];
    expect(followLocalRefs({ $ref: '#/$defs/A', title: 'top' }, lookup)).toEqual({
      type: 'string',
      description: 'a',
      title: 'top',
    });
  });

  it('gives up on unknown names, foreign references and loops', () => {
    const loop = (name: string): unknown => ({ A: { $ref: '#/$defs/B' }, B: { $ref: '#/$defs/A' } })[name];
    expect(followLocalRefs({ $ref: '#/$defs/A' }, loop)).toBeUndefined();
    expect(followLocalRefs({ $ref: '#/$defs/Missing' }, loop)).toBeUndefined();
    expect(followLocalRefs({ $ref: 'https://example.com/x' }, loop)).toBeUndefined();
    expect(followLocalRefs({ type: 'string' }, loop)).toEqual({ type: 'string' });
  });

  it('finds references inside schema maps whatever their keys, and not inside instance values', () => {
    const schema = {
      properties: { enum: { $ref: '#/$defs/A' }, default: { items: { $ref: '#/$defs/B' } } },
      examples: [{ $ref: '#/$defs/C' }],
      enum: [{ $ref: '#/$defs/D' }],
    };
    expect([...localRefNames(schema)].sort()).toEqual(['A', 'B']);
  });

  it('keeps only the $defs a trimmed root still reaches', () => {
    const root = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/A' } },
      $defs: { A: { items: { $ref: '#/$defs/B' } }, B: {}, C: {} },
    };
    expect(Object.keys(withReachableDefs(root).$defs as object)).toEqual(['A', 'B']);
    expect(withReachableDefs({ ...root, properties: {} })).toEqual({ type: 'object', properties: {} });
  });
});

describe('capabilities over compact schemas', () => {
  const doc = {
    openapi: '3.0.3',
    info: { title: 'Pets', version: '1' },
    paths: {
      '/pets': {
        post: {
          operationId: 'createPet',
          parameters: [{ name: 'dry_run', in: 'query', schema: ref('Flag'), description: 'Only check.' }],
          requestBody: { content: { 'application/json': { schema: ref('NewPet') } } },
          responses: {
            '200': { description: 'ok', content: { 'application/json': { schema: ref('Pet') } } },
          },
        },
      },
      '/upload': {
        post: {
          operationId: 'upload',
          requestBody: { content: { 'multipart/form-data': { schema: ref('Upload') } } },
          responses: { '204': { description: 'done' } },
        },
      },
      '/trees': {
        post: {
          operationId: 'plantTree',
          requestBody: { content: { 'application/json': { schema: ref('Tree') } } },
          responses: { '204': { description: 'done' } },
        },
      },
    },
    components: {
      schemas: {
        Flag: { type: 'boolean', description: 'A flag.' },
        NewPet: {
          type: 'object',
          required: ['name'],
          properties: { name: ref('Name'), owner: ref('Owner') },
        },
        Pet: { allOf: [ref('NewPet'), { type: 'object', properties: { id: { type: 'integer' } } }] },
        Name: { type: 'string', minLength: 1 },
        Owner: { type: 'object', properties: { pets: { type: 'array', items: ref('Name') } } },
        Upload: {
          type: 'object',
          properties: { file: ref('File'), files: { type: 'array', items: ref('File') } },
        },
        File: { type: 'string', format: 'binary' },
        Tree: { type: 'object', properties: { children: { type: 'array', items: ref('Tree') } } },
      },
    },
  };
  const catalog = deriveCatalog([{ source: 'pets.yaml', doc }]);
  const get = (name: string): Capability => catalog.get(name) as Capability;

  it('flattens a body behind a $ref into the same top-level arguments as before', () => {
    const create = get('create_pet');
    expect(Object.keys(create.input?.properties as object)).toEqual(['dry_run', 'name', 'owner']);
    expect(create.input?.required).toEqual(['name']);
    expect(create.operation.body).toMatchObject({ mode: 'flattened', fields: ['name', 'owner'] });
    expect(create.input?.properties).toEqual({
      dry_run: { $ref: '#/$defs/Flag', description: 'Only check.' },
      name: { $ref: '#/$defs/Name' },
      owner: { $ref: '#/$defs/Owner' },
    });
    // NewPet was flattened away: nothing refers to it, so it is not there.
    expect(Object.keys(create.input?.$defs as object)).toEqual(['Flag', 'Name', 'Owner']);
    expect(propertySchema(create.input, 'dry_run')).toEqual({ type: 'boolean', description: 'Only check.' });
    expect(Object.keys(create.output?.$defs as object)).toEqual(['Name', 'NewPet', 'Owner', 'Pet']);
  });

  it('still finds binary fields behind $refs', () => {
    expect(get('upload').operation.body).toMatchObject({
      mode: 'flattened',
      fields: ['file', 'files'],
      binaryFields: ['file', 'files'],
    });
  });

  it('keeps a recursive body one wrapped argument, as before', () => {
    const plant = get('plant_tree');
    expect(plant.operation.body).toMatchObject({ mode: 'wrapped', argument: 'body' });
    expect(plant.input?.properties).toEqual({ body: { $ref: '#/$defs/Tree' } });
  });

  it('drops the $defs only a pinned argument needed', () => {
    const pinned = removeInputs(get('create_pet'), ['owner']);
    expect(Object.keys(pinned.input?.$defs as object)).toEqual(['Flag', 'Name']);
    expect(Object.keys(pinned.argumentsSchema.$defs as object)).toEqual(['Flag', 'Name']);
  });
});

/**
 * For random small documents without cycles, the compact schema accepts exactly the instances
 * that the schema converted from the document with every `$ref` replaced by its target accepts —
 * which is what the converter produced when it inlined components.
 */
describe('compaction changes no meaning', () => {
  const NAMES = ['A', 'B', 'C', 'D'] as const;
  const leaf = fc.constantFrom<unknown>(
    { type: 'string' },
    { type: 'string', enum: ['a', 'b'] },
    { type: 'integer', minimum: 0 },
    { type: 'boolean' },
    { type: 'number', nullable: true },
    {},
  );

  /** A schema that may refer to the components in `refs` (later ones only, so there is no cycle). */
  function schema(depth: number, refs: readonly string[]): fc.Arbitrary<unknown> {
    const options: fc.Arbitrary<unknown>[] = [leaf];
    if (refs.length > 0) options.push(fc.constantFrom(...refs).map(ref));
    if (depth > 0) {
      const sub = schema(depth - 1, refs);
      const flag = fc.constantFrom<string | undefined>(undefined, 'readOnly', 'writeOnly');
      const property = fc
        .tuple(sub, flag)
        .map(([s, f]) => (f && typeof s === 'object' ? { ...s, [f]: true } : s));
      options.push(
        fc
          .record({ a: property, b: property, required: fc.subarray(['a', 'b', 'c']), closed: fc.boolean() })
          .map(({ a, b, required, closed }) => ({
            type: 'object',
            properties: { a, b },
            ...(required.length > 0 ? { required } : {}),
            ...(closed ? { additionalProperties: false } : {}),
          })),
        sub.map((items) => ({ type: 'array', items })),
        fc.tuple(sub, sub).map(([x, y]) => ({ anyOf: [x, y] })),
      );
    }
    return fc.oneof(...options);
  }

  const document = fc
    .tuple(...NAMES.map((_, i) => schema(2, NAMES.slice(i + 1))), schema(2, NAMES))
    .map(([a, b, c, d, root]) => ({ doc: { components: { schemas: { A: a, B: b, C: c, D: d } } }, root }));

  const instance = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom<unknown>('a', 'b', 'x', -1, 0, 3, 1.5, true, false, null),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.record({ a: tie('value'), b: tie('value'), c: tie('value') }, { requiredKeys: [] }),
    ),
  })).value;

  /** The raw document's schema with every `$ref` replaced by its target (siblings kept over it). */
  function inlineRaw(node: unknown, doc: { components: { schemas: Record<string, unknown> } }): unknown {
    if (Array.isArray(node)) return node.map((n) => inlineRaw(n, doc));
    if (!node || typeof node !== 'object') return node;
    const { $ref: target, ...rest } = node as Record<string, unknown>;
    const own = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, inlineRaw(v, doc)]));
    if (typeof target !== 'string') return own;
    const resolved = inlineRaw(doc.components.schemas[target.split('/').pop() as string], doc);
    return { ...(resolved as object), ...own };
  }

  it('for inputs and outputs alike', () => {
    const ajv = createSchemaValidator();
    fc.assert(
      fc.property(document, fc.array(instance, { minLength: 5, maxLength: 5 }), ({ doc, root }, values) => {
        for (const direction of ['input', 'output'] as const) {
          const compacted = compact(doc, root, direction);
          const inlined = compact({}, inlineRaw(root, doc), direction);
          expect(inlined.$defs).toBeUndefined();
          expect(reachedDefs(compacted)).toEqual(Object.keys(compacted.$defs ?? {}).sort());
          const a = ajv.compile(compacted);
          const b = ajv.compile(inlined);
          for (const value of values) expect(a(value), JSON.stringify(value)).toBe(b(value));
        }
      }),
      { numRuns: 150 },
    );
  });
});
