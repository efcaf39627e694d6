/** The shipped configs, examples and docs are run, so they cannot rot (examples/kubernetes/: kubernetes.test.ts). */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startProxy } from '../../src/app.js';
import { checkSettings } from '../../src/check.js';
import { runCli } from '../../src/cli/main.js';
import { CONFIG_SCHEMA } from '../../src/config/schema.js';
import { resolveSettings } from '../../src/config/settings.js';
import { ERROR_CATALOGUE } from '../../src/errors.js';
import { POLICY_SCHEMA } from '../../src/policy/schema.js';
import { silentLogger } from '../../src/log.js';
import { loadCatalog } from '../../src/openapi/load-catalog.js';
import { getJson, ROOT, tempDbFile } from '../helpers/proxy.js';

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const loadOptions = { allowRemoteRefs: false, allowHttp: false };

describe('config/proxy.example.yaml', () => {
  it('documents every key of the schema and loads as a valid config', async () => {
    const settings = resolveSettings({ config: 'config/proxy.example.yaml' }, ROOT, {
      PETS_API_KEY: 'example-service-key',
      AGENT_AUTH_PROXY_WEBHOOK_SECRET: 'example-webhook-secret-0123456789',
      OIDC_CLIENT_SECRET: 'example-oidc-client-secret',
    });
    expect(settings.issuer).toBe('https://agents.example.com');
    expect(settings.apis[0]?.execution.credentials).toEqual({
      apiKey: { kind: 'secret', value: 'example-service-key' },
    });
    const documented = read('config/proxy.example.yaml');
    const keys = (schema: { properties?: Record<string, unknown> }): string[] =>
      Object.keys(schema.properties ?? {});
    type Node = { properties?: Record<string, unknown>; items?: Node };
    for (const [section, sub] of Object.entries(CONFIG_SCHEMA.properties) as [string, Node][]) {
      // Secret-file keys are documented commented out: the files exist only where it is deployed.
      const prefix = section.endsWith('_token_file') ? '(# )?' : '';
      expect(documented, section).toMatch(new RegExp(`^${prefix}${section}:`, 'm'));
      const items = sub.items ?? sub;
      // Likewise optional files under a section (jwks.ca_file): documented commented out.
      for (const key of keys(items))
        expect(documented, `${section}.${key}`).toMatch(
          new RegExp(`^\\s+(- )?${key.endsWith('_file') ? '(# )?' : ''}${key}:`, 'm'),
        );
    }
    const catalog = await loadCatalog(settings.apis, loadOptions);
    const names = catalog.capabilities.map((c) => c.name);
    // The first API as it is (the names policy.example.yaml uses); the second with
    // include: tag pets or /store/**; exclude: DELETE; prefix: sandbox.
    expect(names).toEqual([
      'create_pet',
      'delete_pet',
      'get_inventory',
      'get_pet',
      'list_pets',
      'place_order',
      'sandbox_create_pet',
      'sandbox_get_inventory',
      'sandbox_get_pet',
      'sandbox_list_pets',
      'sandbox_place_order',
    ]);
  });
});

describe('config/proxy.example.yaml with config/policy.example.yaml', () => {
  it('passes check together, as `check --config config/proxy.example.yaml` runs them', async () => {
    // The secrets the config reads from the environment; each at least the minimum length.
    const settings = resolveSettings({ config: 'config/proxy.example.yaml' }, ROOT, {
      PETS_API_KEY: 'example-service-key',
      AGENT_AUTH_PROXY_WEBHOOK_SECRET: 'example-webhook-secret-0123456789',
      OIDC_CLIENT_SECRET: 'example-oidc-client-secret',
    });
    expect(settings.policyFile).toBe(join(ROOT, 'config/policy.example.yaml'));
    // The same loaders start-up uses: every policy name, glob and selector must match the
    // config's catalog, so a mismatch between the two examples is a problem here.
    await expect(checkSettings(settings)).resolves.toMatchObject({
      policy: join(ROOT, 'config/policy.example.yaml'),
      warnings: [],
    });
  });
});

describe('config/proxy.yaml (the Docker image default)', () => {
  it('starts the bundled example behind the mock upstream', async () => {
    // A temp database: the config's own (data/ in the checkout) is for the image, not for tests.
    const settings = resolveSettings({ config: 'config/proxy.yaml', port: 0, db: tempDbFile() }, ROOT);
    const proxy = await startProxy(settings, { logger: silentLogger });
    try {
      expect((await getJson(`${proxy.url}/readyz`)).body).toEqual({ status: 'ready', capabilities: 6 });
      expect(proxy.mock).toBeDefined();
    } finally {
      await proxy.close();
    }
  });
});

describe('config/proxy.schema.json', () => {
  it('is the generated form of src/config/schema.ts (run `npm run schema` after changing it)', () => {
    expect(JSON.parse(read('config/proxy.schema.json'))).toEqual(CONFIG_SCHEMA);
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');

  it('mirrors .ci/run: npm ci and the build in the builder stage, non-root runtime with a health check', () => {
    expect(dockerfile).toMatch(/^FROM .* AS builder$/m);
    expect(dockerfile).toMatch(/^RUN npm ci$/m);
    expect(dockerfile).toMatch(/npm run build/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^EXPOSE 8080$/m);
    // The health check reads the address PID 1 (the ENTRYPOINT's proxy) was started with, and
    // asks liveness (a database outage must not get every container restarted).
    expect(dockerfile).toMatch(
      /^HEALTHCHECK .*\n {2}CMD \["node", "dist\/cli.js", "health", "--pid", "1", "--live"\]$/m,
    );
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "dist\/cli.js"\]$/m);
    expect(read('.ci/run')).toMatch(/^npm ci$/m);
  });

  it('starts with a command line that passes check (listening on 0.0.0.0 with an --issuer)', async () => {
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
    const args = JSON.parse(cmd ?? '[]') as string[];
    expect(args[0]).toBe('serve');
    expect(args).toContain('--issuer');
    let err = '';
    const code = await runCli(['check', ...args.slice(1)], {
      out: () => undefined,
      err: (t) => void (err += t),
    });
    expect(code, err).toBe(0);
  });
});

describe('README', () => {
  const readme = read('README.md');

  it("lists exactly the error catalogue's codes with their statuses", () => {
    const section = readme.slice(readme.indexOf('## Errors'), readme.indexOf('## Security model'));
    const rows = [...section.matchAll(/^\|\s*`([a-z_]+)`\s*\|\s*(\d{3})\s*\|/gm)].map((m) => [
      m[1],
      Number(m[2]),
    ]);
    const catalogue = Object.entries(ERROR_CATALOGUE).map(([code, e]) => [code, e.status]);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.sort()).toEqual(catalogue.sort());
  });

  it('npm start builds only what changed: the build is incremental, and after the pretest build it is up to date', () => {
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.prestart).toBe('npm run build --silent');
    expect(pkg.scripts.build).toBe('tsc -b tsconfig.build.json');
    // The build as `npm start` runs it (a no-op after the pretest build), then tsc's own
    // up-to-date check: a second start has nothing to compile.
    const tsc = (...args: string[]) =>
      spawnSync(
        process.execPath,
        [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', 'tsconfig.build.json', ...args],
        {
          cwd: ROOT,
          encoding: 'utf8',
        },
      );
    expect(tsc().status).toBe(0);
    expect(tsc('--dry', '--verbose').stdout).toMatch(/Project '.*tsconfig\.build\.json' is up to date/);
  });

  it('quick start is the two commands package.json and .ci/run implement', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toMatch(/^npm test\s/m);
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toContain('examples/openapi/petstore.yaml');
    expect(pkg.scripts.start).toContain('--mock-upstream');
    const ci = read('.ci/run');
    for (const command of ['npm ci', 'npm run lint', 'npm test'])
      expect(ci).toMatch(new RegExp(`^${command}$`, 'm'));
  });

  it.each([
    ['config', CONFIG_SCHEMA, '## Configuration reference', '## Policy reference'],
    ['policy', POLICY_SCHEMA, '## Policy reference', '### How grants are decided'],
  ] as const)('the %s reference table has a row for every key of its schema', (_, schema, from, to) => {
    const section = readme.slice(readme.indexOf(from), readme.indexOf(to));
    const documented = section
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .flatMap((line) => rowKeys(line.split('|')[1] ?? ''));
    expect(documented.length).toBeGreaterThan(20);
    const missing = schemaKeys(schema as SchemaNode, schema as SchemaNode, '').filter(
      (key) =>
        !documented.some(
          (row) =>
            row === key ||
            row.startsWith(`${key}.`) ||
            key.startsWith(`${row}.`) ||
            key.startsWith(`${row}[`),
        ),
    );
    expect(missing).toEqual([]);
  });
});

interface SchemaNode {
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly items?: SchemaNode;
  readonly $ref?: string;
  readonly $defs?: Readonly<Record<string, SchemaNode>>;
}

/** Every key path a config can set: `server.port`, `apis[].spec`, `sign_in.local.users[]`. */
function schemaKeys(node: SchemaNode, root: SchemaNode, path: string): string[] {
  const resolved = (n: SchemaNode): SchemaNode =>
    n.$ref ? (root.$defs?.[n.$ref.split('/').pop() ?? ''] ?? n) : n;
  const here = resolved(node);
  if (here.properties) {
    return Object.entries(here.properties).flatMap(([key, child]) =>
      schemaKeys(child, root, path ? `${path}.${key}` : key),
    );
  }
  const items = here.items ? resolved(here.items) : undefined;
  if (items?.properties) return schemaKeys(items, root, `${path}[]`);
  return [path];
}

/** A row's first cell: `` `a.b.c` `` or `` `a.b`, `c`, `d` `` / `` `a.b` / `c` `` (siblings of the first). */
function rowKeys(cell: string): string[] {
  const names = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
  const [first, ...siblings] = names;
  if (first === undefined) return [];
  const parent = first.includes('.') ? first.slice(0, first.lastIndexOf('.') + 1) : '';
  return [first, ...siblings.map((name) => parent + name)];
}
