/**
 * The corpus benchmark's three measurements (bench/corpus.ts: the catalog child, `serve` until
 * discovery answers, `capabilities --json`), run on one small document of the shared corpus
 * through the built dist/. Its figures are not checked here (README "Real API documents" quotes
 * them); that it still runs is: the catalog child is plain JavaScript against dist/, so a module
 * moved in src/ breaks it without any type error.
 */
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { corpusBenchDocuments, runCorpusBench, type CorpusRow } from '../../bench/corpus.js';
import { CORPUS_DIR, corpusDocuments } from '../helpers/corpus.js';
import { CLI, ensureBuiltCli } from '../helpers/cli-process.js';

beforeAll(() => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
});

describe('npm run bench -- corpus', () => {
  it('measures a document three ways, each succeeding with figures of the document', async () => {
    const doc = corpusDocuments().find((d) => d.id === 'petstore-oas30');
    expect(doc).toBeDefined();
    const { id, flavour, entry } = doc as NonNullable<typeof doc>;
    const rows: CorpusRow[] = [];
    await runCorpusBench([{ id, set: 'shared', flavour, file: `${CORPUS_DIR}${entry}` }], (row) =>
      rows.push(row),
    );
    expect(rows).toHaveLength(1);
    const [row] = rows as [CorpusRow];
    expect(row.catalog).toMatchObject({ ok: true, value: { over256KiB: 0 } });
    expect(row.serve).toMatchObject({ ok: true });
    expect(row.json).toMatchObject({ ok: true });
    if (!row.catalog.ok || !row.serve.ok || !row.json.ok) return;
    expect(row.catalog.value.capabilities).toBeGreaterThan(0);
    expect(row.catalog.value.largest.name).toMatch(/^[a-z0-9_]+$/);
    expect(row.catalog.value.largest.kib).toBeGreaterThan(0);
    expect(row.serve.value.ms).toBeGreaterThan(0);
    expect(row.json.value.outputMiB).toBeGreaterThan(0);
  });

  it('takes corpus ids and paths of other files, in the order given, and refuses anything else', () => {
    const file = fileURLToPath(new URL('../fixtures/specs/gateway.yaml', import.meta.url));
    const docs = corpusBenchDocuments({ ids: [file, 'petstore-oas30'] });
    expect(docs.map(({ id, set, flavour }) => ({ id, set, flavour }))).toEqual([
      { id: 'gateway', set: 'file', flavour: 'openapi-3.0' },
      { id: 'petstore-oas30', set: 'shared', flavour: 'openapi-3.0' },
    ]);
    expect(docs[0]?.file).toBe(file);
    expect(() => corpusBenchDocuments({ ids: ['no-such-document'] })).toThrow(
      'no-such-document: neither the id of a corpus document nor a file',
    );
  });
});
