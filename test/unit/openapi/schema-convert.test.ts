import { describe, expect, it } from 'vitest';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import {
  JSON_SCHEMA_2020,
  makeNullable,
  MAX_EXAMPLES_CHARS,
  SchemaConverter,
  type Direction,
} from '../../../src/openapi/schema-convert.js';
import type { JsonSchema, SpecFlavour } from '../../../src/openapi/types.js';
import { collectRefs, inlineLocalRefs } from '../../helpers/schemas.js';

interface Result {
  readonly schema: JsonSchema;
  readonly warnings: string[];
  readonly converter: SchemaConverter;
}

/**
 * Converts `node` as a capability root schema would be, and checks what every produced schema must
 * satisfy: it compiles with the project's strict 2020-12 validator and references nothing outside.
 */
function convert(
  node: unknown,
  options: { doc?: unknown; flavour?: SpecFlavour; direction?: Direction } = {},
): Result {
  const warnings: string[] = [];
  const direction = options.direction ?? 'input';
  const converter = new SchemaConverter(options.doc ?? {}, options.flavour ?? 'openapi-3.0', (m) =>
    warnings.push(m),
  );
  const converted = converter.convert(node, direction, '#/test');
  const schema = converter.finish(converted, direction);
  createSchemaValidator(converter.formats).compile(schema);
  for (const { ref } of collectRefs(schema)) {
    expect(ref).toMatch(/^#\/\$defs\/[^/]+$/);
    expect((schema.$defs as Record<string, unknown>)[ref.slice('#/$defs/'.length)]).toBeDefined();
  }
  return { schema, warnings, converter };
}

/** The converted schema without `$schema`, for compact comparisons. */
function body(node: unknown, options?: Parameters<typeof convert>[1]): JsonSchema {
  const { $schema: _s, ...rest } = convert(node, options).schema;
  return rest;
}

function validate(schema: JsonSchema, formats: Iterable<string>, value: unknown): boolean {
  return createSchemaValidator(formats).validate(schema, value);
}

describe('the root schema', () => {
  it('declares JSON Schema 2020-12', () => {
    expect(JSON_SCHEMA_2020).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(convert({ type: 'string' }).schema).toEqual({ $schema: JSON_SCHEMA_2020, type: 'string' });
  });

  it('turns boolean schemas into objects', () => {
    expect(convert(true).schema).toEqual({ $schema: JSON_SCHEMA_2020 });
    expect(convert(false).schema).toEqual({ $schema: JSON_SCHEMA_2020, not: {} });
  });

  it('drops identifiers inside the document so $refs resolve against the capability schema', () => {
    const schema = body({
      $schema: 'http://json-schema.org/draft-04/schema#',
      $id: 'https://example.com/pet',
      $anchor: 'pet',
      type: 'object',
      properties: { a: { $id: 'inner', type: 'string' } },
    });
    expect(schema).toEqual({ type: 'object', properties: { a: { type: 'string' } } });
  });

  it('treats a schema that is not an object as {} and warns', () => {
    const { schema, warnings } = convert('string');
    expect(schema).toEqual({ $schema: JSON_SCHEMA_2020 });
    expect(warnings).toEqual(['#/test: schema is not an object; treated as {}']);
  });
});

describe('nullable (OpenAPI 3.0) and x-nullable (Swagger 2.0)', () => {
  it('adds null to a single type', () => {
    const { schema, converter } = convert({ type: 'string', nullable: true });
    expect(schema.type).toEqual(['string', 'null']);
    expect(schema).not.toHaveProperty('nullable');
    expect(validate(schema, converter.formats, null)).toBe(true);
    expect(validate(schema, converter.formats, 1)).toBe(false);
  });

  it('adds null to a type list once', () => {
    expect(body({ type: ['string', 'integer'], nullable: true }).type).toEqual(['string', 'integer', 'null']);
    expect(body({ type: ['string', 'null'], nullable: true }).type).toEqual(['string', 'null']);
  });

  it('adds null to an enum', () => {
    expect(body({ type: 'string', enum: ['a', 'b'], nullable: true })).toEqual({
      type: ['string', 'null'],
      enum: ['a', 'b', null],
    });
  });

  it('wraps a schema without a type in anyOf with {type: null}', () => {
    expect(body({ description: 'anything', nullable: true })).toEqual({
      anyOf: [{ description: 'anything' }, { type: 'null' }],
    });
  });

  it('reads x-nullable in Swagger 2.0 documents', () => {
    const schema = body({ type: 'integer', 'x-nullable': true }, { flavour: 'swagger-2.0' });
    expect(schema).toEqual({ type: ['integer', 'null'] });
  });

  it('leaves nullable: false alone', () => {
    expect(body({ type: 'string', nullable: false })).toEqual({ type: 'string' });
  });

  it('applies to nested schemas', () => {
    expect(body({ type: 'array', items: { type: 'number', nullable: true } })).toEqual({
      type: 'array',
      items: { type: ['number', 'null'] },
    });
  });

  it('applies nullable beside a $ref to the referenced schema', () => {
    const doc = { components: { schemas: { Name: { type: 'string', minLength: 1 } } } };
    const { schema, converter } = convert({ $ref: '#/components/schemas/Name', nullable: true }, { doc });
    expect(body({ $ref: '#/components/schemas/Name', nullable: true }, { doc })).toEqual({
      anyOf: [{ $ref: '#/$defs/Name' }, { type: 'null' }],
      $defs: { Name: { type: 'string', minLength: 1 } },
    });
    expect(validate(schema, converter.formats, null)).toBe(true);
    expect(validate(schema, converter.formats, 'a')).toBe(true);
    expect(validate(schema, converter.formats, '')).toBe(false);
  });

  it('makeNullable does not change its argument', () => {
    const input = { type: 'string', enum: ['a'] };
    makeNullable(input);
    expect(input).toEqual({ type: 'string', enum: ['a'] });
  });
});

describe('exclusiveMinimum / exclusiveMaximum', () => {
  it('turns boolean true into the numeric 2020-12 form and drops the plain bound', () => {
    const { schema, converter } = convert({
      type: 'number',
      minimum: 1,
      exclusiveMinimum: true,
      maximum: 5,
      exclusiveMaximum: true,
    });
    expect(schema).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'number',
      exclusiveMinimum: 1,
      exclusiveMaximum: 5,
    });
    expect(validate(schema, converter.formats, 1)).toBe(false);
    expect(validate(schema, converter.formats, 1.5)).toBe(true);
    expect(validate(schema, converter.formats, 5)).toBe(false);
  });

  it('keeps the inclusive bound when the flag is false', () => {
    expect(
      body({ type: 'integer', minimum: 0, exclusiveMinimum: false, maximum: 9, exclusiveMaximum: false }),
    ).toEqual({ type: 'integer', minimum: 0, maximum: 9 });
  });

  it('drops a boolean flag that has no bound to apply to', () => {
    expect(body({ type: 'number', exclusiveMinimum: true, exclusiveMaximum: true })).toEqual({
      type: 'number',
    });
  });

  it('keeps numeric exclusive bounds (OpenAPI 3.1) as they are', () => {
    expect(
      body({ type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 10 }, { flavour: 'openapi-3.1' }),
    ).toEqual({
      type: 'number',
      exclusiveMinimum: 0,
      exclusiveMaximum: 10,
    });
  });
});

describe('example and examples', () => {
  it('turns example into a one-element examples array', () => {
    expect(body({ type: 'string', example: 'rex' })).toEqual({ type: 'string', examples: ['rex'] });
    expect(body({ type: 'object', example: { a: 1 } })).toEqual({ type: 'object', examples: [{ a: 1 }] });
  });

  it('prefers an examples array over example', () => {
    expect(body({ type: 'string', example: 'one', examples: ['two', 'three'] })).toEqual({
      type: 'string',
      examples: ['two', 'three'],
    });
  });

  it('ignores an examples map (not a schema keyword) but keeps example', () => {
    expect(body({ type: 'string', examples: { a: { value: 'x' } }, example: 'y' })).toEqual({
      type: 'string',
      examples: ['y'],
    });
  });

  /** An example whose `examples` array is exactly `chars` characters of JSON. */
  const exampleOf = (chars: number): string => 'x'.repeat(chars - '[""]'.length);

  it(`keeps examples of up to ${MAX_EXAMPLES_CHARS} characters of JSON and leaves out larger ones, naming them`, () => {
    expect(MAX_EXAMPLES_CHARS).toBe(8 * 1024);
    const fits = exampleOf(MAX_EXAMPLES_CHARS);
    expect(convert({ type: 'string', example: fits })).toMatchObject({
      schema: { examples: [fits] },
      warnings: [],
    });
    // A whole response as one schema's example (420 KiB in a real travel API) describes nothing
    // an agent needs and alone took its capability past 256 KiB.
    const over = exampleOf(MAX_EXAMPLES_CHARS + 1);
    for (const node of [
      { type: 'string', example: over },
      { type: 'string', examples: [over] },
      { type: 'string', examples: ['small', exampleOf(MAX_EXAMPLES_CHARS)] }, // 8 characters more
    ]) {
      const { schema, warnings } = convert({ type: 'object', properties: { big: node } });
      // As agents get it: JSON (the version keeps what was left out beside it, unseen).
      expect(JSON.parse(JSON.stringify(schema))).toEqual({
        $schema: JSON_SCHEMA_2020,
        type: 'object',
        properties: { big: { type: 'string' } },
      });
      expect(warnings).toEqual([
        expect.stringMatching(
          /^#\/test\/properties\/big\/examples?: left out an example of 9 KiB: capability schemas carry examples of up to 8 KiB$/,
        ),
      ]);
    }
  });
});

describe('binary data', () => {
  it('turns Swagger type: file into a base64 string', () => {
    expect(body({ type: 'file', description: 'photo' }, { flavour: 'swagger-2.0' })).toEqual({
      type: 'string',
      contentEncoding: 'base64',
      description: 'photo',
    });
  });

  it('turns format: binary into a base64 string without a format', () => {
    const { schema, converter } = convert({ type: 'string', format: 'binary' });
    expect(schema).toEqual({ $schema: JSON_SCHEMA_2020, type: 'string', contentEncoding: 'base64' });
    expect(converter.formats.has('binary')).toBe(false);
  });

  it('handles binary array items', () => {
    expect(body({ type: 'array', items: { type: 'string', format: 'binary' } })).toEqual({
      type: 'array',
      items: { type: 'string', contentEncoding: 'base64' },
    });
  });
});

describe('formats', () => {
  it('keeps formats and records each one so the validator can register unknown ones', () => {
    const { schema, converter } = convert({
      type: 'object',
      properties: {
        id: { type: 'string', format: 'uuid' },
        n: { type: 'integer', format: 'int64' },
        s: { type: 'string', format: 'my-vendor-format' },
      },
    });
    expect(schema.properties).toEqual({
      id: { type: 'string', format: 'uuid' },
      n: { type: 'integer', format: 'int64' },
      s: { type: 'string', format: 'my-vendor-format' },
    });
    expect([...converter.formats].sort()).toEqual(['int64', 'my-vendor-format', 'uuid']);
    // Without registering it, ajv's strict mode refuses the unknown format.
    expect(() => createSchemaValidator().compile(schema)).toThrow(/unknown format/);
  });

  it('drops a format that is not a string', () => {
    expect(body({ type: 'string', format: 7 })).toEqual({ type: 'string' });
  });
});

describe('OpenAPI-only keywords and extensions', () => {
  it('drops discriminator, xml, externalDocs and x-* extensions', () => {
    const doc = {
      components: {
        schemas: {
          Cat: { type: 'object', properties: { kind: { type: 'string' }, meows: { type: 'boolean' } } },
          Dog: { type: 'object', properties: { kind: { type: 'string' }, barks: { type: 'boolean' } } },
        },
      },
    };
    const { schema, warnings } = convert(
      {
        oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Dog' }],
        discriminator: { propertyName: 'kind', mapping: { cat: '#/components/schemas/Cat' } },
        xml: { name: 'pet' },
        externalDocs: { url: 'https://example.com' },
        'x-internal': true,
      },
      { doc },
    );
    expect(Object.keys(schema).sort()).toEqual(['$defs', '$schema', 'oneOf']);
    expect(schema.oneOf).toEqual([{ $ref: '#/$defs/Cat' }, { $ref: '#/$defs/Dog' }]);
    expect(schema.$defs).toEqual({ Cat: doc.components.schemas.Cat, Dog: doc.components.schemas.Dog });
    expect(warnings).toEqual([]);
  });
});

describe('invalid keyword values', () => {
  it('drops a pattern ECMAScript cannot compile, with a warning naming where it was', () => {
    const { schema, warnings } = convert({ type: 'string', pattern: '([a-z]' });
    expect(schema).not.toHaveProperty('pattern');
    expect(warnings).toEqual([
      '#/test: dropped "pattern" "([a-z]": not a valid ECMAScript (unicode) regular expression',
    ]);
  });

  it('drops a pattern that is only valid without the unicode flag (ajv compiles with it)', () => {
    const { schema, warnings } = convert({ type: 'string', pattern: '^\\-\\d$' });
    expect(schema).not.toHaveProperty('pattern');
    expect(warnings).toHaveLength(1);
  });

  it('keeps valid patterns', () => {
    const { schema, converter } = convert({ type: 'string', pattern: '^[A-Z]{3}$' });
    expect(schema.pattern).toBe('^[A-Z]{3}$');
    expect(validate(schema, converter.formats, 'EUR')).toBe(true);
    expect(validate(schema, converter.formats, 'eur')).toBe(false);
  });

  it('keeps a pattern that needs lookaround, says the proxy does not check it, and accepts any string for it', () => {
    const pattern = '^(?=.*\\d).{8,}$';
    const { schema, warnings, converter } = convert({ type: 'string', pattern });
    expect(schema.pattern).toBe(pattern);
    expect(warnings).toEqual([
      `#/test: "pattern" ${JSON.stringify(pattern)} is not checked by the proxy: RE2, which matches in linear time, cannot run it (invalid perl operator: (?=)`,
    ]);
    expect(validate(schema, converter.formats, 'short')).toBe(true);
  });

  it('names RE2’s reason for a pattern it refuses without lookaround: a repetition count over 1,000', () => {
    // Seen in the public collection (agco-ats.com); the warning used to blame lookaround.
    const pattern = '^[a-zA-Z0-9]{0,4096}$';
    const { schema, warnings } = convert({ type: 'string', pattern });
    expect(schema.pattern).toBe(pattern);
    expect(warnings).toEqual([
      `#/test: "pattern" ${JSON.stringify(pattern)} is not checked by the proxy: RE2, which matches in linear time, cannot run it (invalid repetition size: {0,4096})`,
    ]);
  });

  it('drops a patternProperties key that needs a backreference (unchecked, it would match every name)', () => {
    const { schema, warnings } = convert({
      type: 'object',
      patternProperties: { '^(x)\\1$': { type: 'string' }, '^y-': { type: 'number' } },
    });
    expect(schema.patternProperties).toEqual({ '^y-': { type: 'number' } });
    expect(warnings).toEqual([
      '#/test/patternProperties: dropped pattern property "^(x)\\\\1$": RE2, which matches in linear time, cannot run it (invalid escape sequence: \\1)',
    ]);
  });

  it('drops invalid patternProperties keys and keeps valid ones', () => {
    const { schema, warnings } = convert({
      type: 'object',
      patternProperties: { '^x-': { type: 'string' }, '(': { type: 'number' } },
    });
    expect(schema.patternProperties).toEqual({ '^x-': { type: 'string' } });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('dropped pattern property "("');
  });

  it('drops keyword values of the wrong type, with a warning each', () => {
    const { schema, warnings } = convert({
      type: 'string',
      maxLength: '10',
      minLength: -1,
      minimum: 'a',
      multipleOf: 0,
      uniqueItems: 'yes',
      title: 5,
    });
    expect(schema).toEqual({ $schema: JSON_SCHEMA_2020, type: 'string' });
    expect(warnings).toEqual(
      ['maxLength', 'minLength', 'minimum', 'multipleOf', 'uniqueItems', 'title'].map(
        (k) => `#/test: dropped invalid "${k}"`,
      ),
    );
  });

  it('drops unknown types and empty enums', () => {
    const { schema, warnings } = convert({ type: ['string', 'date'], enum: [] });
    expect(schema).toEqual({ $schema: JSON_SCHEMA_2020, type: 'string' });
    expect(warnings).toEqual([
      '#/test: dropped unknown type "date"',
      '#/test: dropped empty or invalid "enum"',
    ]);
  });

  it('de-duplicates types and required names', () => {
    expect(body({ type: ['string', 'string'] })).toEqual({ type: 'string' });
    expect(body({ type: 'object', required: ['a', 'a', 3, 'b'] })).toEqual({
      type: 'object',
      required: ['a', 'b'],
    });
  });

  it('drops empty composition lists', () => {
    expect(body({ type: 'object', allOf: [], anyOf: [] })).toEqual({ type: 'object' });
  });
});

describe('tuples', () => {
  it('turns array-valued items into prefixItems', () => {
    const { schema, converter } = convert({
      type: 'array',
      items: [{ type: 'string' }, { type: 'integer' }],
    });
    expect(schema).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'array',
      prefixItems: [{ type: 'string' }, { type: 'integer' }],
    });
    expect(validate(schema, converter.formats, ['a', 1])).toBe(true);
    expect(validate(schema, converter.formats, [1, 'a'])).toBe(false);
  });
});

describe('readOnly and writeOnly', () => {
  const doc = {
    components: {
      schemas: {
        Id: { type: 'integer', readOnly: true },
        Secret: { type: 'string', writeOnly: true },
        Pet: {
          type: 'object',
          required: ['id', 'name', 'password', 'createdAt', 'extra'],
          properties: {
            id: { $ref: '#/components/schemas/Id' },
            name: { type: 'string' },
            password: { $ref: '#/components/schemas/Secret' },
            createdAt: { type: 'string', format: 'date-time', readOnly: true },
            owner: {
              type: 'object',
              properties: { ownerId: { type: 'string', readOnly: true }, label: { type: 'string' } },
            },
          },
        },
      },
    },
  };
  const pet = { $ref: '#/components/schemas/Pet' };

  it('leaves readOnly properties out of inputs, at every depth and behind $refs', () => {
    const schema = inlineLocalRefs(convert(pet, { doc, direction: 'input' }).schema);
    expect(Object.keys(schema.properties as object)).toEqual(['name', 'password', 'owner']);
    expect((schema.properties as any).owner.properties).toEqual({ label: { type: 'string' } });
    // Required names of dropped properties go too; names without a property stay.
    expect(schema.required).toEqual(['name', 'password', 'extra']);
  });

  it('leaves writeOnly properties out of outputs', () => {
    const schema = inlineLocalRefs(convert(pet, { doc, direction: 'output' }).schema);
    expect(Object.keys(schema.properties as object)).toEqual(['id', 'name', 'createdAt', 'owner']);
    expect((schema.properties as any).owner.properties).toHaveProperty('ownerId');
    expect(schema.required).toEqual(['id', 'name', 'createdAt', 'extra']);
  });

  it('honours readOnly written beside a $ref', () => {
    const schema = body(
      { type: 'object', properties: { a: { $ref: '#/components/schemas/Pet', readOnly: true }, b: {} } },
      { doc },
    );
    expect(schema.properties).toEqual({ b: {} });
  });

  it('keeps the flags as annotations on the properties that stay', () => {
    const { schema } = convert(pet, { doc, direction: 'output' });
    expect((schema.$defs as any).Pet.properties.id).toEqual({ $ref: '#/$defs/Id' });
    expect((schema.$defs as any).Id).toEqual({ type: 'integer', readOnly: true });
  });
});

describe('recursive schemas', () => {
  const doc = {
    components: {
      schemas: {
        Node: {
          type: 'object',
          required: ['name'],
          properties: {
            id: { type: 'integer', readOnly: true },
            name: { type: 'string' },
            children: { type: 'array', items: { $ref: '#/components/schemas/Node' } },
          },
        },
        Tree: { type: 'object', properties: { root: { $ref: '#/components/schemas/Node' } } },
        A: { type: 'object', properties: { b: { $ref: '#/components/schemas/B' } } },
        B: { type: 'object', properties: { a: { $ref: '#/components/schemas/A' } } },
        'Weird Name~With/Chars': {
          type: 'object',
          properties: { self: { $ref: '#/components/schemas/Weird%20Name~0With~1Chars' } },
        },
      },
    },
    definitions: {
      Node: { type: 'object', properties: { next: { $ref: '#/definitions/Node' } } },
    },
  };

  it('puts a self-referencing schema into $defs and refers to it there', () => {
    const { schema, converter } = convert({ $ref: '#/components/schemas/Node' }, { doc });
    expect(schema.$ref).toBe('#/$defs/Node');
    expect(Object.keys(schema.$defs as object)).toEqual(['Node']);
    expect((schema.$defs as any).Node.properties.children.items).toEqual({ $ref: '#/$defs/Node' });
    const tree = { name: 'a', children: [{ name: 'b', children: [{ name: 'c' }] }] };
    expect(validate(schema, converter.formats, tree)).toBe(true);
    expect(validate(schema, converter.formats, { name: 'a', children: [{ children: [] }] })).toBe(false);
  });

  it('puts the non-recursive schema that leads to a recursive one into $defs as well', () => {
    const { schema } = convert({ $ref: '#/components/schemas/Tree' }, { doc });
    expect(schema.$ref).toBe('#/$defs/Tree');
    expect((schema.$defs as any).Tree.properties.root).toEqual({ $ref: '#/$defs/Node' });
    expect(Object.keys(schema.$defs as object)).toEqual(['Node', 'Tree']);
  });

  it('puts both members of a mutual recursion into $defs', () => {
    const { schema } = convert({ $ref: '#/components/schemas/A' }, { doc });
    expect(schema.$ref).toBe('#/$defs/A');
    expect(schema.$defs).toEqual({
      A: { type: 'object', properties: { b: { $ref: '#/$defs/B' } } },
      B: { type: 'object', properties: { a: { $ref: '#/$defs/A' } } },
    });
  });

  it('converts $defs for the direction of the schema (readOnly dropped from input $defs only)', () => {
    const input = convert({ $ref: '#/components/schemas/Node' }, { doc, direction: 'input' }).schema;
    const output = convert({ $ref: '#/components/schemas/Node' }, { doc, direction: 'output' }).schema;
    expect((input.$defs as any).Node.properties).not.toHaveProperty('id');
    expect((output.$defs as any).Node.properties).toHaveProperty('id');
  });

  it('gives $defs safe, unique names', () => {
    const weird = convert({ $ref: '#/components/schemas/Weird%20Name~0With~1Chars' }, { doc }).schema;
    expect(Object.keys(weird.$defs as object)).toEqual(['Weird_20Name_With_Chars']);
    const both = convert(
      { anyOf: [{ $ref: '#/components/schemas/Node' }, { $ref: '#/definitions/Node' }] },
      { doc },
    ).schema;
    expect(Object.keys(both.$defs as object).sort()).toEqual(['Node', 'Node_2']);
  });

  it('adds no $defs to a schema that refers to nothing', () => {
    expect(convert({ type: 'object', properties: { a: {} } }, { doc }).schema).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'object',
      properties: { a: {} },
    });
  });
});

describe('$ref with sibling keywords', () => {
  const doc = { components: { schemas: { Name: { type: 'string', description: 'a name', maxLength: 50 } } } };
  const ref = '#/components/schemas/Name';

  const $defs = { Name: { type: 'string', description: 'a name', maxLength: 50 } };

  it('refers to the target, which sits once in $defs', () => {
    expect(body({ $ref: ref }, { doc })).toEqual({ $ref: '#/$defs/Name', $defs });
  });

  it('OpenAPI 3.0: keeps sibling annotations over the target and ignores sibling constraints', () => {
    const schema = body({ $ref: ref, description: 'the pet name', maxLength: 5, default: 'rex' }, { doc });
    expect(schema).toEqual({ $ref: '#/$defs/Name', description: 'the pet name', default: 'rex', $defs });
    expect(inlineLocalRefs(schema)).toEqual({
      type: 'string',
      description: 'the pet name',
      maxLength: 50,
      default: 'rex',
    });
  });

  it('Swagger 2.0 behaves like OpenAPI 3.0', () => {
    const swaggerDoc = { definitions: { Name: { type: 'string', maxLength: 50 } } };
    const schema = body(
      { $ref: '#/definitions/Name', maxLength: 5 },
      { doc: swaggerDoc, flavour: 'swagger-2.0' },
    );
    expect(schema).toEqual({ $ref: '#/$defs/Name', $defs: { Name: { type: 'string', maxLength: 50 } } });
  });

  it('OpenAPI 3.1: applies sibling constraints too, through allOf', () => {
    const { schema, converter } = convert({ $ref: ref, maxLength: 5 }, { doc, flavour: 'openapi-3.1' });
    expect(schema.allOf).toEqual([{ $ref: '#/$defs/Name' }, { maxLength: 5 }]);
    expect(schema.$defs).toEqual($defs);
    expect(validate(schema, converter.formats, 'abcdef')).toBe(false);
    expect(validate(schema, converter.formats, 'abc')).toBe(true);
  });

  it('OpenAPI 3.1: merges siblings that are only annotations', () => {
    expect(body({ $ref: ref, description: 'override' }, { doc, flavour: 'openapi-3.1' })).toEqual({
      $ref: '#/$defs/Name',
      description: 'override',
      $defs,
    });
  });

  it('keeps annotations beside a recursive $ref', () => {
    const recursive = {
      components: {
        schemas: { L: { type: 'object', properties: { next: { $ref: '#/components/schemas/L' } } } },
      },
    };
    const { schema } = convert({ $ref: '#/components/schemas/L', description: 'a list' }, { doc: recursive });
    expect(schema.$ref).toBe('#/$defs/L');
    expect(schema.description).toBe('a list');
  });

  it('a $ref cycle with no schema in it (A → B → A, S → S) is {} with a warning, not a validator that recurses for ever', () => {
    const doc = {
      components: {
        schemas: {
          A: { $ref: '#/components/schemas/B' },
          B: { $ref: '#/components/schemas/A', description: 'an alias' },
          S: { $ref: '#/components/schemas/S' },
        },
      },
    };
    // convert() compiles the result: before, ajv overflowed the stack on it.
    const { schema, warnings } = convert(
      {
        type: 'object',
        properties: { a: { $ref: '#/components/schemas/A' }, s: { $ref: '#/components/schemas/S' } },
      },
      { doc },
    );
    expect(schema.$defs).toEqual({ A: {}, S: {} });
    expect(warnings).toEqual([
      '#/components/schemas/A: $ref cycle with no schema in it (#/components/schemas/A → #/components/schemas/B → #/components/schemas/A): treated as {} (any value)',
      '#/components/schemas/S: $ref cycle with no schema in it (#/components/schemas/S → #/components/schemas/S): treated as {} (any value)',
    ]);
  });
});

describe('compositions and nested keywords', () => {
  it('converts every subschema', () => {
    const schema = body({
      allOf: [{ type: 'object', properties: { a: { type: 'string', nullable: true } } }],
      anyOf: [{ type: 'integer', example: 1 }],
      not: { type: 'string', format: 'binary' },
      additionalProperties: { type: 'number', minimum: 0, exclusiveMinimum: true },
    });
    expect(schema).toEqual({
      allOf: [{ type: 'object', properties: { a: { type: ['string', 'null'] } } }],
      anyOf: [{ type: 'integer', examples: [1] }],
      not: { type: 'string', contentEncoding: 'base64' },
      additionalProperties: { exclusiveMinimum: 0, type: 'number' },
    });
  });

  it('keeps standard keywords with valid values', () => {
    const raw = {
      title: 'T',
      description: 'D',
      type: 'object',
      minProperties: 1,
      maxProperties: 3,
      dependentRequired: { a: ['b'] },
      const: { a: 1 },
      deprecated: true,
    };
    expect(body(raw)).toEqual(raw);
  });

  it('reads draft 4–7 `dependencies` (Swagger, OpenAPI 3.0) as dependentRequired and dependentSchemas', () => {
    expect(
      body({
        type: 'object',
        dependencies: { card: ['cvv'], iban: { required: ['bic'], properties: { bic: { type: 'string' } } } },
      }),
    ).toEqual({
      type: 'object',
      dependentRequired: { card: ['cvv'] },
      dependentSchemas: { iban: { required: ['bic'], properties: { bic: { type: 'string' } } } },
    });
  });
});
