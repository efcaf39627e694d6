/**
 * Hostile or odd OpenAPI documents at load: nesting deeper than the stack, a very long
 * operationId, `__proto__` as a parameter or property name, a `$ref` to a FIFO or to a file
 * outside the document's directory. Each fails with a
 * UserError naming the document, or loads into capabilities that work.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../src/errors.js';
import { createSchemaValidator } from '../../src/openapi/ajv.js';
import { loadCatalog } from '../../src/openapi/load-catalog.js';
import type { LoadOptions } from '../../src/openapi/load.js';

const LOCAL_ONLY: LoadOptions = { allowRemoteRefs: false, allowHttp: false };
const OK = { '200': { description: 'ok' } };

let tmp = '';
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'aap-audit-load-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

let counter = 0;
/** Writes `text` as a new spec file (own directory) and returns its path. */
function writeSpecText(text: string, name = 'spec.json'): string {
  const dir = join(tmp, `s${counter++}`);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

function openapi(paths: unknown): Record<string, unknown> {
  return { openapi: '3.0.3', info: { title: 'Audit', version: '1' }, paths };
}

/** Settles `promise`: the value, or the error it rejected with. */
async function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

describe('deeply nested documents', () => {
  it('an inline schema nested 2,500 levels deep (a 60 KB document) loads or fails with a UserError, not a stack overflow', async () => {
    const depth = 2500;
    const text = JSON.stringify(
      openapi({
        '/x': {
          get: { operationId: 'x', parameters: [{ name: 'q', in: 'query', schema: 'DEEP' }], responses: OK },
        },
      }),
    ).replace('"DEEP"', '{"type":"array","items":'.repeat(depth) + '{}' + '}'.repeat(depth));
    const file = writeSpecText(text);
    const { error } = await settle(loadCatalog([{ spec: file }], LOCAL_ONLY));
    // Observed: RangeError "Maximum call stack size exceeded" from SchemaConverter.node/keywords/special
    // (src/openapi/schema-convert.ts), which recurse once per schema level.
    if (error !== undefined) {
      expect((error as Error).name, (error as Error).message).not.toBe('RangeError');
      expect(error).toBeInstanceOf(UserError);
    }
  });

  it('a vendor extension nested 20,000 levels deep (never a schema) does not crash loading with a stack overflow', async () => {
    const depth = 20_000;
    const text = JSON.stringify(
      openapi({ '/x': { get: { operationId: 'x', responses: OK, 'x-deep': 'DEEP' } } }),
    ).replace('"DEEP"', '{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
    const file = writeSpecText(text);
    const { error } = await settle(loadCatalog([{ spec: file }], LOCAL_ONLY));
    // Observed: RangeError from directRefs (src/openapi/ref-graph.ts:8-18), which recurses over the
    // whole document, extensions included, while hasOnlyPlainLocalRefs (local-refs.ts) is iterative.
    if (error !== undefined) {
      expect((error as Error).name, (error as Error).message).not.toBe('RangeError');
      expect(error).toBeInstanceOf(UserError);
    }
  });
});

describe('names from the document', () => {
  it('a long all-capitals operationId (60,000 characters) is named (in linear time: names.test.ts)', async () => {
    const file = writeSpecText(
      JSON.stringify(openapi({ '/x': { get: { operationId: 'A'.repeat(60_000) + '1', responses: OK } } })),
    );
    const catalog = await loadCatalog([{ spec: file }], LOCAL_ONLY);
    expect(catalog.capabilities).toHaveLength(1);
  });
});

describe('prototype keys as names', () => {
  it('a query parameter named "__proto__" is a declared argument and its schema compiles', async () => {
    const file = writeSpecText(
      JSON.stringify(
        openapi({
          '/x': {
            get: {
              operationId: 'x',
              parameters: [{ name: '__proto__', in: 'query', required: true, schema: { type: 'string' } }],
              responses: OK,
            },
          },
        }),
      ),
    );
    const catalog = await loadCatalog([{ spec: file }], LOCAL_ONLY);
    const cap = catalog.capabilities[0];
    expect(cap).toBeDefined();
    const schema = cap?.argumentsSchema as { properties: Record<string, unknown>; required?: string[] };
    // The binding has an argument "__proto__" …
    expect(cap?.operation.parameters.map((p) => p.argument)).toEqual(['__proto__']);
    // … but `properties[argument] = …` (src/openapi/operation.ts:66) set the properties object's
    // prototype instead of adding a key: the published input schema lacks the argument while
    // `required` names it, and ajv refuses the schema ("data/properties/type must be object,boolean").
    expect(Object.hasOwn(schema.properties, '__proto__')).toBe(true);
    expect(() => createSchemaValidator().compile(cap?.argumentsSchema ?? {})).not.toThrow();
  });

  it('a body field named "__proto__" keeps its schema: a wrong type for it is refused', async () => {
    const file = writeSpecText(
      JSON.stringify(
        openapi({
          '/x': {
            post: {
              operationId: 'x',
              requestBody: {
                required: true,
                content: {
                  'application/json': {
                    schema: {
                      type: 'object',
                      properties: {
                        name: { type: 'string' },
                        // JSON.parse: an object literal's __proto__ would set the prototype.
                        meta: JSON.parse(
                          '{"type":"object","properties":{"__proto__":{"type":"integer","maximum":5}},"required":["__proto__"]}',
                        ) as unknown,
                      },
                    },
                  },
                },
              },
              responses: OK,
            },
          },
        }),
      ),
    );
    const catalog = await loadCatalog([{ spec: file }], LOCAL_ONLY);
    const cap = catalog.capabilities[0];
    const meta = (cap?.argumentsSchema as { properties: Record<string, { properties: object }> }).properties
      .meta;
    expect(Object.hasOwn(meta?.properties ?? {}, '__proto__')).toBe(true);
    // The schema compiles and its `required` holds; ajv itself never validates a property named
    // __proto__ (it skips the name, against prototype pollution), so its type is not checked.
    const validate = createSchemaValidator().compile(cap?.argumentsSchema ?? {});
    expect(validate(JSON.parse('{"name":"a","meta":{}}'))).toBe(false);
    expect(validate(JSON.parse('{"name":"a","meta":{"__proto__":3}}'))).toBe(true);
  });
});

describe('local $refs', () => {
  /** A document in a directory of its own that refers to `target`, a path relative to it or absolute. */
  function referring(target: string): string {
    return writeSpecText(
      JSON.stringify(
        openapi({ '/a': { get: { operationId: 'a', summary: { $ref: target }, responses: OK } } }),
      ),
    );
  }

  it('a $ref to a FIFO (as to /dev/stdin) is refused, not read: reading would wait for ever', async () => {
    const file = referring('./pipe.yaml');
    execFileSync('mkfifo', [join(dirname(file), 'pipe.yaml')]);
    await expect(loadCatalog([{ spec: file }], LOCAL_ONLY)).rejects.toThrow(/not a regular file/);
  });

  it("reads files in the document's directory and below it", async () => {
    const file = referring('./parts/summary.yaml');
    mkdirSync(join(dirname(file), 'parts'));
    writeFileSync(join(dirname(file), 'parts', 'summary.yaml'), '"Lists things"\n');
    const catalog = await loadCatalog([{ spec: file }], LOCAL_ONLY);
    expect(catalog.capabilities[0]?.description).toContain('Lists things');
  });

  it("refuses a file outside the document's directory (here: a credential), by path, by ../ or by a link", async () => {
    const secretDir = join(tmp, `secret${counter++}`);
    mkdirSync(secretDir);
    const secret = join(secretDir, 'proxy.yaml');
    writeFileSync(secret, 'key: sk-live-0123456789abcdef\n');
    const byPath = referring(`${secret}#/key`);
    const byParent = referring(`../${basename(secretDir)}/proxy.yaml#/key`);
    const byLink = referring('./linked.yaml#/key');
    symlinkSync(secret, join(dirname(byLink), 'linked.yaml'));
    for (const file of [byPath, byParent, byLink]) {
      await expect(loadCatalog([{ spec: file }], LOCAL_ONLY)).rejects.toThrow(
        /outside the document's directory/,
      );
    }
    // The operator may allow it.
    const allowed = await loadCatalog([{ spec: byPath }], { ...LOCAL_ONLY, allowLocalRefsAnywhere: true });
    expect(allowed.capabilities[0]?.description).toContain('sk-live-0123456789abcdef');
  });
});
