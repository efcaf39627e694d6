/**
 * serve's catalogs across reloads (ServedCatalogs): a load is compared with the documents of the
 * catalog in force, which only `installed` changes. A catalog that was loaded but never served, or
 * served and rolled back (a reload refused after loading, or drift that could not be applied), is
 * not what the next load is compared with.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { ServedCatalogs } from '../../../src/start/served-catalog.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-served-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Writes a one-operation document whose operation has `summary`, and returns the settings. */
function documentSaying(summary: string) {
  const spec = join(dir, 'api.yaml');
  writeFileSync(
    spec,
    [
      'openapi: 3.0.3',
      'info: { title: Served, version: "1" }',
      'paths:',
      '  /things:',
      '    get:',
      '      operationId: listThings',
      `      summary: ${summary}`,
      "      responses: { '200': { description: ok } }",
      '',
    ].join('\n'),
  );
  return resolveSettings({ specs: [spec], upstreams: ['http://127.0.0.1:9'] }, dir);
}

describe('ServedCatalogs', () => {
  it('compares with the catalog in force: after a rollback, the first one', async () => {
    const catalogs = new ServedCatalogs();
    const first = await catalogs.load(documentSaying('First.'));
    catalogs.installed(first.catalog);
    expect(first.documentsUnchanged).toBe(false);

    // The same document: kept.
    const again = await catalogs.load(documentSaying('First.'));
    expect(again).toMatchObject({ catalog: first.catalog, documentsUnchanged: true });

    // A second document is installed, then rolled back (drift could not be applied).
    const second = await catalogs.load(documentSaying('Second.'));
    expect(second.documentsUnchanged).toBe(false);
    catalogs.installed(second.catalog);
    catalogs.installed(first.catalog);

    // Compared with the first, so the second's document is loaded again, not taken for the same…
    const secondAgain = await catalogs.load(documentSaying('Second.'));
    expect(secondAgain.documentsUnchanged).toBe(false);
    expect(secondAgain.catalog.get('list_things')?.description).toBe('Second.');
    // …and the first's is kept.
    const firstAgain = await catalogs.load(documentSaying('First.'));
    expect(firstAgain).toMatchObject({ catalog: first.catalog, documentsUnchanged: true });
  });

  it('loads a catalog that was never installed again: nothing in force to compare with', async () => {
    const catalogs = new ServedCatalogs();
    const loaded = await catalogs.load(documentSaying('Never served.'));
    const next = await catalogs.load(documentSaying('Never served.'));
    expect(next.documentsUnchanged).toBe(false);
    expect(next.catalog).not.toBe(loaded.catalog);
  });
});
