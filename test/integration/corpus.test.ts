/**
 * Every real-world document of the shared corpus loads, and every operation becomes a capability
 * with a valid unique name and schemas that compile with ajv's 2020-12 validator and reference
 * nothing outside themselves.
 */
import { statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createSchemaValidator } from '../../src/openapi/ajv.js';
import { deriveCatalog } from '../../src/openapi/derive.js';
import { loadDocument } from '../../src/openapi/load.js';
import type { JsonSchema } from '../../src/openapi/types.js';
import { CORPUS_DIR, corpusDocuments } from '../helpers/corpus.js';
import { writeTempSpec } from '../helpers/proxy.js';
import { collectRefs } from '../helpers/schemas.js';
import { syntheticSpec } from '../helpers/synthetic-spec.js';

/** Operation counts from the corpus's SOURCES.md (paths × methods, after resolving). */
const EXPECTED_OPERATIONS: Record<string, number> = {
  'petstore-swagger2': 20,
  'petstore-oas30': 20,
  'petstore-oas31': 20,
  gotify: 42,
  mastodon: 210,
  lago: 202,
  'supabase-auth': 59,
  'twilio-voice': 32,
};

// One after another: the work is CPU-bound, so running them at once gained nothing (11.0 s against
// 11.5 s) but made each test's time include the others' work (18.3 s for one on CI).
describe.each(corpusDocuments())('corpus document $id ($flavour)', (entry) => {
  it('loads, and every operation becomes a capability with a valid, unique name (§2.14)', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}${entry.entry}`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const catalog = deriveCatalog([{ source, doc }]);
    expect(catalog.capabilities).toHaveLength(EXPECTED_OPERATIONS[entry.id] as number);
    const names = catalog.capabilities.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-z0-9_]{1,64}$/);
    for (const c of catalog.capabilities) expect(c.description.length).toBeGreaterThan(0);

    const ajv = createSchemaValidator(catalog.formats);
    for (const c of catalog.capabilities) {
      const schemas: [string, JsonSchema | undefined][] = [
        ['input', c.argumentsSchema],
        ['output', c.output],
        ['success', c.operation.success.schema],
      ];
      for (const [kind, schema] of schemas) {
        if (!schema) continue;
        expect(schema.$schema, `${c.name} ${kind}`).toBe('https://json-schema.org/draft/2020-12/schema');
        expect(() => ajv.compile(schema), `${c.name} ${kind} compiles`).not.toThrow();
        const defs = (schema.$defs ?? {}) as Record<string, unknown>;
        for (const { path, ref } of collectRefs(schema)) {
          expect(ref, `${c.name} ${kind} ${path}`).toMatch(/^#\/\$defs\/[^/]+$/);
          expect(Object.hasOwn(defs, ref.slice('#/$defs/'.length)), `${c.name} ${kind} ${ref} exists`).toBe(
            true,
          );
        }
      }
      const required = (c.argumentsSchema.required ?? []) as string[];
      for (const p of c.operation.parameters.filter((p) => p.in === 'path')) {
        expect(required, `${c.name}: path parameter ${p.name} is required`).toContain(p.argument);
      }
      expect(c.argumentsSchema.additionalProperties).toBe(false);
    }
    // The largest takes 5.5 s alone, 16 s with two suites at once on 2 cores.
  }, 60_000);
});

describe('corpus traits', () => {
  it('Lago: OpenAPI 3.1 webhooks produce no capability; external relative $refs resolve', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}lago-multifile-oas31/openapi.yaml`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    expect(Object.keys((doc as { webhooks: object }).webhooks).length).toBeGreaterThan(0);
    const catalog = deriveCatalog([{ source, doc }]);
    expect(catalog.capabilities).toHaveLength(202);
    expect(collectRefs(doc).every(({ ref }) => ref.startsWith('#'))).toBe(true);
  });

  it('Mastodon: circular $refs (Account ↔ Account, Status → Status) become $defs', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}mastodon-oas31/schema.json`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const catalog = deriveCatalog([{ source, doc }]);
    const status = catalog.get('get_status');
    expect(status?.output?.$ref).toBe('#/$defs/Status');
    expect(Object.keys(status?.output?.$defs as object)).toEqual(
      expect.arrayContaining(['Account', 'Status']),
    );
  });

  it('Supabase Auth: no operationId anywhere, names come from method and path', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}supabase-auth-oas30/openapi.yaml`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const catalog = deriveCatalog([{ source, doc }]);
    expect(catalog.get('get_admin_users_by_user_id')?.operation.path).toBe('/admin/users/{userId}');
    expect(catalog.capabilities.every((c) => c.operation.operationId === undefined)).toBe(true);
  });

  it('Petstore 3.0: a path parameter and a body field of the same name put the body under `body`', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}petstore-oas30/petstore.yaml`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const update = deriveCatalog([{ source, doc }]).get('update_user');
    expect(Object.keys(update?.input?.properties as object)).toEqual(['username', 'body']);
    expect(update?.operation.body?.mode).toBe('wrapped');
  });

  it('Gotify (Swagger 2.0): a type: file form field becomes a base64 multipart part', async () => {
    const { source, doc } = await loadDocument(`${CORPUS_DIR}gotify-swagger2/spec.json`, {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const catalog = deriveCatalog([{ source, doc }]);
    const upload = catalog.capabilities.find((c) => c.operation.body?.mediaType === 'multipart/form-data');
    expect(upload?.operation.body?.binaryFields).toEqual(['file']);
    expect((upload?.input?.properties as Record<string, JsonSchema>).file).toMatchObject({
      type: 'string',
      contentEncoding: 'base64',
    });
  });
});

describe('large documents', () => {
  it('a generated document with 1,200 operations and several MB loads completely (timing: npm run bench)', async () => {
    const file = writeTempSpec(syntheticSpec(240, 100));
    expect(statSync(file).size).toBeGreaterThan(3 * 2 ** 20);
    const { source, doc } = await loadDocument(file, { allowRemoteRefs: false, allowHttp: false });
    const catalog = deriveCatalog([{ source, doc }]);
    expect(catalog.capabilities).toHaveLength(1200);
    expect(catalog.get('update_resource239')?.input?.required).toEqual(['id', 'field_0']);
  });
});
