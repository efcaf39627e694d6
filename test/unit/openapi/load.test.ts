/**
 * Loading OpenAPI documents: multi-file and circular $refs, the errors an operator sees for broken
 * documents, and the rules for remote $refs (opt-in, http opt-in, no local files for remote specs).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative as relativePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UserError } from '../../../src/errors.js';
import { createSchemaValidator } from '../../../src/openapi/ajv.js';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import { loadDocument, type LoadOptions } from '../../../src/openapi/load.js';
import { resolvePointer } from '../../../src/openapi/pointer.js';
import { collectRefs, inlineLocalRefs } from '../../helpers/schemas.js';

const SPECS = fileURLToPath(new URL('../../fixtures/specs/', import.meta.url));
const spec = (name: string): string => join(SPECS, name);
const LOCAL_ONLY: LoadOptions = { allowRemoteRefs: false, allowHttp: false };

let tmp = '';
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'aap-load-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

/** Writes `text` to `name` in this file's temp directory and returns the absolute path. */
function writeTemp(name: string, text: string): string {
  const file = join(tmp, name);
  writeFileSync(file, text);
  return file;
}

/** `text` as a literal inside a RegExp. */
function regexLiteral(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Awaits `promise`, which must reject with a UserError, and returns its message. */
async function failure(promise: Promise<unknown>): Promise<string> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UserError);
  return (err as UserError).message;
}

describe('multi-file documents', () => {
  it('resolves relative $refs across files and directories, leaving only document-local $refs', async () => {
    const { doc } = await loadDocument(spec('multi-file/openapi.yaml'), LOCAL_ONLY);
    const refs = collectRefs(doc);
    expect(refs.every(({ ref }) => ref.startsWith('#/'))).toBe(true);
    for (const { ref } of refs) expect(resolvePointer(doc, ref), ref).toBeDefined();
  });

  it('derives capabilities whose schemas come from the other files', async () => {
    const catalog = await loadCatalog([{ spec: spec('multi-file/openapi.yaml') }], LOCAL_ONLY);
    expect(catalog.capabilities.map((c) => c.name)).toEqual(['create_order', 'get_order', 'list_orders']);
    const create = catalog.get('create_order');
    // schemas/order.yaml, and schemas/money.yaml that it refers to, one directory further.
    expect(inlineLocalRefs(create?.input ?? {}).properties).toMatchObject({
      sku: { type: 'string', description: 'Stock keeping unit of the ordered item.' },
      quantity: { type: 'integer', minimum: 1 },
      price: {
        type: 'object',
        required: ['amount', 'currency'],
        properties: { currency: { pattern: '^[A-Z]{3}$' } },
      },
    });
    // A parameter defined in paths/orders.yaml.
    expect(catalog.get('get_order')?.input).toMatchObject({
      properties: { orderId: { type: 'string' } },
      required: ['orderId'],
    });
    expect(inlineLocalRefs(catalog.get('list_orders')?.output ?? {})).toMatchObject({
      type: 'array',
      items: { properties: { price: { properties: { amount: { type: 'number' } } } } },
    });
  });
});

describe('JSON documents (parsed from their text at once)', () => {
  const doc = {
    openapi: '3.0.3',
    info: { title: 'T', version: '1' },
    paths: {
      '/a': { get: { responses: { '200': { $ref: 'responses.json#/ok' } } } },
      '/b': { get: { responses: { '200': { $ref: 'responses.json#/ok' } } } },
    },
  };

  it('a root with $refs to another JSON file is bundled as a YAML one is', async () => {
    writeTemp('responses.json', JSON.stringify({ ok: { description: 'fine' } }));
    const { doc: loaded } = await loadDocument(writeTemp('root.json', JSON.stringify(doc)), LOCAL_ONLY);
    const { doc: fromYaml } = await loadDocument(writeTemp('root.yaml', JSON.stringify(doc)), LOCAL_ONLY);
    expect(loaded).toStrictEqual(fromYaml);
    // The bundler inlines the first use of the other file's response and points the second at it.
    expect(resolvePointer(loaded, '#/paths/~1a/get/responses/200')).toEqual({ description: 'fine' });
    expect(collectRefs(loaded).map(({ ref }) => ref)).toEqual(['#/paths/~1a/get/responses/200']);
  });

  it('a byte order mark or white space before the text changes nothing', async () => {
    const plain = { ...doc, paths: {} };
    const text = JSON.stringify(plain);
    const cases: [string, string][] = [
      ['bom.json', '\ufeff'],
      ['space.json', ' \r\n\t'],
      ['both.json', '\ufeff\n '],
    ];
    for (const [name, prefix] of cases) {
      expect((await loadDocument(writeTemp(name, `${prefix}${text}`), LOCAL_ONLY)).doc, name).toStrictEqual(
        plain,
      );
    }
  });
});

describe('circular $refs', () => {
  it('neither crash nor hang, and become $defs of each schema', { timeout: 5000 }, async () => {
    const catalog = await loadCatalog([{ spec: spec('circular.yaml') }], LOCAL_ONLY);
    const tree = catalog.get('get_tree')?.output as Record<string, any>;
    expect(tree.$ref).toBe('#/$defs/Node');
    expect(tree.$defs.Node.properties.children.items).toEqual({ $ref: '#/$defs/Node' });
    const person = catalog.get('create_person')?.input as Record<string, any>;
    expect(person.properties.body).toEqual({ $ref: '#/$defs/Person' });
    expect(Object.keys(person.$defs).sort()).toEqual(['Company', 'Person']);
    for (const schema of [tree, person]) {
      for (const { ref } of collectRefs(schema)) {
        expect(ref).toMatch(/^#\/\$defs\//);
        expect(resolvePointer(schema, ref), ref).toBeDefined();
      }
    }
  });

  it('keep their recursion: nested data is validated at every depth', async () => {
    const catalog = await loadCatalog([{ spec: spec('circular.yaml') }], LOCAL_ONLY);
    const validate = createSchemaValidator().compile(catalog.get('get_tree')?.output as object);
    expect(validate({ value: 'a', children: [{ value: 'b', children: [{ value: 'c' }] }] })).toBe(true);
    expect(validate({ value: 'a', children: [{ value: 'b', children: [{ value: 3 }] }] })).toBe(false);
  });

  it(
    'across files, a file referring to itself or two files referring to each other, load too',
    { timeout: 5000 },
    async () => {
      const catalog = await loadCatalog([{ spec: spec('circular-files/openapi.yaml') }], LOCAL_ONLY);
      expect(catalog.capabilities.map((c) => c.name)).toEqual(['create_employee', 'list_categories']);
      for (const c of catalog.capabilities) {
        const schema = (c.input ?? c.output) as Record<string, unknown>;
        expect(Object.keys(schema.$defs as object)).toHaveLength(1);
        for (const { ref } of collectRefs(schema)) expect(resolvePointer(schema, ref), ref).toBeDefined();
      }
    },
  );
});

describe('errors name the file and what is wrong', () => {
  it('a dangling $ref: the file, the JSON pointer where it stands and its target', async () => {
    const file = spec('dangling.yaml');
    const message = await failure(loadDocument(file, LOCAL_ONLY));
    expect(message).toContain(
      `${file} at #/paths/~1pets/get/responses/200/content/application~1json/schema: dangling $ref "#/components/schemas/Missing"`,
    );
  });

  it('a dangling $ref into another file: the root file and pointer, and the target with its file', async () => {
    const file = spec('dangling-external/openapi.yaml');
    const message = await failure(loadDocument(file, LOCAL_ONLY));
    expect(message).toContain(
      `${file} at #/paths/~1pets/get/responses/200/content/application~1json/schema: dangling $ref "${spec('dangling-external/schemas.yaml')}#/Missing"`,
    );
  });

  it('a $ref to a file that does not exist', async () => {
    const file = spec('missing-ref.yaml');
    const message = await failure(loadDocument(file, LOCAL_ONLY));
    expect(message).toContain(
      `${file} at #/paths/~1pets/get/responses/200/content/application~1json/schema: `,
    );
    expect(message).toContain(spec('does-not-exist.yaml'));
    expect(message).toContain('ENOENT');
  });

  it('a spec file that does not exist, or is a directory', async () => {
    expect(await failure(loadDocument(spec('nope.yaml'), LOCAL_ONLY))).toBe(
      `${spec('nope.yaml')}: spec file not found`,
    );
    expect(await failure(loadDocument(SPECS, LOCAL_ONLY))).toBe(`${SPECS}: spec file not found`);
  });

  it('a file that is not valid YAML or JSON: its parse error with line and column', async () => {
    // Written at run time: the repository's prettier --check would choke on a broken fixture.
    const cases: [string, string, RegExp][] = [
      ['broken.yaml', 'openapi: 3.0.3\ninfo:\n  title: Broken\n  version: [1.0.0\npaths: {}\n', /\(5:1\)$/],
      ['truncated.json', '{"openapi": "3.0.3", "info": {', /\(2:1\)$/],
      [
        'duplicate.yaml',
        'openapi: 3.0.3\ninfo: {title: a, version: "1"}\ninfo: {title: b, version: "1"}\npaths: {}\n',
        /duplicated mapping key \(3:1\)$/,
      ],
    ];
    for (const [name, text, where] of cases) {
      const file = writeTemp(name, text);
      const message = await failure(loadDocument(file, LOCAL_ONLY));
      expect(message.startsWith(`${file}: Error parsing ${file}: `), message).toBe(true);
      expect(message).toMatch(where);
      expect(message).not.toContain('Cannot read properties');
    }
  });

  it('an empty file', async () => {
    const message = await failure(loadDocument(spec('empty.yaml'), LOCAL_ONLY));
    expect(message).toContain(spec('empty.yaml'));
    expect(message).not.toContain('Cannot read properties');
  });

  it('a YAML file that is not OpenAPI', async () => {
    const file = spec('not-openapi.yaml');
    expect(await failure(loadDocument(file, LOCAL_ONLY))).toBe(
      `${file}: ${file} is not a valid Openapi API definition`,
    );
  });

  it('a JSON file that is not OpenAPI', async () => {
    const file = spec('not-openapi.json');
    const message = await failure(loadDocument(file, LOCAL_ONLY));
    expect(message).toMatch(new RegExp(`^${regexLiteral(file)}: Unsupported OpenAPI version: undefined\\.`));
  });

  it('an unsupported OpenAPI version', async () => {
    const file = spec('openapi-4.yaml');
    expect(await failure(loadDocument(file, LOCAL_ONLY))).toMatch(
      new RegExp(`^${regexLiteral(file)}: Unsupported OpenAPI version: 4\\.0\\.0\\. .*3\\.1\\.0.*3\\.0\\.3`),
    );
  });

  it('Swagger 1.2', async () => {
    const file = spec('swagger-1.2.json');
    expect(await failure(loadDocument(file, LOCAL_ONLY))).toBe(
      `${file}: Unrecognized Swagger version: 1.2. Expected 2.0`,
    );
  });
});

describe('remote documents and $refs', () => {
  /** Paths the test server was asked for, in order. */
  const requests: string[] = [];
  /** What the test server serves, by path; anything else is a 404. */
  const served = new Map<string, string>();
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    const body = served.get(req.url ?? '');
    if (body === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'application/yaml' }).end(body);
  });
  let base = '';

  const MONEY = 'type: object\nproperties:\n  served_over_http:\n    type: number\n';
  /** An OpenAPI document whose only operation answers with the schema at `ref`. */
  const docWithRef = (ref: string): string =>
    [
      'openapi: 3.0.3',
      'info: {title: Remote, version: "1"}',
      'paths:',
      '  /a:',
      '    get:',
      '      operationId: getA',
      '      responses:',
      "        '200':",
      '          description: ok',
      '          content:',
      '            application/json:',
      '              schema:',
      `                $ref: '${ref}'`,
      '',
    ].join('\n');
  const WHERE = '#/paths/~1a/get/responses/200/content/application~1json/schema';
  /** A local spec that $refs the test server. */
  let localRoot = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    localRoot = writeTemp('local.yaml', docWithRef(`${base}/schemas/money.yaml`));
  });
  afterAll(async () => {
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  });
  beforeEach(() => {
    requests.length = 0;
    served.clear();
    served.set('/schemas/money.yaml', MONEY);
  });

  it('refuses a remote $ref without allow_remote_refs, and never requests it', async () => {
    for (const allowHttp of [false, true]) {
      const message = await failure(loadDocument(localRoot, { allowRemoteRefs: false, allowHttp }));
      expect(message).toBe(
        `${localRoot} at ${WHERE}: remote $ref to ${base}/schemas/money.yaml is not allowed; pass --allow-remote-refs (or specs.allow_remote_refs: true) to fetch it`,
      );
    }
    expect(requests).toEqual([]);
  });

  it('refuses a plain-http remote $ref with allow_remote_refs alone, and never requests it', async () => {
    const message = await failure(loadDocument(localRoot, { allowRemoteRefs: true, allowHttp: false }));
    expect(message).toContain(`${localRoot} at ${WHERE}: ${base}/schemas/money.yaml is http;`);
    expect(message).toContain('--allow-http-specs');
    expect(requests).toEqual([]);
  });

  it('fetches a document with the token in its URL’s query, and names it without the token', async () => {
    served.set('/private/spec.yaml?private_token=Tok-Secret-7', docWithRef('#/components/schemas/M'));
    const url = `${base}/private/spec.yaml?private_token=Tok-Secret-7`;
    const message = await failure(loadDocument(url, { allowRemoteRefs: false, allowHttp: true }));
    expect(requests).toEqual(['/private/spec.yaml?private_token=Tok-Secret-7']);
    expect(message).toContain(`${base}/private/spec.yaml?private_token=…`);
    expect(message).not.toContain('Tok-Secret-7');
    served.set(
      '/private/spec.yaml?private_token=Tok-Secret-7',
      'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths: {}\n',
    );
    const loaded = await loadDocument(url, { allowRemoteRefs: false, allowHttp: true });
    // What the start-up log and every later message name the document by.
    expect(loaded.source).toBe(`${base}/private/spec.yaml?private_token=…`);
  });

  it('follows a remote $ref with allow_remote_refs and allow_http', async () => {
    const { doc } = await loadDocument(localRoot, { allowRemoteRefs: true, allowHttp: true });
    expect(requests).toEqual(['/schemas/money.yaml']);
    expect(resolvePointer(doc, WHERE)).toEqual({
      type: 'object',
      properties: { served_over_http: { type: 'number' } },
    });
  });

  it('fetches remote $refs through the guarded fetcher, with its limits and messages', async () => {
    served.set('/schemas/money.yaml', `${MONEY}description: '${'x'.repeat(4096)}'\n`);
    const message = await failure(
      loadDocument(localRoot, { allowRemoteRefs: true, allowHttp: true, fetchLimits: { maxBytes: 1024 } }),
    );
    expect(message).toBe(
      `${localRoot} at ${WHERE}: Fetching ${base}/schemas/money.yaml failed: the document exceeds the 1 KiB limit.`,
    );
    served.delete('/schemas/money.yaml');
    expect(await failure(loadDocument(localRoot, { allowRemoteRefs: true, allowHttp: true }))).toBe(
      `${localRoot} at ${WHERE}: Fetching ${base}/schemas/money.yaml failed: the server answered HTTP 404.`,
    );
  });

  /** A document of `count` component schemas, each a remote $ref to its own copy of `schema`. */
  function specOfRemoteSchemas(count: number, schema: string): string {
    const names = Array.from({ length: count }, (_, i) => `/schemas/part${i}.yaml`);
    for (const name of names) served.set(name, schema);
    return [
      'openapi: 3.0.3',
      'info: {title: Many, version: "1"}',
      'paths: {}',
      'components:',
      '  schemas:',
      ...names.map((name, i) => `    P${i}: {$ref: '${base}${name}'}`),
      '',
    ].join('\n');
  }

  it("one document's remote $refs together add up to at most 4 × the size limit", async () => {
    // Six schemas of ~900 B each under a 1 KiB cap: each fits, together they pass 4 KiB.
    const spec = specOfRemoteSchemas(6, `type: string\ndescription: '${'x'.repeat(880)}'\n`);
    const message = await failure(
      loadDocument(writeTemp('many.yaml', spec), {
        allowRemoteRefs: true,
        allowHttp: true,
        fetchLimits: { maxBytes: 1024 },
      }),
    );
    expect(message).toMatch(
      /failed: one document's remote \$refs may add up to at most 4 KiB \(4 × the document size limit\)\.$/,
    );
  });

  it('one document fetches at most 100 remote $refs', async () => {
    const spec = specOfRemoteSchemas(101, 'type: string\n');
    const message = await failure(
      loadDocument(writeTemp('tiny.yaml', spec), { allowRemoteRefs: true, allowHttp: true }),
    );
    expect(message).toMatch(/is not fetched: one document may fetch at most 100 remote \$refs, within 60 s$/);
    expect(requests.length).toBeLessThanOrEqual(100);
  });

  it("a remote spec's $ref to another origin on a private address is refused, and never requested", async () => {
    const port = new URL(base).port;
    // localhost resolves (to 127.0.0.1 or ::1), checked when resolved; 127.0.0.2 is an address.
    for (const other of [`http://localhost:${port}`, `http://127.0.0.2:${port}`]) {
      served.set('/openapi.yaml', docWithRef(`${other}/schemas/money.yaml`));
      const message = await failure(
        loadDocument(`${base}/openapi.yaml`, { allowRemoteRefs: true, allowHttp: true }),
      );
      expect(message).toMatch(
        new RegExp(
          `^${escape(`${base}/openapi.yaml at ${WHERE}: `)}.*${escape(`${other}/schemas/money.yaml`)}.*not a public address`,
        ),
      );
      expect(message).toContain("A remote spec's $refs reach only public addresses");
    }
    expect(requests).toEqual(['/openapi.yaml', '/openapi.yaml']);
  });

  it("a local spec is the operator's: its remote $refs may reach a private address", async () => {
    const local = writeTemp(
      'local-localhost.yaml',
      docWithRef(`http://localhost:${new URL(base).port}/schemas/money.yaml`),
    );
    await loadDocument(local, { allowRemoteRefs: true, allowHttp: true });
    expect(requests).toEqual(['/schemas/money.yaml']);
  });

  it('refuses an http:// spec URL without allow_http, and never requests it', async () => {
    served.set('/openapi.yaml', docWithRef('#/components/schemas/X'));
    const message = await failure(
      loadDocument(`${base}/openapi.yaml`, { allowRemoteRefs: true, allowHttp: false }),
    );
    expect(message).toBe(
      `${base}/openapi.yaml is http; use an https:// URL, or pass --allow-http-specs to allow plain-HTTP spec URLs.`,
    );
    expect(requests).toEqual([]);
  });

  it('loads an http:// spec URL with allow_http', async () => {
    served.set(
      '/openapi.yaml',
      `${docWithRef('#/components/schemas/Pet')}components:\n  schemas:\n    Pet: {type: object}\n`,
    );
    const catalog = await loadCatalog([{ spec: `${base}/openapi.yaml` }], {
      allowRemoteRefs: false,
      allowHttp: true,
    });
    expect(catalog.capabilities.map((c) => c.name)).toEqual(['get_a']);
    expect(requests).toEqual(['/openapi.yaml']);
  });

  it('loads a JSON spec URL whatever characters it holds, as the same file read locally', async () => {
    const json = JSON.stringify({
      openapi: '3.0.3',
      info: { title: 'Notes — “quoted”', version: '1', description: 'café, 東京, 😀' },
      paths: { '/a': { get: { operationId: 'getA', responses: { '200': { description: 'ok' } } } } },
    });
    served.set('/openapi.json', `\ufeff\n${json}`);
    const options = { allowRemoteRefs: false, allowHttp: true };
    const remote = await loadDocument(`${base}/openapi.json`, options);
    expect(remote.doc).toStrictEqual(JSON.parse(json));
    expect(remote.doc).toStrictEqual((await loadDocument(writeTemp('same.json', json), options)).doc);
    // Invalid JSON is reported with positions in the text as served.
    served.set('/bad.json', '{"info": "—",}');
    await expect(loadDocument(`${base}/bad.json`, options)).rejects.toThrow(
      /not valid JSON or YAML: .*position 13/,
    );
  });

  it('refuses a file:// $ref in a remote spec, even with every flag, without reading the file', async () => {
    const local = pathToFileURL(spec('multi-file/schemas/money.yaml')).href;
    served.set('/openapi.yaml', docWithRef(local));
    const message = await failure(
      loadDocument(`${base}/openapi.yaml`, { allowRemoteRefs: true, allowHttp: true }),
    );
    expect(message).toBe(
      `${base}/openapi.yaml at ${WHERE}: $ref to ${local} is not allowed: a remote spec cannot read local files`,
    );
    expect(requests).toEqual(['/openapi.yaml']);
  });

  it('resolves relative and absolute paths in a remote spec against its URL, never the local disk', async () => {
    // Both name a file that exists on the local disk: relative to the working directory, and absolute.
    const absolute = spec('multi-file/schemas/money.yaml');
    const relative = relativePath(process.cwd(), absolute);
    const rootUrl = `${base}/specs/relative.yaml`;
    const relativeUrl = new URL(relative, rootUrl);

    served.set('/specs/relative.yaml', docWithRef(relative));
    expect(await failure(loadDocument(rootUrl, { allowRemoteRefs: false, allowHttp: true }))).toBe(
      `${rootUrl} at ${WHERE}: remote $ref to ${relativeUrl.href} is not allowed; pass --allow-remote-refs (or specs.allow_remote_refs: true) to fetch it`,
    );

    served.set(relativeUrl.pathname, MONEY);
    const { doc } = await loadDocument(rootUrl, { allowRemoteRefs: true, allowHttp: true });
    expect(resolvePointer(doc, `${WHERE}/properties`)).toEqual({ served_over_http: { type: 'number' } });

    served.set('/specs/absolute.yaml', docWithRef(absolute));
    expect(
      await failure(loadDocument(`${base}/specs/absolute.yaml`, { allowRemoteRefs: true, allowHttp: true })),
    ).toBe(
      `${base}/specs/absolute.yaml at ${WHERE}: Fetching ${base}${absolute} failed: the server answered HTTP 404.`,
    );
    expect(requests).toEqual([
      '/specs/relative.yaml',
      '/specs/relative.yaml',
      relativeUrl.pathname,
      '/specs/absolute.yaml',
      absolute,
    ]);
  });
});

/** `text` as a regular expression that matches it literally. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
