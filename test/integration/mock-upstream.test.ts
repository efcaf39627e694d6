import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/openapi/catalog.js';
import { sampleFromSchema } from '../../src/openapi/sample.js';
import type {
  ApiInfo,
  Capability,
  HttpMethod,
  JsonSchema,
  SuccessResponse,
} from '../../src/openapi/types.js';
import { startMockUpstream, type MockUpstream } from '../../src/upstream/mock-server.js';

function api(id: string): ApiInfo {
  return {
    id,
    title: id,
    version: '1.0.0',
    source: `${id}.yaml`,
    flavour: 'openapi-3.1',
    servers: [],
    securitySchemes: {},
  };
}

function capability(
  name: string,
  apiId: string,
  method: HttpMethod,
  path: string,
  success: SuccessResponse,
): Capability {
  return {
    name,
    description: name,
    argumentsSchema: { type: 'object', additionalProperties: false },
    operation: {
      apiId,
      method,
      path,
      parameters: [],
      servers: [],
      security: [],
      tags: [],
      deprecated: false,
      responseMediaTypes: success.mediaType ? [success.mediaType] : [],
      success,
      pointer: `#/paths/${path}/${method}`,
    },
  };
}

const petSchema: JsonSchema = {
  type: 'object',
  required: ['id', 'name'],
  properties: {
    id: { type: 'integer', minimum: 1 },
    name: { type: 'string' },
    born: { type: 'string', format: 'date' },
  },
};
const petList = [{ id: 1, name: 'Rex' }];
const orderSchema: JsonSchema = {
  $defs: {
    Line: { type: 'object', required: ['sku'], properties: { sku: { type: 'string', format: 'uuid' } } },
  },
  type: 'object',
  required: ['lines'],
  properties: { lines: { type: 'array', items: { $ref: '#/$defs/Line' } } },
};

const catalog = createCatalog(
  [api('petstore'), api('store')],
  [
    capability('list_pets', 'petstore', 'get', '/pets', {
      status: 200,
      mediaType: 'application/json',
      example: petList,
      schema: { type: 'array', items: petSchema },
    }),
    capability('get_pet', 'petstore', 'get', '/pets/{id}', {
      status: 200,
      mediaType: 'application/json',
      schema: petSchema,
    }),
    capability('get_my_pets', 'petstore', 'get', '/pets/mine', {
      status: 200,
      mediaType: 'application/json',
      example: { mine: true },
    }),
    capability('delete_pet', 'petstore', 'delete', '/pets/{id}', { status: 204 }),
    capability('get_pet_photo', 'petstore', 'get', '/pets/{id}/photo.{ext}', {
      status: 200,
      mediaType: 'text/plain',
      example: 'a photo, in words',
    }),
    capability('get_root', 'petstore', 'get', '/', { status: 200, mediaType: 'text/plain' }),
    capability('get_inventory', 'store', 'get', '/inventory', {
      status: 200,
      mediaType: 'application/json',
      example: { count: 3 },
    }),
    capability('create_order', 'store', 'post', '/orders', {
      status: 201,
      mediaType: 'application/vnd.api+json',
      schema: orderSchema,
    }),
    capability('get_ping', 'store', 'get', '/ping', { status: 200, mediaType: 'application/json' }),
  ],
  [],
);

let mock: MockUpstream;

beforeAll(async () => {
  mock = await startMockUpstream(catalog);
});

afterAll(async () => {
  await mock.close();
});

function get(apiId: string, path: string, init?: RequestInit): Promise<Response> {
  return fetch(`${mock.baseUrlFor(apiId)}${path}`, init);
}

describe('mock upstream', () => {
  it('listens on 127.0.0.1 with an ephemeral port and mounts each API under its id', () => {
    expect(mock.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(mock.baseUrlFor('petstore')).toBe(`${mock.url}/petstore`);
    expect(mock.baseUrlFor('a b/c')).toBe(`${mock.url}/a%20b%2Fc`);
  });

  it("serves the document's example with the declared status and media type", async () => {
    const res = await get('petstore', '/pets');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-mock-upstream')).toBe('agent-auth-proxy');
    expect(await res.json()).toEqual(petList);
  });

  it('synthesizes a body from the schema when there is no example', async () => {
    const res = await get('petstore', '/pets/42');
    expect(res.status).toBe(200);
    const body: unknown = await res.json();
    expect(body).toEqual(sampleFromSchema(petSchema));
    expect(body).toEqual({ id: 1, name: 'string', born: '2026-01-01' });
  });

  it('resolves $defs in synthesized bodies and keeps a +json media type', async () => {
    const res = await get('store', '/orders', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lines: [{ sku: 'x' }] }),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/vnd.api+json');
    expect(await res.json()).toEqual({ lines: [{ sku: '00000000-0000-4000-8000-000000000000' }] });
  });

  it('answers {} for a JSON response with neither example nor schema', async () => {
    const res = await get('store', '/ping');
    expect(await res.text()).toBe('{}');
  });

  it('answers 204 with an empty body and no content type', async () => {
    const res = await get('petstore', '/pets/42', { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(res.headers.get('content-type')).toBeNull();
    expect(res.headers.get('x-mock-upstream')).toBe('agent-auth-proxy');
    expect(await res.text()).toBe('');
  });

  it('sends a string example of a non-JSON media type as it is', async () => {
    const res = await get('petstore', '/pets/7/photo.png');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain');
    expect(await res.text()).toBe('a photo, in words');
  });

  it('answers an empty string for a non-JSON response with neither example nor schema', async () => {
    const res = await get('petstore', '/');
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    expect((await get('petstore', '')).status).toBe(200);
  });

  it('prefers a literal segment over a template parameter', async () => {
    expect(await (await get('petstore', '/pets/mine')).json()).toEqual({ mine: true });
    // Literal segments are compared after percent-decoding.
    expect(await (await get('petstore', '/pets/%6Dine')).json()).toEqual({ mine: true });
    expect(await (await get('petstore', '/pets/mine2')).json()).toEqual(sampleFromSchema(petSchema));
  });

  it('falls back to a less specific template whose method matches', async () => {
    expect((await get('petstore', '/pets/mine', { method: 'DELETE' })).status).toBe(204);
  });

  it('ignores query strings and a trailing slash', async () => {
    expect(await (await get('petstore', '/pets?limit=1')).json()).toEqual(petList);
    expect(await (await get('petstore', '/pets/')).json()).toEqual(petList);
  });

  it("keeps each API's operations under its own mount point", async () => {
    expect(await (await get('store', '/inventory')).json()).toEqual({ count: 3 });
    expect((await get('petstore', '/inventory')).status).toBe(404);
    expect((await get('store', '/pets')).status).toBe(404);
  });

  it('answers 404 with a JSON error for unknown APIs and paths', async () => {
    for (const res of [
      await get('nope', '/pets'),
      await fetch(`${mock.url}/`),
      await get('petstore', '/pets/1/2/3'),
      await get('petstore', '/pets//photo.png'),
      await get('petstore', '/pets/%E0%A4%A'),
    ]) {
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toBe('application/json');
      const body = (await res.json()) as { error: unknown; message: unknown };
      expect(body.error).toBe('not_found');
      expect(body.message).toEqual(expect.any(String));
    }
  });

  it('answers 405 with Allow when the path matches but the method does not', async () => {
    const res = await get('petstore', '/pets/42', { method: 'PUT' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('DELETE, GET, HEAD');
    expect(((await res.json()) as { error: unknown }).error).toBe('method_not_allowed');

    const post = await get('petstore', '/pets', { method: 'POST', body: '{}' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers HEAD like GET without a body', async () => {
    const full = await get('petstore', '/pets');
    const fullLength = (await full.arrayBuffer()).byteLength;
    const res = await get('petstore', '/pets', { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('content-length')).toBe(String(fullLength));
    expect(await res.text()).toBe('');
  });

  it('reads and discards request bodies up to 1 MiB', async () => {
    const res = await get('store', '/orders', { method: 'POST', body: 'x'.repeat(1024 * 1024) });
    expect(res.status).toBe(201);
  });

  it('answers 413 to a larger body', async () => {
    const res = await get('store', '/orders', { method: 'POST', body: 'x'.repeat(1024 * 1024 + 1) });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: unknown }).error).toBe('payload_too_large');
  });

  it('answers 413 to a larger streamed body', async () => {
    const chunk = new Uint8Array(256 * 1024);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 8) controller.close();
        else {
          sent += 1;
          controller.enqueue(chunk);
        }
      },
    });
    const init = { method: 'POST', body, duplex: 'half' } as RequestInit;
    const res = await get('store', '/orders', init);
    expect(res.status).toBe(413);
  });
});

describe('mock upstream close()', () => {
  it('closes the server, keep-alive connections included', async () => {
    const own = await startMockUpstream(catalog, { port: 0 });
    // Leaves a pooled keep-alive connection behind, which close() must not wait for.
    expect((await fetch(`${own.baseUrlFor('store')}/inventory`)).status).toBe(200);
    const started = Date.now();
    await own.close();
    expect(Date.now() - started).toBeLessThan(2000);
    await expect(fetch(`${own.baseUrlFor('store')}/inventory`)).rejects.toThrow();
    await own.close(); // a second call is harmless
  });
});

describe('mock upstream answers, prepared on first call', () => {
  /** A capability whose example counts how often the mock reads it, i.e. prepares its answer. */
  function counted(
    name: string,
    path: string,
    example: unknown,
  ): { capability: Capability; reads: () => number } {
    let reads = 0;
    const success: SuccessResponse = {
      status: 200,
      mediaType: 'application/json',
      get example() {
        reads++;
        return example;
      },
    };
    return { capability: capability(name, 'counted', 'get', path, success), reads: () => reads };
  }

  it('prepares nothing when a catalog is installed, each answer on its first call, then keeps it', async () => {
    const first = counted('get_a', '/a', { a: 1 });
    const installed = createCatalog([api('counted')], [first.capability], []);
    const own = await startMockUpstream(installed);
    try {
      // Installing a catalog of Microsoft Graph's size used to synthesize 124 MiB of answers.
      expect(first.reads()).toBe(0);
      expect(await (await fetch(`${own.baseUrlFor('counted')}/a`)).json()).toEqual({ a: 1 });
      const afterFirstCall = first.reads();
      expect(afterFirstCall).toBeGreaterThan(0);
      expect(await (await fetch(`${own.baseUrlFor('counted')}/a`)).json()).toEqual({ a: 1 });
      expect(first.reads()).toBe(afterFirstCall);

      // The same catalog installed again (a reload that kept it): the answer is not prepared again.
      own.answerFor(installed);
      expect(await (await fetch(`${own.baseUrlFor('counted')}/a`)).json()).toEqual({ a: 1 });
      expect(first.reads()).toBe(afterFirstCall);

      const next = counted('get_a', '/a', { a: 2 });
      own.answerFor(createCatalog([api('counted')], [next.capability], []));
      expect(next.reads()).toBe(0);
      expect(await (await fetch(`${own.baseUrlFor('counted')}/a`)).json()).toEqual({ a: 2 });
      expect(first.reads()).toBe(afterFirstCall);
    } finally {
      await own.close();
    }
  });

  it('past its byte budget, answers the same by preparing it again on each call', async () => {
    const small = counted('get_small', '/small', { s: 1 }); // 7 bytes: kept
    const large = counted('get_large', '/large', { text: 'x'.repeat(64) }); // 75 bytes: over
    const own = await startMockUpstream(
      createCatalog([api('counted')], [small.capability, large.capability], []),
      {
        answerCacheBytes: 32,
      },
    );
    try {
      const bodies: string[] = [];
      for (let i = 0; i < 3; i++) {
        bodies.push(await (await fetch(`${own.baseUrlFor('counted')}/large`)).text());
        await fetch(`${own.baseUrlFor('counted')}/small`).then((r) => r.text());
      }
      expect(new Set(bodies)).toEqual(new Set([JSON.stringify({ text: 'x'.repeat(64) })]));
      const perCall = large.reads() / 3;
      expect(Number.isInteger(perCall) && perCall > 0).toBe(true);
      expect(small.reads()).toBe(perCall); // prepared once, then kept
    } finally {
      await own.close();
    }
  });
});
