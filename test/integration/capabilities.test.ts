/** §5.2 capability list and §5.2.1 describe over HTTP (unauthenticated mode). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/app.js';
import { getJson, startTestProxy, writeTempSpec } from '../helpers/proxy.js';
import { syntheticSpec } from '../helpers/synthetic-spec.js';

describe('GET /capability/list (§5.2)', () => {
  let proxy: RunningProxy;
  let names: string[];
  beforeAll(async () => {
    // 60 resources × 5 operations = 300 capabilities: more than one page at every limit.
    proxy = await startTestProxy({ specs: [writeTempSpec(syntheticSpec(60, 2))] });
    names = proxy.catalog.capabilities.map((c) => c.name);
  });
  afterAll(() => proxy.close());

  const list = (query = ''): Promise<{ status: number; headers: Headers; body: any }> =>
    getJson(`${proxy.url}/capability/list${query}`);

  it('returns 50 entries by default, each with only name, description and version (§2.12), and is cacheable for 5 minutes (§10.6)', async () => {
    const { status, body, headers } = await list();
    expect(status).toBe(200);
    expect(body.capabilities).toHaveLength(50);
    expect(Object.keys(body.capabilities[0]).sort()).toEqual(['description', 'name', 'version']);
    expect(body.has_more).toBe(true);
    expect(typeof body.next_cursor).toBe('string');
    expect(headers.get('cache-control')).toMatch(/max-age=300/);
    expect(headers.get('vary')).toMatch(/authorization/i);
  });

  it('walks the whole catalog with cursors: in name order, no repeats, no gaps', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 20; pages++) {
      const { body }: { body: any } = await list(
        `?limit=37${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      seen.push(...body.capabilities.map((c: { name: string }) => c.name));
      if (!body.has_more) {
        expect(body.next_cursor).toBeNull();
        break;
      }
      cursor = body.next_cursor;
    }
    expect(seen).toEqual([...names].sort());
    expect(seen).toHaveLength(300);
  });

  it('caps limit at 200', async () => {
    const { body } = await list('?limit=1000');
    expect(body.capabilities).toHaveLength(200);
    expect(body.has_more).toBe(true);
  });

  it('ends with has_more false and next_cursor null when the last page is exactly full', async () => {
    const first = await list('?limit=200');
    const last = await list(`?limit=100&cursor=${first.body.next_cursor}`);
    expect(last.body.capabilities).toHaveLength(100);
    expect(last.body.has_more).toBe(false);
    expect(last.body.next_cursor).toBeNull();
  });

  it.each(['0', '-1', 'abc', '1.5', '1e3', ''])(
    'rejects limit=%j with 400 invalid_request (empty means default)',
    async (limit) => {
      const { status, body } = await list(`?limit=${limit}`);
      if (limit === '') {
        expect(status).toBe(200);
        return;
      }
      expect(status).toBe(400);
      expect(body).toEqual({ error: 'invalid_request', message: expect.stringContaining('limit') });
    },
  );

  it.each([
    'garbage',
    Buffer.from('{"v":2,"after":"x"}').toString('base64url'),
    Buffer.from('[]').toString('base64url'),
  ])('rejects a cursor it did not issue (%s)', async (cursor) => {
    const { status, body } = await list(`?cursor=${cursor}`);
    expect(status).toBe(400);
    expect(body.error).toBe('invalid_request');
  });

  it('rejects a repeated parameter rather than guessing', async () => {
    const { status, body } = await list('?limit=5&limit=6');
    expect(status).toBe(400);
    expect(body.error).toBe('invalid_request');
  });

  it('searches names and descriptions, case-insensitively, words in any order', async () => {
    const { body } = await list('?query=RECORDS%20resource12%20list&limit=200');
    expect(body.capabilities.map((c: { name: string }) => c.name)).toEqual(['list_resource12s']);
    const none = await list('?query=nothing-matches-this');
    expect(none.body).toEqual({ capabilities: [], next_cursor: null, has_more: false });
  });

  it('paginates search results with the same cursors', async () => {
    const first = await list('?query=create&limit=25');
    expect(first.body.capabilities).toHaveLength(25);
    const second = await list(`?query=create&limit=25&cursor=${first.body.next_cursor}`);
    expect(second.body.capabilities).toHaveLength(25);
    expect(second.body.has_more).toBe(true);
    const all = [...first.body.capabilities, ...second.body.capabilities].map(
      (c: { name: string }) => c.name,
    );
    expect(new Set(all).size).toBe(50);
    expect(all.every((n) => n.startsWith('create_'))).toBe(true);
  });

  it('rejects an over-long query', async () => {
    const { status } = await list(`?query=${'a'.repeat(300)}`);
    expect(status).toBe(400);
  });
});

describe('GET /capability/describe (§5.2.1)', () => {
  let proxy: RunningProxy;
  beforeAll(async () => {
    proxy = await startTestProxy();
  });
  afterAll(() => proxy.close());

  it('returns the full capability with input and output schemas, nothing internal', async () => {
    const { status, body, headers } = await getJson(`${proxy.url}/capability/describe?name=get_pet`);
    expect(status).toBe(200);
    expect(headers.get('cache-control')).toMatch(/max-age=300/);
    expect(Object.keys(body).sort()).toEqual(['description', 'input', 'name', 'output', 'version']);
    expect(body.name).toBe('get_pet');
    expect(body.input).toMatchObject({ type: 'object', required: ['petId'], additionalProperties: false });
    // The response's component sits once under the schema's own $defs (issue #14).
    expect(body.output.$ref).toBe('#/$defs/Pet');
    expect(body.output.$defs.Pet.properties.status).toEqual({ $ref: '#/$defs/PetStatus' });
    expect(body.output.$defs.PetStatus).toEqual({ type: 'string', enum: ['available', 'pending', 'sold'] });
    // The API key header named by securitySchemes is the service's credential, never an input.
    expect(JSON.stringify(body)).not.toMatch(/X-Api-Key/i);
  });

  it('omits input for a capability that takes no arguments', async () => {
    const { body } = await getJson(`${proxy.url}/capability/describe?name=get_inventory`);
    expect(body.input).toBeUndefined();
    expect(body.output).toMatchObject({ type: 'object' });
  });

  it('answers 404 capability_not_found for an unknown name (§5.2.1 MUST)', async () => {
    const { status, body } = await getJson(`${proxy.url}/capability/describe?name=transfer_money`);
    expect(status).toBe(404);
    expect(body).toEqual({
      error: 'capability_not_found',
      message: expect.stringContaining('transfer_money'),
    });
  });

  it.each(['', '?name=', '?other=x'])('answers 400 invalid_request without a name (%j)', async (qs) => {
    const { status, body } = await getJson(`${proxy.url}/capability/describe${qs}`);
    expect(status).toBe(400);
    expect(body.error).toBe('invalid_request');
  });
});
