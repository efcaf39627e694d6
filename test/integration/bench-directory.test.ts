/**
 * The directory sweep (`npm run bench -- directory`, bench/directory.ts) on three documents of the
 * shared corpus and one that is not OpenAPI, through the built dist/: the whole collection takes
 * about ten minutes, so the suite checks only that the sweep still runs and reports truly (its
 * child is plain JavaScript against dist/, which no type check covers).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directorySummary, runDirectorySweep } from '../../bench/directory.js';
import { CORPUS_DIR, corpusDocuments } from '../helpers/corpus.js';
import { CLI, ensureBuiltCli } from '../helpers/cli-process.js';

const dir = mkdtempSync(join(tmpdir(), 'aap-directory-'));
const broken = join(dir, 'not-openapi.json');

beforeAll(() => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  writeFileSync(broken, JSON.stringify({ hello: 'world' }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('npm run bench -- directory', () => {
  it('loads each document, compiles all its schemas, and names a document it cannot load', async () => {
    const docs = corpusDocuments()
      .filter((d) => ['petstore-oas30', 'petstore-swagger2', 'gotify'].includes(d.id))
      .map((d) => `${CORPUS_DIR}${d.entry}`);
    expect(docs).toHaveLength(3);
    const rows = await runDirectorySweep([...docs, broken], { parallel: 2 });
    expect(rows.map((r) => r.file).sort()).toEqual([...docs, broken].sort());
    for (const row of rows.filter((r) => r.file !== broken)) {
      expect(row.error, row.file).toBeUndefined();
      expect(row.operations).toBeGreaterThan(0);
      expect(row.schemas).toBeGreaterThan(row.operations ?? 0);
      expect(row.compiled).toBe(row.schemas);
      expect(row.refused).toBe(0);
      expect(row.over256KiB).toBe(0);
      expect(row.reachedOver256KiB).toBe(0);
      expect(row.largest?.name).toMatch(/^[a-z0-9_]+$/);
    }
    expect(rows.find((r) => r.file === broken)?.error).toMatch(/not-openapi\.json/);

    const summary = directorySummary(rows, CORPUS_DIR, 1).join('\n');
    expect(summary).toContain('4 documents');
    expect(summary).toContain('loaded and derived: 3; failed: 1');
    expect(summary).toMatch(/refused: 0 in 0 documents/);
    expect(summary).toContain('shown summarized: 0 in 0 documents');
    expect(summary).toContain('documents with a capability shown over 256 KiB: 0, 0 capabilities');
  });
});
