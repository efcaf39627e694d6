/**
 * The README's configuration and policy tables give each key's default; this holds that column to
 * the code. A default the schema declares must be written exactly as the schema has it; a default
 * computed in code (no schema default) is either a documented absence ("none") or has its own
 * check below against the code that computes it. A row that is neither fails, naming the key.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_SCHEMA } from '../../../src/config/schema.js';
import { resolveSettings } from '../../../src/config/settings.js';
import type { Catalog } from '../../../src/openapi/catalog.js';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import { defaultPolicy, parsePolicy } from '../../../src/policy/policy.js';
import { POLICY_SCHEMA } from '../../../src/policy/schema.js';
import { PETSTORE, ROOT } from '../../helpers/proxy.js';

interface SchemaNode {
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly items?: SchemaNode;
  readonly $ref?: string;
  readonly $defs?: Readonly<Record<string, SchemaNode>>;
  readonly default?: unknown;
}

interface Row {
  readonly key: string;
  readonly documented: string;
}

const README = readFileSync(`${ROOT}README.md`, 'utf8');

/** The rows of the table in the README section `from`…`to`: key → its Default cell (one per key). */
function tableRows(from: string, to: string): Row[] {
  const lines = README.slice(README.indexOf(from), README.indexOf(to)).split('\n');
  const header = (lines.find((l) => l.startsWith('| Key')) ?? '').split('|').map((c) => c.trim());
  const column = header.indexOf('Default');
  expect(column, `${from}: a Default column`).toBeGreaterThan(0);
  return lines
    .filter((l) => l.startsWith('| `'))
    .flatMap((line) => {
      const cells = line.split('|').map((c) => c.trim());
      const keys = (cells[1] ?? '').split(/ \/ |, /).map((k) => k.replace(/`/g, ''));
      const defaults = (cells[column] ?? '').split(' / ');
      const parent = (keys[0] ?? '').replace(/[^.\]]*$/, '');
      return keys.map((key, i) => ({
        key: i === 0 ? key : `${parent}${key}`,
        documented: defaults.length === keys.length ? (defaults[i] ?? '') : (cells[column] ?? ''),
      }));
    });
}

/** The schema node of a key path (`a.b`, `a[].b`), following local $refs. */
function schemaNode(root: SchemaNode, path: string): SchemaNode | undefined {
  const resolve = (n: SchemaNode | undefined): SchemaNode | undefined =>
    n?.$ref ? { ...root.$defs?.[n.$ref.split('/').pop() ?? ''], ...n } : n;
  let node: SchemaNode | undefined = root;
  for (const part of path.replace(/\[\]/g, '.[]').split('.')) {
    node = resolve(node);
    node = part === '[]' ? node?.items : node?.properties?.[part];
  }
  return resolve(node);
}

/** A value as the README writes it: `10m`, `[delegated]`, `{}`, `null`. */
function render(value: unknown): string {
  if (Array.isArray(value)) return `\`[${value.map((v) => String(v)).join(', ')}]\``;
  if (value !== null && typeof value === 'object') return `\`${JSON.stringify(value)}\``;
  return `\`${String(value)}\``;
}

/** Cells that say a key has no value unless given. */
const ABSENT = /^(none|required|off|nothing|everything)\b/;

let catalog: Catalog;
beforeAll(async () => {
  catalog = await loadCatalog([{ spec: PETSTORE }], { allowRemoteRefs: false, allowHttp: false });
});

const sorted = (names: Iterable<string>): string[] => [...names].sort();
const names = (): string[] => catalog.capabilities.map((c) => c.name);
const methodOf = (name: string): string => catalog.get(name)?.operation.method ?? '';

/** Defaults computed in code, each checked against that code. */
const COMPUTED: Readonly<Record<string, (documented: string) => void>> = {
  'capabilities.public': (documented) => {
    expect(documented).toBe('every capability; `[]`: none');
    expect(sorted(parsePolicy('{}', 'p.yaml', catalog).public)).toEqual(sorted(names()));
    expect(sorted(parsePolicy('capabilities: {public: []}', 'p.yaml', catalog).public)).toEqual([]);
  },
  'capabilities.defaults': (documented) => {
    expect(documented).toBe('`[]` (no file: GET/HEAD ops)');
    expect(sorted(parsePolicy('{}', 'p.yaml', catalog).defaults)).toEqual([]);
    const safe = names().filter((n) => ['get', 'head'].includes(methodOf(n)));
    expect(sorted(defaultPolicy(catalog).defaults)).toEqual(sorted(safe));
  },
  'capabilities.high_risk': (documented) => {
    expect(documented).toBe('`[]` (no file: other methods)');
    expect(sorted(parsePolicy('{}', 'p.yaml', catalog).highRisk)).toEqual([]);
    const unsafe = names().filter((n) => !['get', 'head'].includes(methodOf(n)));
    expect(sorted(defaultPolicy(catalog).highRisk)).toEqual(sorted(unsafe));
  },
  // Derived from the listening address at start-up (app.ts), so the settings leave it unset.
  'server.issuer': (documented) => {
    expect(documented).toBe('`http://{host}:{port}`');
    expect(schemaNode(CONFIG_SCHEMA as SchemaNode, 'server.issuer')?.default).toBeUndefined();
    expect(resolveSettings({ specs: [PETSTORE] }, ROOT).issuer).toBeUndefined();
  },
  database: (documented) => {
    expect(documented).toBe('`./data/agent-auth-proxy.db`');
    expect(resolveSettings({ specs: [PETSTORE] }, ROOT).database).toEqual({
      kind: 'sqlite',
      file: `${ROOT}data/agent-auth-proxy.db`,
    });
  },
};

describe.each([
  ['configuration', CONFIG_SCHEMA, '## Configuration reference', '## Policy reference'],
  ['policy', POLICY_SCHEMA, '## Policy reference', '### How grants are decided'],
] as const)('the %s table’s Default column', (_, schema, from, to) => {
  const rows = tableRows(from, to);

  it('has rows to check', () => {
    expect(rows.length).toBeGreaterThan(20);
  });

  it.each(rows.map((r) => [r.key, r] as const))('%s', (key, { documented }) => {
    // `hosts[]` documents the list itself, not one of its items.
    const node = schemaNode(schema as SchemaNode, key.replace(/\[\]$/, ''));
    const computed = COMPUTED[key];
    if (computed) {
      computed(documented);
    } else if (documented === '`execution.*`') {
      // A per-API override: no default of its own, so the global `execution.` value applies.
      expect(node?.default, key).toBeUndefined();
      const global = schemaNode(schema as SchemaNode, key.replace(/^apis\[\]\./, 'execution.'));
      expect(global?.default, `${key}: execution.* has a default`).toBeDefined();
    } else if (node && node.default !== undefined) {
      expect(documented, `${key}: the schema's default`).toBe(render(node.default));
    } else {
      // No schema default and no check of its own: the row must say the key is absent unless set,
      // or describe a value the code derives (which then needs an entry in COMPUTED).
      expect(
        ABSENT.test(documented) || !documented.startsWith('`'),
        `${key}: "${documented}" looks like a literal default the schema does not declare; add it to the schema or to COMPUTED`,
      ).toBe(true);
    }
  });
});
