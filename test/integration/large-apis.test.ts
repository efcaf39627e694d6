/**
 * Large real APIs (issue 14): Stripe (the payments API), GitHub (1,223 operations), Figma (the
 * design-tool API), Kubernetes 1.13 (Swagger 2.0, 1,014 operations) and Microsoft Graph (11,422
 * operations), from the pinned packages of scripts/api-corpus.json. Every operation becomes a
 * capability, names are unique, snake_case and do not depend on the order of `paths`, and no
 * capability shows agents more than 256 KiB of input and output schemas (as JSON): Stripe's and
 * Graph's largest reach 697 KiB and 1,089 KiB of components, so their farthest are summarized
 * (advertised-schemas.ts) and every `$ref` still resolves. Figures (time, memory) are the bench's:
 * `npm run bench -- corpus`.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADVERTISED_SCHEMA_MAX_CHARS, advertisedSchemas } from '../../src/openapi/advertised-schemas.js';
import type { Catalog } from '../../src/openapi/catalog.js';
import { deriveCatalog } from '../../src/openapi/derive.js';
import { loadDocument } from '../../src/openapi/load.js';
import { localRefNames } from '../../src/openapi/local-ref.js';
import { apiCorpusDocument } from '../helpers/api-corpus.js';

/**
 * sha256 of the sorted `name METHOD path` lines: a renamed capability would orphan its grants, so
 * a change here must be deliberate.
 */
const NAMES_FINGERPRINT: Record<string, string> = {
  stripe: '3ddfa1d80a2f55045c215ab7063cd997eacd2807124b20c0dce5f19ab1585505',
  github: 'a43bc983f04a0c10e3b23b8eb811861a5502192544cb6835aef780bd8ba37adb',
  figma: '46c07b54759a241c0ab63511768c59d550005e2e0cbbfa4631af7ca8dc8c7ff5',
  'kubernetes-1.13-swagger2': '2d980bab5a1d5fcbf32d27cf9fc96707f99cb213a0aef7bc902ea67db8868890',
  'microsoft-graph': '5ee7d921dbdcaa173f99c520d65c2b6ad9cc7c14d69ebdb41ae73bb32cdf618e',
};

describe.each(Object.keys(NAMES_FINGERPRINT))('large API %s', (id) => {
  const entry = apiCorpusDocument(id);
  // Held for this document's tests only: kept on, every document's catalog would still be in
  // memory while Microsoft Graph's is derived twice, and the collector's work made this file's
  // slowest test 4 times slower (11 s against 2.8 s alone).
  let loaded: { doc: unknown; catalog: Catalog } | undefined;
  const doc = (): unknown => loaded?.doc;
  const catalogOf = (): Catalog => {
    if (!loaded) throw new Error(`${id} is not loaded`);
    return loaded.catalog;
  };

  beforeAll(async () => {
    const { doc: read } = await loadDocument(entry.file, { allowRemoteRefs: false, allowHttp: false });
    loaded = { doc: read, catalog: deriveCatalog([{ source: entry.file, doc: read }]) };
  }, 120_000);
  afterAll(() => {
    loaded = undefined;
  });

  it(`every one of its ${entry.operations} operations becomes a capability with a unique snake_case name`, () => {
    const catalog = catalogOf();
    expect(catalog.capabilities).toHaveLength(entry.operations);
    const names = catalog.capabilities.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-z0-9_]{1,64}$/);
  });

  it('names are stable: pinned, and the same with `paths` in reverse order', () => {
    const lines = (c: Catalog): string[] =>
      c.capabilities.map((x) => `${x.name} ${x.operation.method.toUpperCase()} ${x.operation.path}`).sort();
    const catalog = catalogOf();
    const fingerprint = createHash('sha256').update(lines(catalog).join('\n')).digest('hex');
    expect(fingerprint).toBe(NAMES_FINGERPRINT[id]);

    const { paths, ...rest } = doc() as { paths: Record<string, unknown> };
    const reversed = { ...rest, paths: Object.fromEntries(Object.entries(paths).reverse()) };
    expect(lines(deriveCatalog([{ source: entry.file, doc: reversed }]))).toEqual(lines(catalog));
  }, 120_000);

  it('no capability shows more than 256 KiB of input and output schemas, and each is self-contained', () => {
    const size = (schema: unknown): number => (schema === undefined ? 0 : JSON.stringify(schema).length);
    const shown = catalogOf().capabilities.map((c) => ({ name: c.name, ...advertisedSchemas(c) }));
    const over = shown
      .map((c) => ({ name: c.name, kib: Math.ceil((size(c.input) + size(c.output)) / 1024) }))
      .filter((c) => c.kib * 1024 > ADVERTISED_SCHEMA_MAX_CHARS)
      .sort((a, b) => b.kib - a.kib);
    expect(over, `${over.length} over 256 KiB; the largest: ${JSON.stringify(over.slice(0, 3))}`).toEqual([]);
    const unresolved = shown.flatMap((c) =>
      [c.input, c.output].flatMap((schema) => {
        if (schema === undefined) return [];
        const { $defs: defs = {}, ...root } = schema as { $defs?: Record<string, unknown> };
        return [root, ...Object.values(defs)]
          .flatMap((node) => [...localRefNames(node)])
          .filter((name) => !Object.hasOwn(defs, name))
          .map((name) => `${c.name}: ${name}`);
      }),
    );
    expect(unresolved).toEqual([]);
  });
});
