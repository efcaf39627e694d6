/**
 * A reload keeps the catalog in force when nothing it was loaded from changed (source-reads.ts):
 * the same root, the same files and URLs its `$ref`s reached, the same settings that shape it.
 * Each test changes one of those and checks that the catalog is derived again, with the change.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors.js';
import { loadCatalogReusing, type ApiSource, type CatalogLoad } from '../../../src/openapi/load-catalog.js';
import type { LoadOptions } from '../../../src/openapi/load.js';
import { unchangedSources } from '../../../src/openapi/source-reads.js';
import { readJsonText } from '../../../src/openapi/json-text.js';

const MULTI_FILE = fileURLToPath(new URL('../../fixtures/specs/multi-file/', import.meta.url));
const LOCAL_ONLY: LoadOptions = { allowRemoteRefs: false, allowHttp: false };

let tmp = '';
let serial = 0;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'aap-reuse-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

/** A fresh directory of this file's temp directory. */
function freshDir(): string {
  const dir = join(tmp, String(++serial));
  cpSync(MULTI_FILE, dir, { recursive: true });
  return dir;
}

/** A JSON document with one operation, `description` as its description. */
function jsonDoc(description: string, { title = 'Reuse', operationId = 'listThings' } = {}): string {
  return JSON.stringify({
    openapi: '3.0.3',
    info: { title, version: '1' },
    paths: {
      '/things': {
        get: { operationId, description, responses: { '200': { description: 'ok' } } },
      },
    },
  });
}

async function load(apis: readonly ApiSource[], previous?: CatalogLoad, options = LOCAL_ONLY) {
  return loadCatalogReusing(apis, options, previous);
}

const descriptionOf = (load: CatalogLoad, name: string): string | undefined =>
  load.catalog.get(name)?.description;

/** What a catalog is built from (its lookups are functions): equal to a fresh load's when kept right. */
const contentOf = ({ catalog }: CatalogLoad) => ({
  apis: catalog.apis,
  capabilities: catalog.capabilities,
  warnings: catalog.warnings,
  formats: catalog.formats,
});

describe('a local JSON document', () => {
  it('read the same is kept: the same catalog object, not derived again', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, jsonDoc('Lists things.'));
    const first = await load([{ spec }]);
    expect(first.reused).toBe(false);
    const second = await load([{ spec }], first);
    expect(second.reused).toBe(true);
    expect(second.catalog).toBe(first.catalog);
  });

  it('written again with the same bytes (a new modification time) is still kept', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, jsonDoc('Lists things.'));
    const first = await load([{ spec }]);
    unlinkSync(spec);
    writeFileSync(spec, jsonDoc('Lists things.'));
    expect((await load([{ spec }], first)).catalog).toBe(first.catalog);
  });

  it('changed is derived again, with the change', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, jsonDoc('Lists things.'));
    const first = await load([{ spec }]);
    writeFileSync(spec, jsonDoc('Lists every thing.'));
    const second = await load([{ spec }], first);
    expect(second.reused).toBe(false);
    expect(descriptionOf(second, 'list_things')).toBe('Lists every thing.');
    expect(descriptionOf(first, 'list_things')).toBe('Lists things.');
  });

  it('with a byte order mark and characters past the Basic Multilingual Plane is kept when the same', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, `\ufeff${jsonDoc('Lists 😀 things.')}`);
    const first = await load([{ spec }]);
    expect(descriptionOf(first, 'list_things')).toBe('Lists 😀 things.');
    expect((await load([{ spec }], first)).reused).toBe(true);
    writeFileSync(spec, `\ufeff${jsonDoc('Lists 😁 things.')}`);
    expect(descriptionOf(await load([{ spec }], first), 'list_things')).toBe('Lists 😁 things.');
  });

  it('that is gone is no reason to keep the old catalog: the load fails, naming the file', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, jsonDoc('Lists things.'));
    const first = await load([{ spec }]);
    unlinkSync(spec);
    const err: unknown = await load([{ spec }], first).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UserError);
    expect((err as Error).message).toContain(`${spec}: spec file not found`);
  });
});

describe('a document of several files', () => {
  it('is kept while every file it reached reads the same', async () => {
    const spec = join(freshDir(), 'openapi.yaml');
    const first = await load([{ spec }]);
    // The root, and the files its $refs reached, each recorded once it was read.
    const dir = spec.slice(0, -'openapi.yaml'.length);
    const reads = first.apis.flatMap((api) => api.reads);
    expect(reads.map((r) => [r.location.replace(dir, ''), r.as]).sort()).toEqual([
      ['openapi.yaml', 'file'],
      ['paths/orders.yaml', 'file'],
      ['schemas/money.yaml', 'file'],
      ['schemas/order.yaml', 'file'],
    ]);
    expect((await load([{ spec }], first)).catalog).toBe(first.catalog);
  });

  it('is derived again when only a file reached through $refs changed', async () => {
    const dir = freshDir();
    const spec = join(dir, 'openapi.yaml');
    const first = await load([{ spec }]);
    const money = join(dir, 'schemas/money.yaml');
    writeFileSync(money, readFileSync(money, 'utf8').replace('{3}', '{4}'));
    const second = await load([{ spec }], first);
    expect(second.reused).toBe(false);
    expect(JSON.stringify(second.catalog.get('get_order')?.output)).toContain('^[A-Z]{4}$');
    expect(JSON.stringify(first.catalog.get('get_order')?.output)).toContain('^[A-Z]{3}$');
  });
});

describe('the settings that shape the catalog', () => {
  it('a changed prefix, or load options, derive again; execution settings do not', async () => {
    const spec = join(freshDir(), 'api.json');
    writeFileSync(spec, jsonDoc('Lists things.'));
    // The config's API entries carry execution settings (credentials) beside what deriving reads.
    const withCredential = (token: string): ApiSource =>
      ({ spec, execution: { credentials: { token } } }) as ApiSource;
    const first = await load([withCredential('old')]);
    expect((await load([withCredential('rotated')], first)).catalog).toBe(first.catalog);
    expect(first.apis[0]?.inputs).not.toContain('old');

    const prefixed = await load([{ spec, prefix: 'shop' }], first);
    expect(prefixed.reused).toBe(false);
    expect(prefixed.catalog.get('shop_list_things')).toBeDefined();

    const options = await load([{ spec }], first, { ...LOCAL_ONLY, allowHttp: true });
    expect(options.reused).toBe(false);
  });

  it('an API added to the list derives again', async () => {
    const dir = freshDir();
    const a = join(dir, 'a.json');
    const b = join(dir, 'b.json');
    writeFileSync(a, jsonDoc('A.'));
    writeFileSync(b, jsonDoc('B.'));
    const first = await load([{ spec: a, id: 'a', prefix: 'a' }]);
    const second = await load(
      [
        { spec: a, id: 'a', prefix: 'a' },
        { spec: b, id: 'b', prefix: 'b' },
      ],
      first,
    );
    expect(second.reused).toBe(false);
    expect(second.catalog.capabilities.map((c) => c.name)).toEqual(['a_list_things', 'b_list_things']);
  });
});

describe('several APIs, one of whose documents changed', () => {
  /** Two documents in a fresh directory, and their paths. */
  function twoDocuments(a: string, b: string): { a: string; b: string } {
    const dir = freshDir();
    const paths = { a: join(dir, 'a.json'), b: join(dir, 'b.json') };
    writeFileSync(paths.a, a);
    writeFileSync(paths.b, b);
    return paths;
  }

  it('keep what was derived of the others, and load and derive the changed one alone', async () => {
    const { a, b } = twoDocuments(jsonDoc('A.'), jsonDoc('B.'));
    const apis = [
      { spec: a, prefix: 'a' },
      { spec: b, prefix: 'b' },
    ];
    const first = await load(apis);
    writeFileSync(b, jsonDoc('B, changed.'));
    const second = await load(apis, first);
    expect(second).toMatchObject({ reused: false, keptApis: 1 });
    // A's capability is built on the very schemas and binding derived before.
    const before = first.catalog.get('a_list_things');
    const after = second.catalog.get('a_list_things');
    expect(after?.argumentsSchema).toBe(before?.argumentsSchema);
    expect(after?.operation).toBe(before?.operation);
    expect(second.apis[0]?.part).toBe(first.apis[0]?.part);
    expect(descriptionOf(second, 'b_list_things')).toBe('B, changed.');
    expect(second.catalog.capabilities.map((c) => c.name)).toEqual(['a_list_things', 'b_list_things']);
    expect(contentOf(second)).toStrictEqual(contentOf(await load(apis)));
  });

  it('names are made unique again over all APIs: a kept API gets the name another gave up', async () => {
    const { a, b } = twoDocuments(jsonDoc('A.'), jsonDoc('B.'));
    const apis = [{ spec: a }, { spec: b }];
    const first = await load(apis);
    expect(descriptionOf(first, 'list_things')).toBe('A.');
    expect(descriptionOf(first, 'list_things_2')).toBe('B.');
    writeFileSync(a, jsonDoc('A.', { operationId: 'listOthers' }));
    const second = await load(apis, first);
    expect(second.keptApis).toBe(1);
    expect(second.catalog.capabilities.map((c) => [c.name, c.description])).toEqual([
      ['list_others', 'A.'],
      ['list_things', 'B.'],
    ]);
    expect(contentOf(second)).toStrictEqual(contentOf(await load(apis)));
  });

  it('a kept API whose id would move (an API before it took its id) is derived again', async () => {
    const { a, b } = twoDocuments(
      jsonDoc('A.', { title: 'Alpha' }),
      jsonDoc('B.', { title: 'Beta', operationId: 'listOthers' }),
    );
    const apis = [{ spec: a }, { spec: b }];
    const first = await load(apis);
    expect(first.catalog.get('list_others')?.operation.apiId).toBe('beta');
    writeFileSync(a, jsonDoc('A.', { title: 'Beta' }));
    const second = await load(apis, first);
    expect(second.keptApis).toBe(0);
    expect(second.catalog.apis.map((api) => api.id)).toEqual(['beta', 'beta_2']);
    expect(second.catalog.get('list_others')?.operation.apiId).toBe('beta_2');
    expect(second.catalog.get('list_things')?.operation.apiId).toBe('beta');
    expect(contentOf(second)).toStrictEqual(contentOf(await load(apis)));
  });

  it('an API removed from the end of the list leaves the others kept', async () => {
    const { a, b } = twoDocuments(jsonDoc('A.'), jsonDoc('B.'));
    const first = await load([
      { spec: a, prefix: 'a' },
      { spec: b, prefix: 'b' },
    ]);
    const second = await load([{ spec: a, prefix: 'a' }], first);
    expect(second).toMatchObject({ reused: false, keptApis: 1 });
    expect(second.catalog.capabilities.map((c) => c.name)).toEqual(['a_list_things']);
  });
});

describe('a remote document', () => {
  let body = '';
  let requests = 0;
  /** Where /moved.json redirects to. */
  let movedTo = '/v1/api.json';
  const server = http.createServer((req, res) => {
    requests += 1;
    if (req.url === '/moved.json') res.writeHead(302, { location: movedTo }).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  let url = '';
  const REMOTE: LoadOptions = { allowRemoteRefs: false, allowHttp: true };
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api.json`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('is fetched again and kept when it answers the same, derived again when not', async () => {
    body = jsonDoc('Remote things.');
    const first = await load([{ spec: url }], undefined, REMOTE);
    const before = requests;
    const second = await load([{ spec: url }], first, REMOTE);
    expect(second.catalog).toBe(first.catalog);
    expect(requests).toBe(before + 1);
    body = jsonDoc('Other remote things.');
    const third = await load([{ spec: url }], first, REMOTE);
    expect(third.reused).toBe(false);
    expect(descriptionOf(third, 'list_things')).toBe('Other remote things.');
  });

  it('redirected elsewhere is loaded again, even when it answers the same there', async () => {
    // Its relative $refs would resolve against the new place, so it is not the same document.
    body = jsonDoc('Moved things.');
    const moved = url.replace('/api.json', '/moved.json');
    movedTo = '/v1/api.json';
    const first = await load([{ spec: moved }], undefined, REMOTE);
    expect((await load([{ spec: moved }], first, REMOTE)).reused).toBe(true);
    movedTo = '/v2/api.json';
    expect((await load([{ spec: moved }], first, REMOTE)).reused).toBe(false);
  });
});

describe('digests of a JSON root', () => {
  it('read again piece by piece equal the one recorded when it was read as text', async () => {
    const file = join(freshDir(), 'text.json');
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 64 }),
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.nat({ max: 3 }),
        async (bytes, text, padding) => {
          // Past the re-reader's 64 KiB pieces, so that a character or a bad byte can straddle two.
          const filler = Buffer.alloc(64 * 1024 - padding, 0x61);
          writeFileSync(file, Buffer.concat([filler, Buffer.from(text, 'utf8'), Buffer.from(bytes)]));
          const sha256 = readJsonText(file, { digest: true }).sha256 ?? '';
          const read = { location: file, as: 'text' as const, sha256 };
          expect(await unchangedSources([read], {})).toBe(true);
          writeFileSync(
            file,
            Buffer.concat([filler, Buffer.from(text, 'utf8'), Buffer.from(bytes), Buffer.of(0x20)]),
          );
          expect(await unchangedSources([read], {})).toBe(false);
        },
      ),
      { numRuns: 60 },
    );
  });
});
