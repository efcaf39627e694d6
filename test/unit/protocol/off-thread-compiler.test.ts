/**
 * Large schemas compiled on a worker thread (off-thread-compiler.ts, argument-validators.ts): the
 * validator that comes back gives the verdicts and errors of one compiled here, with the same
 * formats (ajv-formats', OpenAPI's numeric ones, annotation-only ones); the event loop runs while
 * it compiles; one schema is compiled once however many ask; a failed worker falls back to here.
 */
import type { ValidateFunction } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import { OFF_THREAD_MIN_CHARS, SchemaCompiler } from '../../../src/protocol/argument-validators.js';
import { OffThreadCompiler } from '../../../src/protocol/off-thread-compiler.js';
import { countTurns } from '../../helpers/event-loop-turns.js';

const offThread = new OffThreadCompiler();
afterAll(() => offThread.close());

/** A schema over OFF_THREAD_MIN_CHARS: many described properties, formats, a $ref and a cycle. */
function largeSchema(): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    when: { type: 'string', format: 'date-time' },
    id: { type: 'string', format: 'uuid' },
    count: { type: 'integer', format: 'int32' },
    ratio: { type: 'number', format: 'float' },
    tag: { type: 'string', format: 'x-company-tag' },
    item: { $ref: '#/$defs/Item' },
  };
  for (let i = 0; i < 400; i++) {
    properties[`field_${i}`] = {
      type: 'string',
      maxLength: 10,
      description: `Field ${i}. ${'Long text. '.repeat(20)}`,
    };
  }
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties,
    required: ['when'],
    additionalProperties: false,
    $defs: {
      Item: {
        type: 'object',
        properties: {
          name: { type: 'string', minLength: 1 },
          children: { type: 'array', items: { $ref: '#/$defs/Item' } },
        },
        required: ['name'],
      },
    },
  };
}

const INPUTS: unknown[] = [
  { when: '2026-11-27T10:00:00Z' },
  { when: 'yesterday' },
  { when: '2026-11-27T10:00:00Z', id: 'not-a-uuid', count: 2 ** 31, ratio: 'x' },
  { when: '2026-11-27T10:00:00Z', id: '0b6a0cf2-7d8e-4a8e-9c59-2f4b8e0f4b11', count: -5, tag: 'anything' },
  { when: '2026-11-27T10:00:00Z', item: { name: 'a', children: [{ name: '' }, { children: [] }] } },
  { when: '2026-11-27T10:00:00Z', field_7: 'far too long for ten', unknown: 1 },
  [],
  null,
];

function verdicts(validate: ValidateFunction): unknown[] {
  return INPUTS.map((input) => ({ valid: validate(input), errors: validate.errors ?? null }));
}

describe('OffThreadCompiler', () => {
  it('gives the verdicts and errors of the same schema compiled here', async () => {
    const schema = largeSchema();
    expect(JSON.stringify(schema).length).toBeGreaterThan(OFF_THREAD_MIN_CHARS);
    const here = createSchemaValidator(['x-company-tag']).compile(schema);
    const { validate, blockedSeconds } = await offThread.compile(schema, ['x-company-tag']);
    expect(verdicts(validate)).toEqual(verdicts(here));
    expect(blockedSeconds).toBeGreaterThan(0);
    // Not vacuous: some inputs pass and some fail, formats among the failures.
    const results = verdicts(here) as { valid: boolean; errors: { keyword: string }[] | null }[];
    expect(results.filter((r) => r.valid)).toHaveLength(2);
    expect(results.flatMap((r) => r.errors ?? []).map((e) => e.keyword)).toEqual(
      expect.arrayContaining([
        'format',
        'required',
        'minLength',
        'maxLength',
        'additionalProperties',
        'type',
      ]),
    );
  });

  it('refuses what ajv refuses (a schema strict mode does not accept)', async () => {
    await expect(offThread.compile({ type: 'object', nonsense: true }, [])).rejects.toThrow(/nonsense/);
  });
});

describe('SchemaCompiler with a worker thread', () => {
  it('compiles a large schema there: the event loop turns meanwhile; then it is there at once', async () => {
    const observed: number[] = [];
    const compiler = new SchemaCompiler(['x-company-tag'], 8_000_000, (s) => observed.push(s), offThread);
    const turns = countTurns();
    const first = compiler.validator(largeSchema());
    const second = compiler.validator(largeSchema());
    expect(first).toBeInstanceOf(Promise);
    const [a, b] = await Promise.all([first, second]);
    expect(turns.stop()).toBeGreaterThan(1);
    expect(a).toBe(b);
    expect(observed).toHaveLength(1); // one compilation for both
    expect(compiler.validator(largeSchema())).toBe(a);
    expect(a({ when: 'yesterday' })).toBe(false);
  });

  it('counts 2.5 times its characters toward the budget (its code shares no definitions)', async () => {
    const schema = largeSchema();
    const twice = 2 * JSON.stringify(schema).length;
    const here = new SchemaCompiler(['x-company-tag'], twice);
    await here.validator(schema);
    expect(here.full).toBe(false);
    const there = new SchemaCompiler(['x-company-tag'], twice, undefined, offThread);
    await there.validator(schema);
    expect(there.full).toBe(true);
  });

  it('a small schema is compiled here, at once', () => {
    const compiler = new SchemaCompiler([], 8_000_000, undefined, offThread);
    const got = compiler.validator({ type: 'object', properties: { n: { type: 'integer' } } });
    expect(typeof got).toBe('function');
  });

  it('when the worker fails, the schema is compiled here', async () => {
    const failing = {
      compile: () => Promise.reject(new Error('worker gone')),
    } as unknown as OffThreadCompiler;
    const compiler = new SchemaCompiler(['x-company-tag'], 8_000_000, undefined, failing);
    const validate = await compiler.validator(largeSchema());
    expect(validate({ when: '2026-11-27T10:00:00Z' })).toBe(true);
    expect(validate({ when: 'yesterday' })).toBe(false);
  });
});
