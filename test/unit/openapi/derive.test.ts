import { describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors.js';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import { deriveCatalog, deriveCatalogInSlices, type ApiDocument } from '../../../src/openapi/derive.js';
import { JSON_SCHEMA_2020 } from '../../../src/openapi/schema-convert.js';
import type { Capability } from '../../../src/openapi/types.js';
import { buildRequestParts } from '../../../src/upstream/request-parts.js';
import { collectRefs } from '../../helpers/schemas.js';
import { countTurns } from '../../helpers/event-loop-turns.js';

const OK = { '200': { description: 'ok' } };

function json(schema: unknown): Record<string, unknown> {
  return { 'application/json': { schema } };
}

function openapi(
  paths: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { openapi: '3.0.3', info: { title: 'Pets', version: '1.0.0' }, paths, ...extra };
}

function swagger(
  paths: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { swagger: '2.0', info: { title: 'Pets', version: '1.0.0' }, paths, ...extra };
}

function derive(
  doc: unknown,
  options: Omit<ApiDocument, 'doc' | 'source'> = {},
): ReturnType<typeof deriveCatalog> {
  return deriveCatalog([{ source: 'pets.yaml', doc, ...options }]);
}

function names(doc: unknown, options: Omit<ApiDocument, 'doc' | 'source'> = {}): string[] {
  return derive(doc, options).capabilities.map((c) => c.name);
}

/** The only capability of a one-operation document. */
function only(doc: unknown): Capability {
  const { capabilities } = derive(doc);
  expect(capabilities).toHaveLength(1);
  return capabilities[0] as Capability;
}

function byOperation(
  catalog: { capabilities: readonly Capability[] },
  method: string,
  path: string,
): Capability {
  const found = catalog.capabilities.find((c) => c.operation.method === method && c.operation.path === path);
  if (!found) throw new Error(`no capability for ${method} ${path}`);
  return found;
}

/** Fisher–Yates with a seeded generator, so failures reproduce. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let state = seed;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 48271) % 2147483647; // MINSTD: exact in doubles
    const j = state % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('deriving in slices (loads and reloads: the proxy serves meanwhile)', () => {
  const doc = openapi(
    Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [
        `/things${i}/{id}`,
        {
          get: {
            operationId: `getThing${i}`,
            parameters: [{ name: 'id', in: 'path', required: true }],
            responses: OK,
          },
          put: { requestBody: { content: json({ type: 'object' }) }, responses: OK },
        },
      ]),
    ),
  );
  const apis = [
    { source: 'things.yaml', doc, prefix: 'a' },
    { source: 'more.yaml', doc, prefix: 'b' },
  ];

  it('gives exactly the catalog derived in one go', async () => {
    const { catalog: sliced } = await deriveCatalogInSlices(apis, { sliceMs: 0 });
    const whole = deriveCatalog(apis);
    // The catalog's lookups are functions of their own: compare what they are built from.
    for (const key of ['apis', 'capabilities', 'warnings', 'formats'] as const) {
      expect(sliced[key]).toStrictEqual(whole[key]);
    }
    expect(sliced.capabilities.length).toBeGreaterThan(0);
  });

  it('lets the event loop turn between slices: with slices of 0 ms, after every operation', async () => {
    const turns = countTurns();
    let between = 0;
    const { catalog } = await deriveCatalogInSlices(apis, {
      sliceMs: 0,
      betweenSlices: () => {
        between++;
      },
    });
    expect(turns.stop()).toBeGreaterThanOrEqual(159);
    expect(between).toBeGreaterThanOrEqual(159);
    expect(catalog.capabilities).toHaveLength(160);
  });

  describe('consuming the documents (a load that parsed them for this catalog alone)', () => {
    const body = { type: 'object', properties: { n: { type: 'integer' } } };
    const consumable = (): Record<string, unknown> =>
      openapi({
        // Named to come after what they point into: derived last, once the others are.
        '/z/aliased': { $ref: '#/paths/~1target' },
        '/target': { get: { operationId: 'target', responses: OK } },
        '/z/borrows': {
          post: {
            requestBody: {
              content: json({
                $ref: '#/paths/~1lends~1%7Bid%7D/put/requestBody/content/application~1json/schema',
              }),
            },
            responses: OK,
          },
        },
        '/lends/{id}': {
          put: {
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            requestBody: { content: json(body) },
            responses: OK,
          },
        },
        '/plain': {
          get: { responses: { '200': { description: 'ok', content: json(body) } } },
          delete: { responses: OK },
        },
        '/other': { get: { operationId: 'other', responses: OK } },
      });

    it('leaves in each document only the path items a $ref points into, and derives the same catalog', async () => {
      const doc = consumable();
      const { catalog: consumed } = await deriveCatalogInSlices([{ source: 'c.yaml', doc }], {
        consumeDocuments: true,
      });
      const whole = deriveCatalog([{ source: 'c.yaml', doc: consumable() }]);
      for (const key of ['apis', 'capabilities', 'warnings', 'formats'] as const) {
        expect(consumed[key]).toStrictEqual(whole[key]);
      }
      expect(consumed.capabilities).toHaveLength(7);
      expect(Object.keys(doc.paths as object)).toEqual(['/target', '/lends/{id}']);
    });

    it('leaves the documents as they were unless asked', async () => {
      const doc = consumable();
      await deriveCatalogInSlices([{ source: 'c.yaml', doc }], { sliceMs: 0 });
      expect(doc).toStrictEqual(consumable());
    });
  });

  it('derived in one go, nothing else runs meanwhile', () => {
    const turns = countTurns();
    deriveCatalog(apis);
    expect(turns.stop()).toBe(0);
  });
});

describe('capability names', () => {
  it('uses the operationId in snake_case, else method and path', () => {
    const doc = openapi({
      '/pets': { get: { operationId: 'listPets', responses: OK } },
      '/pets/{petId}': {
        get: {
          parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
          responses: OK,
        },
      },
      '/': { get: { responses: OK } },
    });
    expect(names(doc)).toEqual(['get_pets_by_pet_id', 'get_root', 'list_pets']);
  });

  it('prepends the API prefix, snake-cased', () => {
    const doc = openapi({ '/pets': { get: { operationId: 'listPets', responses: OK } } });
    expect(names(doc, { prefix: 'shop' })).toEqual(['shop_list_pets']);
    expect(names(doc, { prefix: 'My-Shop' })).toEqual(['my_shop_list_pets']);
  });

  it('limits long names to 64 characters with a hash', () => {
    const doc = openapi({ '/x': { get: { operationId: 'a'.repeat(80), responses: OK } } });
    const [name] = names(doc, { prefix: 'shop' });
    expect(name).toHaveLength(64);
    expect(name).toMatch(/^shop_a{50}_[0-9a-f]{8}$/);
  });
});

describe('name collisions', () => {
  const colliding = openapi({
    '/b': { get: { operationId: 'listPets', responses: OK } },
    '/a': { get: { operationId: 'listPets', responses: OK } },
    '/c': { post: { operationId: 'list_pets', responses: OK } },
  });

  it('gives the name to the first operation by path and method, and _2, _3 to the others', () => {
    const catalog = derive(colliding);
    expect(byOperation(catalog, 'get', '/a').name).toBe('list_pets');
    expect(byOperation(catalog, 'get', '/b').name).toBe('list_pets_2');
    expect(byOperation(catalog, 'post', '/c').name).toBe('list_pets_3');
  });

  it('warns about every renamed operation', () => {
    expect(derive(colliding).warnings).toEqual([
      'capability name "list_pets" is wanted by GET /a (pets.yaml) and GET /b (pets.yaml); the latter is named "list_pets_2"',
      'capability name "list_pets" is wanted by GET /a (pets.yaml) and POST /c (pets.yaml); the latter is named "list_pets_3"',
    ]);
  });

  it('orders operations of one path by method name', () => {
    const doc = openapi({
      '/pets': {
        post: { operationId: 'pets', responses: OK },
        get: { operationId: 'pets', responses: OK },
        delete: { operationId: 'pets', responses: OK },
      },
    });
    const catalog = derive(doc);
    expect(catalog.capabilities.map((c) => [c.name, c.operation.method])).toEqual([
      ['pets', 'delete'],
      ['pets_2', 'get'],
      ['pets_3', 'post'],
    ]);
  });

  it('skips suffixed names that other operations want for themselves', () => {
    const doc = openapi({
      '/a': { get: { operationId: 'x', responses: OK } },
      '/b': { get: { operationId: 'x', responses: OK } },
      '/c': { get: { operationId: 'x_2', responses: OK } },
      '/d': { get: { operationId: 'x_2', responses: OK } },
    });
    const catalog = derive(doc);
    expect(byOperation(catalog, 'get', '/a').name).toBe('x');
    expect(byOperation(catalog, 'get', '/c').name).toBe('x_2');
    expect(byOperation(catalog, 'get', '/d').name).toBe('x_2_2');
    expect(byOperation(catalog, 'get', '/b').name).toBe('x_3');
  });

  it('orders APIs by configuration order before path', () => {
    const first = openapi({ '/zzz': { get: { operationId: 'ping', responses: OK } } });
    const second = openapi({ '/aaa': { get: { operationId: 'ping', responses: OK } } });
    const catalog = deriveCatalog([
      { source: 'first.yaml', doc: first },
      { source: 'second.yaml', doc: second },
    ]);
    expect(catalog.capabilities.map((c) => [c.name, c.operation.apiId])).toEqual([
      ['ping', 'pets'],
      ['ping_2', 'pets_2'],
    ]);
    expect(catalog.warnings).toEqual([
      'capability name "ping" is wanted by GET /zzz (first.yaml) and GET /aaa (second.yaml); the latter is named "ping_2"',
    ]);
  });

  it('keeps names unique within 64 characters when long names collide', () => {
    const long = 'op'.repeat(40);
    const doc = openapi({
      '/a': { get: { operationId: long, responses: OK } },
      '/b': { get: { operationId: long, responses: OK } },
    });
    const result = names(doc);
    expect(new Set(result).size).toBe(2);
    for (const name of result) expect(name.length).toBeLessThanOrEqual(64);
  });
});

describe('independence from document order', () => {
  const schemas = {
    Node: {
      type: 'object',
      properties: { name: { type: 'string' }, next: { $ref: '#/components/schemas/Node' } },
    },
    Pet: { type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '(' } } },
  };
  const paths: Record<string, unknown> = {
    '/pets': {
      get: {
        operationId: 'listPets',
        responses: { '200': { description: 'ok', content: json({ type: 'array' }) } },
      },
      post: {
        operationId: 'createPet',
        requestBody: { content: json({ $ref: '#/components/schemas/Pet' }) },
        responses: OK,
      },
    },
    '/pets/{petId}': {
      get: {
        operationId: 'getPet',
        responses: { '200': { description: 'ok', content: json({ $ref: '#/components/schemas/Node' }) } },
      },
      put: { operationId: 'listPets', responses: OK },
      delete: { responses: OK },
    },
    '/dogs': {
      get: { operationId: 'listPets', responses: OK },
      post: { operationId: 'create_pet', responses: OK },
    },
    '/cats/{id}': {
      get: { operationId: 'getPet', parameters: [{ name: 'undeclared', in: 'path' }], responses: OK },
    },
    '/nodes': {
      post: { requestBody: { content: json({ $ref: '#/components/schemas/Node' }) }, responses: OK },
    },
    '/': { get: { responses: OK } },
  };

  function snapshot(pathOrder: string[], methodSeed?: number): string {
    const reordered: Record<string, unknown> = {};
    for (const path of pathOrder) {
      const item = paths[path] as Record<string, unknown>;
      const keys = methodSeed === undefined ? Object.keys(item) : shuffled(Object.keys(item), methodSeed);
      reordered[path] = Object.fromEntries(keys.map((k) => [k, item[k]]));
    }
    const catalog = derive(openapi(reordered, { components: { schemas } }));
    return JSON.stringify({ capabilities: catalog.capabilities, warnings: catalog.warnings });
  }

  it('derives the same catalog, names and warnings for any order of paths and methods', () => {
    const original = snapshot(Object.keys(paths));
    const parsed = JSON.parse(original) as { capabilities: { name: string }[]; warnings: string[] };
    // The fixture does exercise collisions and converter warnings.
    expect(parsed.capabilities.map((c) => c.name)).toContain('list_pets_3');
    expect(parsed.warnings.length).toBeGreaterThan(3);
    const orders = new Set<string>();
    for (let seed = 1; seed <= 12; seed++) {
      const order = shuffled(Object.keys(paths), seed);
      orders.add(order.join(' '));
      expect(snapshot(order, seed)).toBe(original);
    }
    expect(orders.size).toBeGreaterThan(6); // the shuffles really differ
    expect(snapshot([...Object.keys(paths)].reverse())).toBe(original);
  });
});

describe('x-agent-auth-name', () => {
  it('overrides the derived name verbatim', () => {
    const doc = openapi({
      '/pets': { get: { operationId: 'listPets', 'x-agent-auth-name': 'pets_all', responses: OK } },
    });
    expect(names(doc)).toEqual(['pets_all']);
  });

  it('is prefixed like any other name', () => {
    const doc = openapi({ '/pets': { get: { 'x-agent-auth-name': 'pets_all', responses: OK } } });
    expect(names(doc, { prefix: 'shop' })).toEqual(['shop_pets_all']);
  });

  it('wins over a derived name that wants the same name', () => {
    const doc = openapi({
      '/a': { get: { operationId: 'listPets', responses: OK } },
      '/b': { get: { 'x-agent-auth-name': 'list_pets', responses: OK } },
    });
    const catalog = derive(doc);
    expect(byOperation(catalog, 'get', '/b').name).toBe('list_pets');
    expect(byOperation(catalog, 'get', '/a').name).toBe('list_pets_2');
    expect(catalog.warnings).toHaveLength(1);
  });

  it.each([['List-Pets'], [''], ['a'.repeat(65)], [42], [null], [['list_pets']]])(
    'refuses the invalid name %j with a UserError naming where it stands',
    (value) => {
      const doc = openapi({ '/pets': { get: { 'x-agent-auth-name': value, responses: OK } } });
      expect(() => derive(doc)).toThrow(UserError);
      expect(() => derive(doc)).toThrow(
        `pets.yaml: #/paths/~1pets/get/x-agent-auth-name: ${JSON.stringify(value)} is not a valid capability name`,
      );
    },
  );

  it('refuses a name two operations claim', () => {
    const doc = openapi({
      '/a': { get: { 'x-agent-auth-name': 'same', responses: OK } },
      '/b': { post: { 'x-agent-auth-name': 'same', responses: OK } },
    });
    expect(() => derive(doc)).toThrow(UserError);
    expect(() => derive(doc)).toThrow(
      'x-agent-auth-name "same" is used by both GET /a (pets.yaml) and POST /b (pets.yaml); names must be unique',
    );
  });

  it('refuses a name claimed in two APIs, unless their prefixes tell them apart', () => {
    const doc = openapi({ '/a': { get: { 'x-agent-auth-name': 'same', responses: OK } } });
    expect(() =>
      deriveCatalog([
        { source: 'one.yaml', doc },
        { source: 'two.yaml', doc },
      ]),
    ).toThrow(UserError);
    const catalog = deriveCatalog([
      { source: 'one.yaml', doc, prefix: 'one' },
      { source: 'two.yaml', doc, prefix: 'two' },
    ]);
    expect(catalog.capabilities.map((c) => c.name)).toEqual(['one_same', 'two_same']);
  });

  it('is checked only on selected operations', () => {
    const doc = openapi({
      '/a': { get: { operationId: 'a', responses: OK } },
      '/b': { get: { operationId: 'b', 'x-agent-auth-name': 'Not Valid', responses: OK } },
    });
    expect(names(doc, { exclude: [{ operation_ids: ['b'] }] })).toEqual(['a']);
  });
});

describe('APIs', () => {
  it('takes the API id from the title in snake_case, making duplicates unique, or from the config', () => {
    const doc = openapi({ '/a': { get: { responses: OK } } }, { info: { title: 'Pet Store', version: '2' } });
    const catalog = deriveCatalog([
      { source: 'one.yaml', doc },
      { source: 'two.yaml', doc },
      { source: 'three.yaml', doc, id: 'custom' },
    ]);
    expect(catalog.apis.map((a) => a.id)).toEqual(['pet_store', 'pet_store_2', 'custom']);
    expect(catalog.api('pet_store_2')?.source).toBe('two.yaml');
    expect(catalog.apis[0]).toMatchObject({ title: 'Pet Store', version: '2', flavour: 'openapi-3.0' });
  });

  it('records the configured upstream and the security schemes', () => {
    const doc = openapi(
      {},
      {
        components: {
          securitySchemes: {
            key: { type: 'apiKey', in: 'header', name: 'X-Key' },
            b: { type: 'http', scheme: 'Bearer' },
          },
        },
      },
    );
    const [api] = derive(doc, { upstream: 'https://internal.example' }).apis;
    expect(api?.upstream).toBe('https://internal.example');
    expect(api?.securitySchemes).toEqual({
      key: { type: 'apiKey', in: 'header', name: 'X-Key' },
      b: { type: 'http', scheme: 'bearer' },
    });
  });
});

describe('input: parameters', () => {
  it('makes each parameter a property, with additionalProperties: false at the top', () => {
    const cap = only(
      openapi({
        '/pets': {
          get: {
            parameters: [
              {
                name: 'limit',
                in: 'query',
                required: true,
                description: 'How many',
                schema: { type: 'integer', maximum: 100 },
              },
              { name: 'tag', in: 'query', schema: { type: 'string' }, example: 'dog', deprecated: true },
              { name: 'X-Request-Id', in: 'header', schema: { type: 'string' } },
              { name: 'session', in: 'cookie', schema: { type: 'string' } },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'object',
      properties: {
        limit: { type: 'integer', maximum: 100, description: 'How many' },
        tag: { type: 'string', deprecated: true, examples: ['dog'] },
        'X-Request-Id': { type: 'string' },
        session: { type: 'string' },
      },
      required: ['limit'],
      additionalProperties: false,
    });
    expect(cap.argumentsSchema).toBe(cap.input);
  });

  it("leaves a parameter's example over 8 KiB out of its schema, with a warning naming it", () => {
    const big = 'x'.repeat(8 * 1024);
    const catalog = derive(
      openapi({
        '/pets': {
          get: {
            parameters: [
              { name: 'q', in: 'query', schema: { type: 'string' }, example: big },
              { name: 'tag', in: 'query', schema: { type: 'string' }, example: 'dog' },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(JSON.parse(JSON.stringify(catalog.capabilities[0]?.input?.properties))).toEqual({
      q: { type: 'string' },
      tag: { type: 'string', examples: ['dog'] },
    });
    expect(catalog.warnings).toEqual([
      expect.stringMatching(
        /#\/paths\/~1pets\/get\/parameters\/0\/example: left out an example of 9 KiB: capability schemas carry examples of up to 8 KiB$/,
      ),
    ]);
  });

  it('has no input (but an arguments schema that accepts only {}) for an operation without arguments', () => {
    const cap = only(openapi({ '/ping': { get: { responses: OK } } }));
    expect(cap.input).toBeUndefined();
    expect(cap.argumentsSchema).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'object',
      properties: {},
      additionalProperties: false,
    });
    const validate = createSchemaValidator().compile(cap.argumentsSchema);
    expect(validate({})).toBe(true);
    expect(validate({ anything: 1 })).toBe(false);
  });

  it('always requires path parameters, whatever the document says', () => {
    const cap = only(
      openapi({
        '/pets/{petId}': {
          get: {
            parameters: [{ name: 'petId', in: 'path', required: false, schema: { type: 'integer' } }],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.required).toEqual(['petId']);
    expect(cap.operation.parameters[0]?.required).toBe(true);
  });

  it('adds a path template parameter the document does not declare as a required string, with a warning', () => {
    const catalog = derive(openapi({ '/pets/{petId}': { get: { responses: OK } } }));
    const cap = catalog.capabilities[0]!;
    expect(cap.input?.properties).toEqual({ petId: { type: 'string' } });
    expect(cap.input?.required).toEqual(['petId']);
    expect(cap.operation.parameters).toEqual([
      {
        argument: 'petId',
        in: 'path',
        name: 'petId',
        required: true,
        style: 'simple',
        explode: false,
        allowReserved: false,
      },
    ]);
    expect(catalog.warnings).toEqual([
      'pets.yaml: #/paths/~1pets~1{petId}/get: path parameter "petId" is not declared; added as a required string',
    ]);
  });

  it('ignores a declared path parameter that the template lacks, with a warning', () => {
    const catalog = derive(
      openapi({
        '/pets': {
          get: {
            parameters: [{ name: 'ghost', in: 'path', required: true, schema: { type: 'string' } }],
            responses: OK,
          },
        },
      }),
    );
    expect(catalog.capabilities[0]?.input).toBeUndefined();
    expect(catalog.warnings).toEqual([
      'pets.yaml: #/paths/~1pets/get/parameters/0: path parameter "ghost" is not in the path template; ignored',
    ]);
  });

  it('merges path-level parameters with operation-level ones, the operation winning', () => {
    const cap = only(
      openapi({
        '/pets/{petId}': {
          parameters: [
            { name: 'petId', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'verbose', in: 'query', schema: { type: 'boolean' } },
          ],
          get: {
            parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer' } }],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.properties).toEqual({ petId: { type: 'integer' }, verbose: { type: 'boolean' } });
  });

  it('renames the later of two parameters with one name, in path, query, header, cookie order', () => {
    const catalog = derive(
      openapi({
        '/pets/{id}': {
          get: {
            parameters: [
              { name: 'id', in: 'cookie', schema: { type: 'string' } },
              { name: 'id', in: 'query', schema: { type: 'boolean' } },
              { name: 'id', in: 'path', required: true, schema: { type: 'integer' } },
            ],
            responses: OK,
          },
        },
      }),
    );
    const cap = catalog.capabilities[0]!;
    expect(cap.input?.properties).toEqual({
      id: { type: 'integer' },
      query_id: { type: 'boolean' },
      cookie_id: { type: 'string' },
    });
    expect(cap.operation.parameters.map((p) => [p.argument, p.in, p.name])).toEqual([
      ['id', 'path', 'id'],
      ['query_id', 'query', 'id'],
      ['cookie_id', 'cookie', 'id'],
    ]);
    expect(catalog.warnings).toEqual([
      'pets.yaml: #/paths/~1pets~1{id}/get/parameters/1: query parameter "id" clashes with another argument; agents pass it as "query_id"',
      'pets.yaml: #/paths/~1pets~1{id}/get/parameters/0: cookie parameter "id" clashes with another argument; agents pass it as "cookie_id"',
    ]);
  });

  it('never gives two parameters the same argument, even when the renamed one is taken', () => {
    const cap = only(
      openapi({
        '/pets/{id}': {
          get: {
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'integer' } },
              { name: 'query_id', in: 'query', schema: { type: 'boolean' } },
              { name: 'id', in: 'query', schema: { type: 'string' } },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.properties).toEqual({
      id: { type: 'integer' },
      query_id: { type: 'boolean' },
      query_id_2: { type: 'string' },
    });
    const args = cap.operation.parameters.map((p) => p.argument);
    expect(new Set(args).size).toBe(args.length);
  });
});

describe('input: owned headers and credentials', () => {
  const schemes = {
    components: {
      securitySchemes: {
        headerKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        queryKey: { type: 'apiKey', in: 'query', name: 'api_key' },
        cookieKey: { type: 'apiKey', in: 'cookie', name: 'sid' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
  };
  const param = (name: string, location: string): Record<string, unknown> => ({
    name,
    in: location,
    schema: { type: 'string' },
  });

  it('leaves out headers the proxy owns, in any case', () => {
    const cap = only(
      openapi({
        '/x': {
          get: {
            parameters: [
              param('Authorization', 'header'),
              param('content-type', 'header'),
              param('ACCEPT', 'header'),
              param('Cookie', 'header'),
              param('Proxy-Authorization', 'header'),
              param('Content-Length', 'header'),
              param('Host', 'header'),
              param('Connection', 'header'),
              param('Transfer-Encoding', 'header'),
              param('X-Kept', 'header'),
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(Object.keys(cap.input?.properties as object)).toEqual(['X-Kept']);
    expect(cap.operation.parameters.map((p) => p.name)).toEqual(['X-Kept']);
  });

  // Hop-by-hop headers (RFC 9110 §7.6.1) and the method overrides frameworks route by (a POST read
  // as a blocked DELETE) included.
  it.each([
    'Authorization',
    'Proxy-Authorization',
    'Content-Type',
    'Content-Length',
    'Accept',
    'Cookie',
    'Host',
    'Connection',
    'Keep-Alive',
    'Proxy-Connection',
    'TE',
    'Trailer',
    'Transfer-Encoding',
    'Upgrade',
    'X-HTTP-Method-Override',
    'X-HTTP-Method',
    'X-Method-Override',
  ])('leaves out the owned header %s', (name) => {
    const cap = only(
      openapi({
        '/x': { post: { parameters: [param(name, 'header'), param('X-Kept', 'header')], responses: OK } },
      }),
    );
    expect(Object.keys(cap.input?.properties as object)).toEqual(['X-Kept']);
    expect(cap.operation.parameters.map((p) => p.name)).toEqual(['X-Kept']);
  });

  it('owns those names only as headers', () => {
    const cap = only(openapi({ '/x': { get: { parameters: [param('accept', 'query')], responses: OK } } }));
    expect(Object.keys(cap.input?.properties as object)).toEqual(['accept']);
  });

  it('leaves out parameters that carry apiKey credentials', () => {
    const cap = only(
      openapi(
        {
          '/x': {
            get: {
              parameters: [
                param('x-api-key', 'header'),
                param('api_key', 'query'),
                param('sid', 'cookie'),
                param('api_key', 'header'),
                param('token', 'query'),
              ],
              responses: OK,
            },
          },
        },
        schemes,
      ),
    );
    // An apiKey is matched by location and name: `api_key` as a header is an ordinary argument.
    expect(Object.keys(cap.input?.properties as object)).toEqual(['token', 'api_key']);
    expect(cap.operation.parameters.map((p) => [p.in, p.name])).toEqual([
      ['query', 'token'],
      ['header', 'api_key'],
    ]);
  });

  it('issue 10 class 12: leaves out a credential parameter in any spelling a server reads as its name', () => {
    const cap = only(
      openapi(
        {
          '/x': {
            get: {
              parameters: [
                param('X_Api_Key', 'header'),
                param('API_KEY', 'query'),
                param('api%5Fkey', 'query'),
                param(' api_key ', 'query'),
                param('api_key[]', 'query'),
                param('SID', 'cookie'),
                param('apikey', 'query'),
              ],
              responses: OK,
            },
          },
        },
        schemes,
      ),
    );
    expect(Object.keys(cap.input?.properties as object)).toEqual(['apikey']);
  });

  it('leaves out Swagger 2.0 apiKey parameters from securityDefinitions', () => {
    const doc = swagger(
      {
        '/x': {
          get: {
            parameters: [
              { name: 'key', in: 'query', type: 'string' },
              { name: 'q', in: 'query', type: 'string' },
            ],
            responses: OK,
          },
        },
      },
      { securityDefinitions: { k: { type: 'apiKey', in: 'query', name: 'key' } } },
    );
    expect(Object.keys(only(doc).input?.properties as object)).toEqual(['q']);
  });
});

describe('input: request bodies', () => {
  const pet = {
    type: 'object',
    required: ['name'],
    properties: {
      id: { type: 'integer', readOnly: true },
      name: { type: 'string' },
      tag: { type: 'string' },
    },
  };

  it('flattens an object body into top-level arguments, without readOnly fields', () => {
    const cap = only(
      openapi({
        '/pets/{petId}': {
          put: {
            parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer' } }],
            requestBody: { required: true, content: json(pet) },
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.properties).toEqual({
      petId: { type: 'integer' },
      name: { type: 'string' },
      tag: { type: 'string' },
    });
    expect(cap.input?.required).toEqual(['petId', 'name']);
    expect(cap.operation.body).toEqual({
      mediaTypes: ['application/json'],
      mediaType: 'application/json',
      required: true,
      encoding: {},
      mode: 'flattened',
      fields: ['name', 'tag'],
      binaryFields: [],
    });
  });

  it("requires a flattened body's required fields even when the body is optional", () => {
    const cap = only(openapi({ '/pets': { post: { requestBody: { content: json(pet) }, responses: OK } } }));
    expect(cap.operation.body?.required).toBe(false);
    expect(cap.input?.required).toEqual(['name']);
  });

  it('flattens an object body that forbids extra keys', () => {
    const cap = only(
      openapi({
        '/pets': {
          post: { requestBody: { content: json({ ...pet, additionalProperties: false }) }, responses: OK },
        },
      }),
    );
    expect(cap.operation.body?.mode).toBe('flattened');
  });

  it("keeps a flattened body's object-level rules: counts on the binding, dependentRequired on the input", () => {
    const payment = {
      type: 'object',
      minProperties: 1,
      maxProperties: 2,
      dependentRequired: { card: ['cvv'] },
      properties: { card: { type: 'string' }, cvv: { type: 'string' }, iban: { type: 'string' } },
    };
    const cap = only(
      openapi({
        '/pay': { post: { requestBody: { required: true, content: json(payment) }, responses: OK } },
      }),
    );
    expect(cap.operation.body).toMatchObject({ mode: 'flattened', fieldCount: { min: 1, max: 2 } });
    expect(cap.input?.dependentRequired).toEqual({ card: ['cvv'] });
    const validate = createSchemaValidator().compile(cap.argumentsSchema);
    expect(validate({ card: '4111' })).toBe(false);
    expect(validate({ card: '4111', cvv: '123' })).toBe(true);
    // Swagger and 3.0 spell it `dependencies`.
    const old = only(
      openapi({
        '/pay': {
          post: {
            requestBody: {
              content: json({ ...payment, dependentRequired: undefined, dependencies: { card: ['cvv'] } }),
            },
            responses: OK,
          },
        },
      }),
    );
    expect(old.input?.dependentRequired).toEqual({ card: ['cvv'] });
  });

  it('keeps a body whole that says something of the object as a whole its fields could not carry', () => {
    for (const rule of [
      { propertyNames: { pattern: '^[a-z]+$' } },
      { enum: [{ a: 'x' }] },
      { const: { a: 'x' } },
      { dependencies: { a: { required: ['b'] } } },
    ]) {
      const schema = {
        type: 'object',
        properties: { a: { type: 'string' }, b: { type: 'string' } },
        ...rule,
      };
      const cap = only(
        openapi({ '/x': { post: { requestBody: { content: json(schema) }, responses: OK } } }),
      );
      expect(cap.operation.body?.mode).toBe('wrapped');
    }
  });

  it('puts the whole body under `body` when a field has the name of a parameter', () => {
    const cap = only(
      openapi({
        '/pets': {
          post: {
            parameters: [{ name: 'name', in: 'query', schema: { type: 'string' } }],
            requestBody: { required: true, content: json(pet) },
            responses: OK,
          },
        },
      }),
    );
    expect(Object.keys(cap.input?.properties as object)).toEqual(['name', 'body']);
    expect((cap.input?.properties as any).body.properties).toEqual({
      name: { type: 'string' },
      tag: { type: 'string' },
    });
    expect(cap.input?.required).toEqual(['body']);
    expect(cap.operation.body).toMatchObject({ mode: 'wrapped', argument: 'body', fields: ['body'] });
  });

  it('uses request_body when a parameter is already called body', () => {
    const cap = only(
      openapi({
        '/pets': {
          post: {
            parameters: [{ name: 'body', in: 'query', schema: { type: 'string' } }],
            requestBody: { content: json({ type: 'array' }) },
            responses: OK,
          },
        },
      }),
    );
    expect(cap.operation.body).toMatchObject({ mode: 'wrapped', argument: 'request_body' });
    expect(Object.keys(cap.input?.properties as object)).toEqual(['body', 'request_body']);
  });

  it.each([
    ['an array', { type: 'array', items: { type: 'string' } }],
    ['a string', { type: 'string' }],
    [
      'an object with extra keys',
      { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true },
    ],
    [
      'an object with typed extra keys',
      { type: 'object', properties: { a: {} }, additionalProperties: { type: 'string' } },
    ],
    ['a nullable object', { type: 'object', nullable: true, properties: { a: { type: 'string' } } }],
    ['a composition', { allOf: [{ type: 'object', properties: { a: { type: 'string' } } }] }],
    ['an object without properties', { type: 'object' }],
  ])('puts %s body under `body`', (_label, schema) => {
    const cap = only(
      openapi({ '/x': { post: { requestBody: { required: true, content: json(schema) }, responses: OK } } }),
    );
    expect(Object.keys(cap.input?.properties as object)).toEqual(['body']);
    expect(cap.input?.required).toEqual(['body']);
    expect(cap.operation.body?.mode).toBe('wrapped');
  });

  it('does not require a wrapped body the document does not require', () => {
    const cap = only(
      openapi({ '/x': { post: { requestBody: { content: json({ type: 'array' }) }, responses: OK } } }),
    );
    expect(cap.input).not.toHaveProperty('required');
  });

  it('prefers JSON, then multipart, then form, then text, and keeps them all for execution', () => {
    const cap = only(
      openapi({
        '/x': {
          post: {
            requestBody: {
              content: {
                'text/plain': { schema: { type: 'string' } },
                'application/x-www-form-urlencoded': { schema: pet },
                'multipart/form-data': { schema: pet },
                'application/merge-patch+json': { schema: pet },
              },
            },
            responses: OK,
          },
        },
      }),
    );
    expect(cap.operation.body?.mediaTypes).toEqual([
      'application/merge-patch+json',
      'multipart/form-data',
      'application/x-www-form-urlencoded',
      'text/plain',
    ]);
    expect(cap.operation.body?.mediaType).toBe('application/merge-patch+json');
  });

  it('flattens multipart bodies with binary parts as base64 strings and keeps their encoding', () => {
    const cap = only(
      openapi({
        '/pets/{petId}/photo': {
          post: {
            parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer' } }],
            requestBody: {
              required: true,
              content: {
                'multipart/form-data': {
                  schema: {
                    type: 'object',
                    required: ['file'],
                    properties: {
                      file: { type: 'string', format: 'binary' },
                      thumbnails: { type: 'array', items: { type: 'string', format: 'binary' } },
                      meta: { type: 'object', properties: { caption: { type: 'string' } } },
                    },
                  },
                  encoding: {
                    meta: { contentType: 'application/json' },
                    thumbnails: { style: 'form', explode: true },
                    ignored: 'not an object',
                  },
                },
              },
            },
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.properties).toMatchObject({
      file: { type: 'string', contentEncoding: 'base64' },
      thumbnails: { type: 'array', items: { type: 'string', contentEncoding: 'base64' } },
    });
    expect(cap.input?.required).toEqual(['petId', 'file']);
    expect(cap.operation.body).toEqual({
      mediaTypes: ['multipart/form-data'],
      mediaType: 'multipart/form-data',
      required: true,
      encoding: { meta: { contentType: 'application/json' }, thumbnails: { style: 'form', explode: true } },
      mode: 'flattened',
      fields: ['file', 'thumbnails', 'meta'],
      binaryFields: ['file', 'thumbnails'],
    });
  });

  it('flattens url-encoded form bodies', () => {
    const cap = only(
      openapi({
        '/login': {
          post: {
            requestBody: { content: { 'application/x-www-form-urlencoded': { schema: pet } } },
            responses: OK,
          },
        },
      }),
    );
    expect(cap.operation.body).toMatchObject({
      mediaType: 'application/x-www-form-urlencoded',
      mode: 'flattened',
    });
  });

  it('takes a body without a schema as base64 bytes, text or any JSON, by media type', () => {
    const body = (mediaType: string): Capability =>
      only(openapi({ '/x': { put: { requestBody: { content: { [mediaType]: {} } }, responses: OK } } }));
    const raw = body('application/octet-stream');
    expect((raw.input?.properties as any).body).toEqual({ type: 'string', contentEncoding: 'base64' });
    expect(raw.operation.body).toMatchObject({ mode: 'wrapped', binaryFields: ['body'] });
    expect((body('text/csv').input?.properties as any).body).toEqual({ type: 'string' });
    expect((body('application/json').input?.properties as any).body).toEqual({});
  });

  it('reads a requestBody on GET like on any other method', () => {
    const cap = only(openapi({ '/search': { get: { requestBody: { content: json(pet) }, responses: OK } } }));
    expect(cap.operation.body?.mode).toBe('flattened');
  });
});

describe('Swagger 2.0', () => {
  const base = {
    host: 'api.example.com',
    basePath: '/v1',
    schemes: ['https', 'http'],
    consumes: ['application/json'],
    definitions: {
      Pet: {
        type: 'object',
        required: ['name'],
        properties: { id: { type: 'integer', readOnly: true }, name: { type: 'string', 'x-nullable': true } },
      },
    },
  };

  it('takes the in: body parameter as the request body, with consumes as media types', () => {
    const cap = only(
      swagger(
        {
          '/pets': {
            post: {
              consumes: ['application/json', 'application/xml'],
              parameters: [
                { name: 'pet', in: 'body', required: true, schema: { $ref: '#/definitions/Pet' } },
              ],
              responses: OK,
            },
          },
        },
        base,
      ),
    );
    expect(cap.input?.properties).toEqual({ name: { type: ['string', 'null'] } });
    expect(cap.input?.required).toEqual(['name']);
    expect(cap.operation.body).toMatchObject({
      mediaTypes: ['application/json', 'application/xml'],
      mediaType: 'application/json',
      required: true,
      mode: 'flattened',
    });
    expect(cap.operation.parameters).toEqual([]);
  });

  it('turns formData parameters into a form body; type: file makes it multipart with a base64 field', () => {
    const catalog = derive(
      swagger(
        {
          '/pets/{petId}/photo': {
            post: {
              parameters: [
                { name: 'petId', in: 'path', required: true, type: 'integer' },
                { name: 'file', in: 'formData', type: 'file', required: true, description: 'The photo' },
                { name: 'caption', in: 'formData', type: 'string', maxLength: 80 },
              ],
              responses: OK,
            },
          },
          '/login': {
            post: {
              parameters: [{ name: 'user', in: 'formData', type: 'string', required: true }],
              responses: OK,
            },
          },
        },
        base,
      ),
    );
    const photo = byOperation(catalog, 'post', '/pets/{petId}/photo');
    expect(photo.input?.properties).toEqual({
      petId: { type: 'integer' },
      file: { type: 'string', contentEncoding: 'base64', description: 'The photo' },
      caption: { type: 'string', maxLength: 80 },
    });
    expect(photo.input?.required).toEqual(['petId', 'file']);
    expect(photo.operation.body).toMatchObject({
      mediaType: 'multipart/form-data',
      mode: 'flattened',
      fields: ['file', 'caption'],
      binaryFields: ['file'],
      required: true,
    });
    const login = byOperation(catalog, 'post', '/login');
    expect(login.operation.body).toMatchObject({
      mediaTypes: ['application/x-www-form-urlencoded'],
      fields: ['user'],
    });
  });

  it('sends formData arrays as their collectionFormat says (csv by default), in a url-encoded form', () => {
    const cap = only(
      swagger(
        {
          '/f': {
            post: {
              consumes: ['application/x-www-form-urlencoded'],
              parameters: [
                { name: 'ids', in: 'formData', type: 'array', items: { type: 'string' } },
                {
                  name: 'piped',
                  in: 'formData',
                  type: 'array',
                  collectionFormat: 'pipes',
                  items: { type: 'string' },
                },
                {
                  name: 'many',
                  in: 'formData',
                  type: 'array',
                  collectionFormat: 'multi',
                  items: { type: 'string' },
                },
              ],
              responses: OK,
            },
          },
        },
        base,
      ),
    );
    const sent = buildRequestParts(cap.operation, { ids: ['a', 'b'], piped: ['c', 'd'], many: ['x', 'y'] });
    expect(sent.body?.bytes.toString()).toBe('ids=a,b&piped=c%7Cd&many=x&many=y');
  });

  it('uses a declared form media type for formData', () => {
    const cap = only(
      swagger(
        {
          '/x': {
            post: {
              consumes: ['application/json', 'multipart/form-data'],
              parameters: [{ name: 'a', in: 'formData', type: 'string' }],
              responses: OK,
            },
          },
        },
        base,
      ),
    );
    expect(cap.operation.body?.mediaTypes).toEqual(['multipart/form-data']);
    expect(cap.operation.body?.required).toBe(false);
  });

  it.each([
    ['csv', 'form', false],
    [undefined, 'form', false],
    ['multi', 'form', true],
    ['ssv', 'spaceDelimited', false],
    ['pipes', 'pipeDelimited', false],
    ['tsv', 'tabDelimited', false],
  ])('maps collectionFormat %s to style %s, explode %s', (collectionFormat, style, explode) => {
    const cap = only(
      swagger({
        '/pets': {
          get: {
            parameters: [
              {
                name: 'tags',
                in: 'query',
                type: 'array',
                items: { type: 'string' },
                ...(collectionFormat ? { collectionFormat } : {}),
              },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.operation.parameters[0]).toMatchObject({ style, explode });
    expect(cap.input?.properties).toEqual({ tags: { type: 'array', items: { type: 'string' } } });
  });

  it('keeps csv path and header parameters in the simple style', () => {
    const cap = only(
      swagger({
        '/pets/{ids}': {
          get: {
            parameters: [
              { name: 'ids', in: 'path', required: true, type: 'array', items: { type: 'integer' } },
              {
                name: 'X-Tags',
                in: 'header',
                type: 'array',
                items: { type: 'string' },
                collectionFormat: 'csv',
              },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.operation.parameters.map((p) => [p.name, p.style, p.explode])).toEqual([
      ['ids', 'simple', false],
      ['X-Tags', 'simple', false],
    ]);
  });

  it('converts inline parameter keywords (boolean exclusive bounds, x-nullable)', () => {
    const cap = only(
      swagger({
        '/pets': {
          get: {
            parameters: [
              {
                name: 'limit',
                in: 'query',
                type: 'integer',
                minimum: 0,
                exclusiveMinimum: true,
                'x-nullable': true,
                collectionFormat: 'csv',
              },
            ],
            responses: OK,
          },
        },
      }),
    );
    expect(cap.input?.properties).toEqual({ limit: { type: ['integer', 'null'], exclusiveMinimum: 0 } });
  });

  it('takes servers from host, basePath and schemes', () => {
    const cap = only(swagger({ '/pets': { get: { responses: OK } } }, base));
    expect(cap.operation.servers).toEqual([
      { url: 'https://api.example.com/v1', variables: {} },
      { url: 'http://api.example.com/v1', variables: {} },
    ]);
    const noScheme = only(swagger({ '/pets': { get: { responses: OK } } }, { host: 'h.example' }));
    expect(noScheme.operation.servers).toEqual([{ url: 'https://h.example', variables: {} }]);
    const basePathOnly = only(swagger({ '/pets': { get: { responses: OK } } }, { basePath: '/api' }));
    expect(basePathOnly.operation.servers).toEqual([{ url: '/api', variables: {} }]);
  });

  it('takes the output from response schemas, with produces as media types', () => {
    const cap = only(
      swagger(
        {
          '/pets': {
            get: {
              produces: ['application/json', 'application/xml'],
              responses: {
                '200': {
                  description: 'ok',
                  schema: { type: 'array', items: { $ref: '#/definitions/Pet' } },
                  examples: { 'application/json': [{ name: 'rex' }] },
                },
              },
            },
          },
        },
        base,
      ),
    );
    expect(cap.output).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'array',
      items: { $ref: '#/$defs/Pet' },
      $defs: {
        Pet: {
          type: 'object',
          required: ['name'],
          properties: { id: { type: 'integer', readOnly: true }, name: { type: ['string', 'null'] } },
        },
      },
    });
    expect(cap.operation.responseMediaTypes).toEqual(['application/json', 'application/xml']);
    expect(cap.operation.success).toMatchObject({
      status: 200,
      mediaType: 'application/json',
      example: [{ name: 'rex' }],
    });
  });
});

describe('output', () => {
  const objectA = { type: 'object', properties: { a: { type: 'string' } } };

  it('is the schema of the JSON 2xx response, without writeOnly properties', () => {
    const cap = only(
      openapi({
        '/me': {
          get: {
            responses: {
              '200': {
                description: 'ok',
                content: json({
                  type: 'object',
                  properties: { name: { type: 'string' }, password: { type: 'string', writeOnly: true } },
                }),
              },
            },
          },
        },
      }),
    );
    expect(cap.output).toEqual({
      $schema: JSON_SCHEMA_2020,
      type: 'object',
      properties: { name: { type: 'string' } },
    });
  });

  it('combines several distinct 2xx JSON schemas with anyOf, dropping duplicates', () => {
    const cap = only(
      openapi({
        '/x': {
          put: {
            responses: {
              '201': { description: 'created', content: json({ type: 'array' }) },
              '200': { description: 'ok', content: json(objectA) },
              '202': {
                description: 'accepted',
                content: { 'application/problem+json': { schema: objectA } },
              },
              '400': { description: 'bad', content: json({ type: 'string' }) },
              default: { description: 'other', content: json({ type: 'boolean' }) },
            },
          },
        },
      }),
    );
    expect(cap.output).toEqual({ $schema: JSON_SCHEMA_2020, anyOf: [objectA, { type: 'array' }] });
    expect(cap.operation.success).toMatchObject({ status: 200, mediaType: 'application/json' });
  });

  it('counts application/json, *+json and */* as JSON, and 2XX as 200', () => {
    const cap = only(
      openapi({
        '/x': {
          get: {
            responses: {
              '2XX': {
                description: 'ok',
                content: {
                  'application/vnd.api+json': { schema: { type: 'string' } },
                  '*/*': { schema: { type: 'integer' } },
                  'text/plain': { schema: { type: 'number' } },
                },
              },
            },
          },
        },
      }),
    );
    expect(cap.output).toEqual({
      $schema: JSON_SCHEMA_2020,
      anyOf: [{ type: 'string' }, { type: 'integer' }],
    });
    expect(cap.operation.success.status).toBe(200);
    expect(cap.operation.responseMediaTypes).toEqual(['application/vnd.api+json', '*/*', 'text/plain']);
  });

  it('is absent for a 204-only operation', () => {
    const cap = only(
      openapi({
        '/pets/{id}': {
          delete: {
            responses: { '204': { description: 'gone' }, '404': { description: 'no', content: json({}) } },
          },
        },
      }),
    );
    expect(cap.output).toBeUndefined();
    expect(cap.operation.success).toEqual({ status: 204 });
    expect(cap.operation.responseMediaTypes).toEqual([]);
  });

  it('is absent when the success body is not JSON, which is still recorded for execution', () => {
    const cap = only(
      openapi({
        '/file': {
          get: {
            responses: {
              '200': {
                description: 'ok',
                content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
              },
            },
          },
        },
      }),
    );
    expect(cap.output).toBeUndefined();
    expect(cap.operation.responseMediaTypes).toEqual(['application/octet-stream']);
    expect(cap.operation.success).toMatchObject({ status: 200, mediaType: 'application/octet-stream' });
  });

  it('records the example of the first success response', () => {
    const cap = only(
      openapi({
        '/x': {
          get: {
            responses: {
              '200': {
                description: 'ok',
                content: {
                  'application/json': { schema: objectA, examples: { one: { value: { a: 'x' } } } },
                },
              },
            },
          },
        },
      }),
    );
    expect(cap.operation.success).toEqual({
      status: 200,
      mediaType: 'application/json',
      example: { a: 'x' },
      schema: { $schema: JSON_SCHEMA_2020, ...objectA },
    });
  });
});

describe('webhooks', () => {
  it('produce no capability', () => {
    const hook = {
      post: { operationId: 'petAdded', requestBody: { content: json({ type: 'object' }) }, responses: OK },
    };
    const onlyHooks = {
      openapi: '3.1.0',
      info: { title: 'Hooks', version: '1' },
      webhooks: { petAdded: hook },
    };
    expect(derive(onlyHooks).capabilities).toEqual([]);
    const mixed = { ...onlyHooks, paths: { '/pets': { get: { operationId: 'listPets', responses: OK } } } };
    expect(names(mixed)).toEqual(['list_pets']);
  });
});

describe('descriptions', () => {
  const described = (operation: Record<string, unknown>): string =>
    only(openapi({ '/pets/{petId}': { get: { ...operation, responses: OK } } })).description;

  it('joins summary and description with a blank line, trimmed', () => {
    expect(described({ summary: ' Get a pet ', description: 'Returns one pet.\n' })).toBe(
      'Get a pet\n\nReturns one pet.',
    );
  });

  it('uses either one alone, and one copy when they are the same', () => {
    expect(described({ summary: 'Get a pet' })).toBe('Get a pet');
    expect(described({ description: 'Returns one pet.' })).toBe('Returns one pet.');
    expect(described({ summary: 'Same', description: 'Same' })).toBe('Same');
  });

  it('falls back to the method and path', () => {
    expect(described({})).toBe('Calls GET /pets/{petId}.');
    expect(described({ summary: '   ', description: 7 })).toBe('Calls GET /pets/{petId}.');
  });

  it('marks deprecated operations', () => {
    expect(described({ summary: 'Old', deprecated: true })).toBe('[deprecated] Old');
    expect(described({ deprecated: true })).toBe('[deprecated] Calls GET /pets/{petId}.');
  });
});

describe('execution metadata', () => {
  const doc = openapi(
    {
      '/pets/{petId}': {
        servers: [{ url: 'https://path.example.com' }],
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: {
          operationId: 'getPet',
          tags: ['pets', 7, 'read'],
          deprecated: true,
          security: [{ oauth: ['read', 'write'] }, {}],
          parameters: [
            {
              name: 'fields',
              in: 'query',
              style: 'spaceDelimited',
              explode: false,
              allowReserved: true,
              schema: { type: 'array' },
            },
            { name: 'filter', in: 'query', style: 'deepObject', explode: true, schema: { type: 'object' } },
            { name: 'where', in: 'query', content: { 'application/json': { schema: { type: 'object' } } } },
            { name: 'X-Ids', in: 'header', schema: { type: 'array' } },
            { name: 'prefs', in: 'cookie', schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'ok', content: json({ type: 'object' }) } },
        },
        put: { servers: [{ url: 'https://op.example.com' }], security: [], responses: OK },
      },
      '/pets': { get: { responses: OK } },
    },
    {
      servers: [
        {
          url: 'https://{region}.example.com/v1',
          variables: { region: { default: 'eu', enum: ['eu', 'us'] } },
        },
      ],
      security: [{ apiKey: [] }],
    },
  );
  const catalog = derive(doc);

  it('keeps the API, method, path template, operationId, tags, deprecation and pointer', () => {
    const op = byOperation(catalog, 'get', '/pets/{petId}').operation;
    expect(op).toMatchObject({
      apiId: 'pets',
      method: 'get',
      path: '/pets/{petId}',
      operationId: 'getPet',
      tags: ['pets', 'read'],
      deprecated: true,
      pointer: '#/paths/~1pets~1{petId}/get',
    });
    const plain = byOperation(catalog, 'get', '/pets').operation;
    expect(plain).not.toHaveProperty('operationId');
    expect(plain).toMatchObject({ tags: [], deprecated: false });
  });

  it("keeps each parameter's location, wire name and serialization, with defaults filled in", () => {
    expect(byOperation(catalog, 'get', '/pets/{petId}').operation.parameters).toEqual([
      {
        argument: 'petId',
        in: 'path',
        name: 'petId',
        required: true,
        style: 'simple',
        explode: false,
        allowReserved: false,
      },
      {
        argument: 'fields',
        in: 'query',
        name: 'fields',
        required: false,
        style: 'spaceDelimited',
        explode: false,
        allowReserved: true,
      },
      {
        argument: 'filter',
        in: 'query',
        name: 'filter',
        required: false,
        style: 'deepObject',
        explode: true,
        allowReserved: false,
      },
      {
        argument: 'where',
        in: 'query',
        name: 'where',
        required: false,
        style: 'form',
        explode: true,
        allowReserved: false,
        contentType: 'application/json',
      },
      {
        argument: 'X-Ids',
        in: 'header',
        name: 'X-Ids',
        required: false,
        style: 'simple',
        explode: false,
        allowReserved: false,
      },
      {
        argument: 'prefs',
        in: 'cookie',
        name: 'prefs',
        required: false,
        style: 'form',
        explode: true,
        allowReserved: false,
      },
    ]);
  });

  it('takes servers from the operation, else the path item, else the document', () => {
    expect(byOperation(catalog, 'put', '/pets/{petId}').operation.servers).toEqual([
      { url: 'https://op.example.com', variables: {} },
    ]);
    expect(byOperation(catalog, 'get', '/pets/{petId}').operation.servers).toEqual([
      { url: 'https://path.example.com', variables: {} },
    ]);
    expect(byOperation(catalog, 'get', '/pets').operation.servers).toEqual([
      {
        url: 'https://{region}.example.com/v1',
        variables: { region: { default: 'eu', enum: ['eu', 'us'] } },
      },
    ]);
  });

  it('takes security from the operation (an empty list included), else the document', () => {
    expect(byOperation(catalog, 'get', '/pets/{petId}').operation.security).toEqual([
      { oauth: ['read', 'write'] },
      {},
    ]);
    expect(byOperation(catalog, 'put', '/pets/{petId}').operation.security).toEqual([]);
    expect(byOperation(catalog, 'get', '/pets').operation.security).toEqual([{ apiKey: [] }]);
  });

  it('keeps the response media types and the success response', () => {
    const op = byOperation(catalog, 'get', '/pets/{petId}').operation;
    expect(op.responseMediaTypes).toEqual(['application/json']);
    expect(op.success).toEqual({
      status: 200,
      mediaType: 'application/json',
      schema: { $schema: JSON_SCHEMA_2020, type: 'object' },
    });
  });
});

describe('every derived schema', () => {
  it('compiles with the strict 2020-12 validator and references nothing outside itself', () => {
    const doc = openapi(
      {
        '/trees': {
          post: {
            parameters: [
              { name: 'depth', in: 'query', schema: { type: 'integer', minimum: 0, exclusiveMinimum: true } },
            ],
            requestBody: { required: true, content: json({ $ref: '#/components/schemas/Tree' }) },
            responses: {
              '200': { description: 'ok', content: json({ $ref: '#/components/schemas/Node' }) },
              '201': {
                description: 'ok',
                content: json({ type: 'array', items: { $ref: '#/components/schemas/Node' } }),
              },
            },
          },
        },
        '/ids': {
          get: {
            parameters: [
              {
                name: 'id',
                in: 'query',
                schema: { type: 'string', format: 'vendor-id', nullable: true, pattern: '(' },
              },
            ],
            responses: { '200': { description: 'ok', content: json({ $ref: '#/components/schemas/Tree' }) } },
          },
        },
      },
      {
        components: {
          schemas: {
            Node: {
              type: 'object',
              properties: {
                id: { type: 'string', readOnly: true },
                children: { type: 'array', items: { $ref: '#/components/schemas/Node' } },
              },
            },
            Tree: {
              type: 'object',
              required: ['root'],
              properties: {
                root: { $ref: '#/components/schemas/Node' },
                name: { type: 'string', example: 'oak' },
              },
            },
          },
        },
      },
    );
    const catalog = derive(doc);
    const ajv = createSchemaValidator(catalog.formats);
    const schemas = catalog.capabilities.flatMap((c) => [
      c.input,
      c.output,
      c.argumentsSchema,
      c.operation.success.schema,
    ]);
    const defined = schemas.filter((s) => s !== undefined);
    expect(defined).toHaveLength(8);
    for (const schema of defined) {
      expect(schema.$schema).toBe(JSON_SCHEMA_2020);
      expect(() => ajv.compile(schema)).not.toThrow();
      for (const { ref } of collectRefs(schema)) {
        expect(ref.startsWith('#/$defs/')).toBe(true);
        expect((schema.$defs as Record<string, unknown>)[ref.slice(8)]).toBeDefined();
      }
    }
    const trees = byOperation(catalog, 'post', '/trees');
    const validate = ajv.compile(trees.argumentsSchema);
    expect(validate({ depth: 1, root: { children: [{ children: [] }] } })).toBe(true);
    expect(validate({ depth: 0, root: {} })).toBe(false); // exclusiveMinimum
    expect(validate({ root: { id: 'x' }, unknown: 1 })).toBe(false); // additionalProperties: false
    expect(catalog.formats.has('vendor-id')).toBe(true);
  });
});
