import { describe, expect, it } from 'vitest';
import { capabilityEntry, WRITE_BATCH_CHARS, writeCatalogJson } from '../../../src/cli/catalog-json.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { Catalog } from '../../../src/openapi/catalog.js';

function catalogOf(paths: Record<string, unknown>): Catalog {
  const doc = { openapi: '3.0.3', info: { title: 'T', version: '1' }, paths };
  return deriveCatalog([{ source: 't.yaml', doc }]);
}

async function written(catalog: Catalog): Promise<{ text: string; chunks: string[]; waits: number }> {
  let text = '';
  const chunks: string[] = [];
  let waits = 0;
  const io = {
    out: (t: string) => {
      text += t;
      chunks.push(t);
    },
    err: () => undefined,
    drained: () => {
      waits++;
      return Promise.resolve();
    },
  };
  await writeCatalogJson(catalog, io);
  return { text, chunks, waits };
}

describe('capabilities --json, written piece by piece', () => {
  const op = (id: string) => ({
    get: {
      operationId: id,
      parameters: [{ name: 'q', in: 'query', schema: { type: 'string' } }],
      responses: {
        '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
      },
    },
  });

  it.each([
    ['no capabilities', {}],
    ['one capability', { '/a': op('getA') }],
    ['several capabilities and warnings', { '/a': op('getA'), '/b/{id}': op('getB'), '/c': op('getA') }],
  ])('is byte for byte JSON.stringify(…, null, 2) of the whole listing: %s', async (_, paths) => {
    const catalog = catalogOf(paths);
    const whole = { capabilities: catalog.capabilities.map(capabilityEntry), warnings: catalog.warnings };
    const { text } = await written(catalog);
    expect(text).toBe(`${JSON.stringify(whole, null, 2)}\n`);
  });

  it('writes each capability as its own piece and waits for the reader after each', async () => {
    const catalog = catalogOf({ '/a': op('getA'), '/b': op('getB'), '/c': op('getC') });
    const { chunks, waits } = await written(catalog);
    expect(chunks).toHaveLength(4);
    expect(chunks.filter((c) => c.includes('"name"'))).toHaveLength(3);
    expect(waits).toBe(4);
  });

  it('writes a large capability in batches of about WRITE_BATCH_CHARS, never one string', async () => {
    const long = 'd'.repeat(1000);
    const properties = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [`p${i}`, { type: 'string', description: long }]),
    );
    const catalog = catalogOf({
      '/big': {
        post: {
          operationId: 'big',
          requestBody: { content: { 'application/json': { schema: { type: 'object', properties } } } },
          responses: { '204': { description: 'done' } },
        },
      },
    });
    const { text, chunks, waits } = await written(catalog);
    expect(text.length).toBeGreaterThan(300 * long.length);
    expect(chunks.length).toBeGreaterThan(text.length / WRITE_BATCH_CHARS - 1);
    // A batch ends with the piece that took it past the size: a property, here.
    for (const c of chunks) expect(c.length).toBeLessThan(WRITE_BATCH_CHARS + long.length + 200);
    expect(waits).toBe(2);
  });
});
