/**
 * The command line as an operator uses it. Most commands run in this process through the same
 * `runCli` the executable calls (its output captured), which is what keeps this file quick; the
 * executable itself (`node dist/cli.js`, built by the pretest step) runs as a child process where
 * the process matters: exit codes and streams of a real process, serving, SIGTERM, a taken port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { CLI, ensureBuiltCli, killChildren, ROOT } from '../helpers/cli-process.js';
import { syntheticSpec } from '../helpers/synthetic-spec.js';

const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
const SPECS = join(ROOT, 'test/fixtures/specs');
const STACK_FRAME = '    at ';

/** Every child this file started, killed (by PID) after each test if it is still running. */
const children = new Set<ChildProcess>();

interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

interface Running {
  child: ChildProcess;
  /** Resolves with the first JSON log line on stdout whose `msg` is `msg`; rejects if the process exits first. */
  logLine(msg: string): Promise<Record<string, unknown>>;
  exited: Promise<Exited>;
}

function start(args: readonly string[], cwd = ROOT): Running {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  const waiters: (() => void)[] = [];
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const wake of waiters) wake();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<Exited>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
      for (const wake of waiters) wake();
    });
  });
  const logLine = (msg: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        // Complete lines only: a chunk may end in the middle of one.
        for (const line of stdout.slice(0, stdout.lastIndexOf('\n') + 1).split('\n')) {
          let entry: Record<string, unknown>;
          try {
            entry = JSON.parse(line) as Record<string, unknown>;
          } catch {
            continue; // not a log line
          }
          if (entry.msg === msg) {
            resolve(entry);
            return;
          }
        }
        if (child.exitCode !== null || child.signalCode !== null) {
          reject(
            new Error(`exited (${child.exitCode ?? child.signalCode}) before logging "${msg}": ${stderr}`),
          );
        }
      };
      waiters.push(check);
      check();
    });
  return { child, logLine, exited };
}

/** Runs the built CLI as a process to completion. */
function runProcess(args: readonly string[], cwd = ROOT): Promise<Exited> {
  return start(args, cwd).exited;
}

/** Runs a command line in this process (the CLI's own runCli), its output captured. */
async function run(args: readonly string[]): Promise<Exited> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { out: (t) => void (stdout += t), err: (t) => void (stderr += t) });
  return { code, signal: null, stdout, stderr };
}

/** `text` as a literal inside a RegExp. */
function regexLiteral(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** An operator error: exit code 2, one message on stderr, nothing on stdout, no stack trace. */
function expectOperatorError(result: Exited): void {
  expect(result.code, result.stderr).toBe(2);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(/^agent-auth-proxy: /);
  expect(result.stderr).not.toContain(STACK_FRAME);
  expect(result.stderr).not.toContain('unexpected error');
}

let tmp = '';

/** A config with two mistakes (written at run time into the temp directory), and what names them. */
function invalidConfig(name: string): string {
  const config = join(tmp, name);
  writeFileSync(config, 'server:\n  port: abc\napis:\n  - spec: petstore.yaml\n    upstream: ftp://legacy\n');
  return config;
}
function invalidConfigErrors(config: string): string {
  return [
    `agent-auth-proxy: ${config}: server.port: must be an integer (got "abc")`,
    `${config}: apis[0].upstream: must be an http(s) URL (got "ftp://legacy")`,
    '',
  ].join('\n');
}
beforeAll(() => {
  expect(ensureBuiltCli(), `${CLI} is missing: run npm run build`).toBe(true);
  tmp = mkdtempSync(join(tmpdir(), 'aap-cli-'));
});
afterEach(() => killChildren(children));
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

describe('help and version', () => {
  it('--help and -h print the usage and exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const result = await run([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^Usage:\n {2}agent-auth-proxy \[serve\] \[options\]/);
      expect(result.stdout).toContain('agent-auth-proxy capabilities [options] [--json]');
      expect(result.stdout).toContain('--allow-remote-refs');
      expect(result.stderr).toBe('');
    }
  });

  it('--version and -v print the package version and exit 0 (the executable, then in-process)', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(await runProcess(['--version'])).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
    for (const flag of ['--version', '-v']) {
      const result = await run([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`${version}\n`);
    }
  });
});

describe('what each command loads', () => {
  // The packages (CommonJS, so listed in require.cache) a command line loaded, run through the
  // built runCli in a fresh process: what the executable would load for it.
  async function packagesLoadedBy(args: readonly string[]): Promise<{ code: number; packages: string[] }> {
    const probe = join(tmp, 'probe-packages.mjs');
    writeFileSync(
      probe,
      [
        "import { createRequire } from 'node:module';",
        'const { runCli } = await import(process.argv[2]);',
        'const code = await runCli(JSON.parse(process.argv[3]), { out: () => {}, err: () => {} });',
        'const files = Object.keys(createRequire(import.meta.url).cache);',
        'const names = files.map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(f)?.[1]).filter(Boolean);',
        'console.log(JSON.stringify({ code, packages: [...new Set(names)].sort() }));',
      ].join('\n'),
    );
    const main = pathToFileURL(join(ROOT, 'dist/cli/main.js')).href;
    const child = spawn(process.execPath, [probe, main, JSON.stringify(args)], { cwd: tmp });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    expect(code, stdout).toBe(0);
    return JSON.parse(stdout) as { code: number; packages: string[] };
  }

  // The server's libraries: about 200 ms and 40 MiB to load, paid by every run that loads them.
  const SERVER_PACKAGES = ['ajv', 'better-sqlite3', 'pino', 'prom-client', 'undici'];

  it("--version, --help, health, agent and admin load none of the server's libraries", async () => {
    const lines = [
      ['--version'],
      ['--help'],
      ['health', '--host', '127.0.0.1', '--port', '1'],
      ['agent', '--help'],
      ['admin', '--help'],
    ];
    for (const args of lines) {
      const { packages } = await packagesLoadedBy(args);
      expect(
        packages.filter((p) => SERVER_PACKAGES.includes(p)),
        args.join(' '),
      ).toEqual([]);
    }
  });

  it('capabilities loads the OpenAPI parser but neither the database, the logger nor metrics', async () => {
    const { code, packages } = await packagesLoadedBy(['capabilities', '--spec', PETSTORE]);
    expect(code).toBe(0);
    expect(packages).toContain('@apidevtools/swagger-parser');
    expect(packages).toContain('ajv');
    for (const absent of ['better-sqlite3', 'pino', 'prom-client', 'undici'])
      expect(packages).not.toContain(absent);
  });
});

describe('help and version per command', () => {
  it('each command prints its own help: serve and capabilities their own flags only', async () => {
    const serve = await run(['serve', '--help']);
    expect(serve.code).toBe(0);
    expect(serve.stdout).toMatch(/^Usage: agent-auth-proxy \[serve\] \[options\]\n/);
    expect(serve.stdout).toContain('--admin-token-file FILE');
    expect(serve.stdout).not.toContain('--json');

    const capabilities = await run(['capabilities', '--help']);
    expect(capabilities.code).toBe(0);
    expect(capabilities.stdout).toMatch(/^Usage: agent-auth-proxy capabilities \[options\] \[--json\]\n/);
    expect(capabilities.stdout).toContain('--json');
    expect(capabilities.stdout).toContain('--spec FILE|URL');
    expect(capabilities.stdout).not.toContain('--admin-token');
    expect(capabilities.stdout).not.toContain('--port');

    const admin = await run(['admin', '--help']);
    expect(admin.code).toBe(0);
    expect(admin.stdout).toMatch(/^Usage:\n {2}agent-auth-proxy admin approvals list/);

    const hash = await run(['hash-password', '--help']);
    expect(hash.code).toBe(0);
    expect(hash.stdout).toMatch(/^Usage: agent-auth-proxy hash-password < password\n/);
  });

  it('--version works with every command', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const args of [
      ['serve', '--version'],
      ['capabilities', '--version'],
      ['admin', '--version'],
      ['admin', 'approvals', 'list', '--version'],
      ['hash-password', '--version'],
    ]) {
      expect(await run(args), args.join(' ')).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('a flag of another command is refused, naming the command', async () => {
    const serve = await run(['serve', '--spec', PETSTORE, '--json']);
    expectOperatorError(serve);
    expect(serve.stderr).toBe(
      'agent-auth-proxy: serve does not take --json\nRun agent-auth-proxy serve --help for usage.\n',
    );
    const capabilities = await run(['capabilities', '--spec', PETSTORE, '--port', '9']);
    expectOperatorError(capabilities);
    expect(capabilities.stderr).toContain('capabilities does not take --port');
    expectOperatorError(await run(['hash-password', 'extra']));
  });
});

describe('operator mistakes exit 2 with a message and no stack trace', () => {
  it('the executable: exit code 2, the message on stderr, nothing on stdout', async () => {
    const result = await runProcess(['capabilities', '--spec', PETSTORE, '--bogus']);
    expectOperatorError(result);
    expect(result.stderr).toContain("Unknown option '--bogus'");
  });

  it('an unknown flag', async () => {
    const result = await run(['capabilities', '--spec', PETSTORE, '--bogus']);
    expectOperatorError(result);
    expect(result.stderr).toContain("Unknown option '--bogus'");
    expect(result.stderr).toContain('Run agent-auth-proxy --help for usage.');
  });

  it('an unknown command', async () => {
    const result = await run(['frobnicate', '--spec', PETSTORE]);
    expectOperatorError(result);
    expect(result.stderr).toBe(
      'agent-auth-proxy: unknown command "frobnicate"\nRun agent-auth-proxy --help for usage.\n',
    );
  });

  it('an extra argument', async () => {
    const result = await run(['capabilities', 'extra', '--spec', PETSTORE]);
    expectOperatorError(result);
    expect(result.stderr).toContain('unexpected argument "extra"');
  });

  it('a --port that is not a port number', async () => {
    for (const port of ['abc', '70000', '-1', '80.5']) {
      const result = await run(['serve', '--spec', PETSTORE, `--port=${port}`]);
      expectOperatorError(result);
      expect(result.stderr).toBe(
        `agent-auth-proxy: --port ${JSON.stringify(port)}: must be a number from 0 to 65535\n`,
      );
    }
  });

  it('a --workers that is not a worker count, or more than one worker on SQLite', async () => {
    for (const workers of ['0', '1.5', 'two', '65']) {
      const result = await run(['serve', '--spec', PETSTORE, `--workers=${workers}`]);
      expectOperatorError(result);
      expect(result.stderr).toBe(
        `agent-auth-proxy: --workers ${JSON.stringify(workers)}: must be a whole number from 1 to 64\n`,
      );
    }
    // Each worker would keep its own replay cache and rate buckets (test/integration/postgres/workers.test.ts).
    for (const command of ['serve', 'check']) {
      const result = await run([command, '--spec', PETSTORE, '--workers', '2', '--db', ':memory:']);
      expect(result.code).toBe(command === 'serve' ? 2 : 1);
      expect(result.stderr).toBe(
        `agent-auth-proxy: --workers 2 needs a shared store: replay and rate state live in one process with SQLite; use --db postgres://… (or database: in the config)\n`,
      );
    }
  });

  it('listening on every interface without --issuer: the URL agents reach cannot be derived', async () => {
    for (const host of ['0.0.0.0', '::']) {
      const result = await run(['serve', '--spec', PETSTORE, '--host', host, '--port', '0']);
      expectOperatorError(result);
      expect(result.stderr).toContain(`server.host ${host} listens on every interface`);
      expect(result.stderr).toContain('set --issuer (server.issuer)');
    }
  });

  it('an unknown --log-level', async () => {
    const result = await run(['serve', '--spec', PETSTORE, '--log-level', 'loud']);
    expectOperatorError(result);
    expect(result.stderr).toContain('--log-level "loud": must be one of debug, info, warn, error, silent');
  });

  it('no API at all', async () => {
    const result = await run(['capabilities']);
    expectOperatorError(result);
    expect(result.stderr).toContain('no API to serve');
  });

  it('more --upstream than --spec', async () => {
    const result = await run([
      'capabilities',
      '--spec',
      PETSTORE,
      '--upstream',
      'https://a.example.com',
      '--upstream',
      'https://b.example.com',
    ]);
    expectOperatorError(result);
    expect(result.stderr).toContain('--upstream was given 2 times for 1 --spec');
  });

  it('a spec that is not valid YAML: the file and the parse error', async () => {
    // Written at run time: the repository's prettier --check would choke on a broken fixture.
    const file = join(tmp, 'broken.yaml');
    writeFileSync(file, 'openapi: 3.0.3\ninfo:\n  title: Broken\n  version: [1.0.0\npaths: {}\n');
    const result = await run(['capabilities', '--spec', file]);
    expectOperatorError(result);
    expect(result.stderr).toMatch(
      new RegExp(
        `^agent-auth-proxy: ${regexLiteral(file)}: Error parsing ${regexLiteral(file)}: .+\\(5:1\\)\\n$`,
      ),
    );
  });

  it('a spec that is not OpenAPI', async () => {
    const file = join(SPECS, 'not-openapi.yaml');
    const result = await run(['capabilities', '--spec', file]);
    expectOperatorError(result);
    expect(result.stderr).toContain(`${file}: ${file} is not a valid Openapi API definition`);
  });

  it('a spec file that does not exist', async () => {
    const result = await run(['capabilities', '--spec', 'no/such/spec.yaml']);
    expectOperatorError(result);
    expect(result.stderr).toBe(`agent-auth-proxy: ${join(ROOT, 'no/such/spec.yaml')}: spec file not found\n`);
  });

  it('a dangling $ref: the file, the JSON pointer and the target', async () => {
    const file = join(SPECS, 'dangling.yaml');
    const result = await run(['serve', '--spec', file, '--port', '0']);
    expectOperatorError(result);
    expect(result.stderr).toContain(
      `${file} at #/paths/~1pets/get/responses/200/content/application~1json/schema: dangling $ref "#/components/schemas/Missing"`,
    );
  });

  it('an invalid config file: the file and the key path of every problem', async () => {
    const config = invalidConfig('invalid.yaml');
    const result = await run(['capabilities', '--config', config]);
    expectOperatorError(result);
    expect(result.stderr).toBe(invalidConfigErrors(config));
  });

  it('a config file with a duplicate key: the file and the line', async () => {
    const config = join(tmp, 'duplicate.yaml');
    writeFileSync(config, `apis:\n  - spec: ${PETSTORE}\n    prefix: a\n    prefix: b\n`);
    const result = await run(['capabilities', '--config', config]);
    expectOperatorError(result);
    expect(result.stderr).toContain(`${config}: Map keys must be unique at line 4, column 5`);
  });

  it('a config file that does not exist', async () => {
    const result = await run(['capabilities', '--config', join(tmp, 'missing.yaml')]);
    expectOperatorError(result);
    expect(result.stderr).toContain(`${join(tmp, 'missing.yaml')}: config file not found or not readable`);
  });
});

describe('capabilities', () => {
  const PETSTORE_NAMES = ['create_pet', 'delete_pet', 'get_inventory', 'get_pet', 'list_pets', 'place_order'];

  it('a reader that stops early (| head) ends the command quietly, exit 0, no stack trace', async () => {
    // Megabytes of output: still being written when the reader goes.
    const spec = join(mkdtempSync(join(tmpdir(), 'aap-epipe-')), 'large.json');
    writeFileSync(spec, JSON.stringify(syntheticSpec(400)));
    const running = start(['capabilities', '--json', '--spec', spec]);
    // Read the first bytes, then close the pipe, as `head -c 100` does.
    await new Promise<void>((resolve) => running.child.stdout?.once('data', () => resolve()));
    running.child.stdout?.destroy();
    const exited = await running.exited;
    expect(exited.stderr).toBe('');
    expect(exited.code).toBe(0);
  });

  it('prints a table of the catalog', async () => {
    const result = await run(['capabilities', '--spec', 'examples/openapi/petstore.yaml']);
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toMatch(/^NAME +METHOD +PATH +DESCRIPTION$/);
    expect(lines.slice(1, 7).map((l) => l.split(/ +/)[0])).toEqual(PETSTORE_NAMES);
    expect(lines).toContain('list_pets      GET     /pets             List pets');
    expect(lines).toContain('delete_pet     DELETE  /pets/{petId}     Remove a pet');
    expect(result.stdout.endsWith('\n6 capabilities from 1 API\n')).toBe(true);
  });

  it('--json prints {capabilities, warnings} as parseable JSON', async () => {
    const result = await run(['capabilities', '--spec', 'examples/openapi/petstore.yaml', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const json = JSON.parse(result.stdout);
    expect(Object.keys(json)).toEqual(['capabilities', 'warnings']);
    expect(json.warnings).toEqual([]);
    expect(json.capabilities.map((c: { name: string }) => c.name)).toEqual(PETSTORE_NAMES);
    for (const c of json.capabilities) {
      expect(Object.keys(c)).toEqual(expect.arrayContaining(['name', 'description', 'method', 'path']));
      expect(c.method).toMatch(/^[A-Z]+$/);
    }
    const create = json.capabilities.find((c: { name: string }) => c.name === 'create_pet');
    expect(create).toMatchObject({
      method: 'POST',
      path: '/pets',
      description: expect.stringContaining('Add a pet'),
    });
    expect(create.input).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
    });
  });

  it('--config with two APIs: prefixes per API, DELETE operations excluded, specs relative to the config', async () => {
    const dir = mkdtempSync(join(tmp, 'two-apis-'));
    writeFileSync(
      join(dir, 'inventory.json'),
      JSON.stringify({
        openapi: '3.0.3',
        info: { title: 'Inventory', version: '1.0.0' },
        servers: [{ url: 'https://inventory.example.com' }],
        paths: {
          '/items': {
            get: { operationId: 'listItems', responses: { '200': { description: 'ok' } } },
            delete: { operationId: 'purgeItems', responses: { '204': { description: 'gone' } } },
          },
          '/items/{id}': {
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            put: { operationId: 'replaceItem', responses: { '200': { description: 'ok' } } },
            delete: { operationId: 'deleteItem', responses: { '204': { description: 'gone' } } },
          },
        },
      }),
    );
    const config = join(dir, 'proxy.yaml');
    writeFileSync(
      config,
      [
        'apis:',
        `  - spec: ${PETSTORE}`,
        '    prefix: shop',
        '    exclude:',
        '      - methods: [DELETE]',
        '  - spec: inventory.json',
        '    prefix: stock',
        '    exclude:',
        '      - methods: [DELETE]',
        '',
      ].join('\n'),
    );

    const result = await run(['capabilities', '--config', config, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const { capabilities } = JSON.parse(result.stdout) as {
      capabilities: { name: string; method: string }[];
    };
    expect(capabilities.map((c) => c.name)).toEqual([
      'shop_create_pet',
      'shop_get_inventory',
      'shop_get_pet',
      'shop_list_pets',
      'shop_place_order',
      'stock_list_items',
      'stock_replace_item',
    ]);
    expect(capabilities.filter((c) => c.method === 'DELETE')).toEqual([]);

    const table = await run(['capabilities', '--config', config]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toContain('shop_list_pets');
    expect(table.stdout).not.toMatch(/delete|purge|DELETE/);
    expect(table.stdout.endsWith('\n7 capabilities from 2 APIs\n')).toBe(true);
  });
});

describe('check', () => {
  it('a good command line: exit 0, what was checked, and nothing written (no database, no port)', async () => {
    const db = join(tmp, 'check.db');
    const result = await run(['check', '--spec', PETSTORE, '--db', db, '--port', '1']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('ok: 6 capabilities from 1 API, policy (built-in)\n');
    // What start-up would warn about is said too.
    expect(result.stderr).toBe(
      'warning: API petstore: operations require security scheme apiKey but no credential is configured\n',
    );
    expect(existsSync(db)).toBe(false);
  });

  it('an invalid config: exit 1 and every problem with the file and its key path', async () => {
    const config = invalidConfig('check-invalid.yaml');
    const result = await run(['check', '--config', config]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(invalidConfigErrors(config));
  });

  it('a policy naming a capability the documents lack: exit 1 with the policy key path', async () => {
    const policy = join(tmp, 'check-policy.yaml');
    writeFileSync(policy, 'capabilities:\n  defaults: [list_petz]\n');
    const result = await run(['check', '--spec', PETSTORE, '--policy', policy]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${policy}: capabilities.defaults[0]`);
    expect(result.stderr).toContain('list_petz');
  });

  it('the executable: exit 1 on a broken spec (as ExecStartPre sees it), 0 on the bundled example config', async () => {
    const broken = await runProcess(['check', '--spec', join(SPECS, 'dangling.yaml')]);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain('dangling $ref');
    expect(broken.stderr).not.toContain(STACK_FRAME);
    const ok = await runProcess(['check', '--spec', PETSTORE, '--mock-upstream']);
    expect(ok).toMatchObject({ code: 0, stdout: 'ok: 6 capabilities from 1 API, policy (built-in)\n' });
  });
});

// Regression: parseArgs keeps the last of a repeated flag, so these ran on the last value alone.
describe('a flag given twice is refused before anything runs', () => {
  const twice = (flag: string): string =>
    `agent-auth-proxy: Option '--${flag}' is given more than once; give it once\nRun agent-auth-proxy --help for usage.\n`;

  it('check --policy bad.yaml --policy good.yaml: exit 2, not a check of good.yaml alone', async () => {
    const bad = join(tmp, 'twice-bad.yaml');
    const good = join(tmp, 'twice-good.yaml');
    writeFileSync(bad, 'capabilities:\n  defaults: [list_petz]\n');
    writeFileSync(good, 'capabilities:\n  defaults: [list_pets]\n');
    expect((await run(['check', '--spec', PETSTORE, '--policy', good])).code).toBe(0);
    const result = await run(['check', '--spec', PETSTORE, '--policy', bad, '--policy', good]);
    expectOperatorError(result);
    expect(result.stderr).toBe(twice('policy'));
  });

  it('--port, --config and --admin-token twice: exit 2 naming the flag, never a value', async () => {
    const config = join(tmp, 'twice-config.yaml');
    writeFileSync(config, `apis:\n  - spec: ${JSON.stringify(PETSTORE)}\n`);
    for (const [flag, args] of [
      ['port', ['--spec', PETSTORE, '--port', '8081', '--port', '8082']],
      ['config', ['--config', config, '--config', config]],
      [
        'admin-token',
        [
          '--spec',
          PETSTORE,
          '--admin-token',
          'first-secret-0123456789',
          '--admin-token=second-secret-0123456789',
        ],
      ],
    ] as const) {
      const result = await run(['check', ...args]);
      expectOperatorError(result);
      expect(result.stderr, flag).toBe(twice(flag));
      expect(result.stderr).not.toContain('secret');
    }
  });

  it('a repeatable flag (--spec, --upstream) stays repeatable', async () => {
    const result = await run([
      'check',
      '--spec',
      PETSTORE,
      '--spec',
      PETSTORE,
      '--upstream',
      'http://127.0.0.1:9',
      '--upstream',
      'http://127.0.0.1:9',
    ]);
    expect(result.stderr).not.toContain('more than once');
  });
});

describe('--version and --help only before `--`', () => {
  it('serve -- --version is an argument, not a request for the version', async () => {
    const result = await run(['serve', '--', '--version']);
    expectOperatorError(result);
    expect(result.stderr).toContain('unexpected argument "--version"');
  });

  it('capabilities -- --help is an argument too; --version before `--` still answers', async () => {
    expectOperatorError(await run(['capabilities', '--spec', PETSTORE, '--', '--help']));
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(await run(['serve', '--version', '--', 'x'])).toMatchObject({ code: 0, stdout: `${version}\n` });
  });
});

describe('serve', () => {
  it('logs where it listens, answers /healthz and /readyz, and exits 0 on SIGTERM', async () => {
    // A temp working directory, so nothing the server writes lands in the repository.
    // A fixed port (free now), so that health can find it from the process's command line.
    const free = net.createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const chosen = String((free.address() as AddressInfo).port);
    await new Promise<void>((resolve) => free.close(() => resolve()));
    const proc = start(['serve', '--spec', PETSTORE, '--port', chosen], tmp);
    const listening = await proc.logLine('listening');
    const url = String(listening.url);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(url).toBe(`http://127.0.0.1:${chosen}`);
    expect(listening).toMatchObject({ level: 'info', issuer: url, capabilities: 6 });

    expect(await getJson(`${url}/healthz`)).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await getJson(`${url}/readyz`)).toMatchObject({
      status: 200,
      body: { status: 'ready', capabilities: 6 },
    });

    // health finds the address from the process's own command line, or from the same options.
    const pid = String(proc.child.pid);
    const port = new URL(url).port;
    expect(await run(['health', '--pid', pid])).toMatchObject({ code: 0, stdout: `ready: ${url}/readyz\n` });
    expect(await run(['health', '--live', '--pid', pid])).toMatchObject({
      code: 0,
      stdout: `live: ${url}/healthz\n`,
    });
    expect(await run(['health', '--port', port])).toMatchObject({
      code: 0,
      stdout: `ready: ${url}/readyz\n`,
    });

    expect(proc.child.pid).toBeDefined();
    process.kill(proc.child.pid as number, 'SIGTERM');
    const exit = await proc.exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.stderr).toBe('');
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    const down = await run(['health', '--port', port]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(new RegExp(`^not ready: ${url}/readyz: .*ECONNREFUSED`));
  });

  it('health: the address of a process started with --port 0 cannot be known; a process that is not the proxy is refused', async () => {
    expect((await run(['health', '--port', '0'])).stderr).toContain('started on port 0');
    const notProxy = await run(['health', '--pid', String(process.pid)]);
    expect(notProxy.code).toBe(2);
    expect(notProxy.stderr).toContain('that process is not agent-auth-proxy');
  });

  it('exits 2 naming libsodium when its native binding cannot load, before it listens or writes anything', async () => {
    // Fault injection, not a mock of what is checked: a preload makes require('sodium-native')
    // fail as a missing prebuilt binding would; the start-up's handling of that is under test.
    const dir = mkdtempSync(join(tmpdir(), 'aap-no-sodium-'));
    const preload = join(dir, 'no-sodium.cjs');
    writeFileSync(
      preload,
      "const Module = require('node:module');\nconst load = Module._load;\n" +
        'Module._load = function (request, ...rest) {\n' +
        "  if (request === 'sodium-native') throw new Error('No native build was found for this platform');\n" +
        '  return load.call(this, request, ...rest);\n};\n',
    );
    const db = join(dir, 'proxy.db');
    const child = spawn(
      process.execPath,
      ['--require', preload, CLI, 'serve', '--spec', PETSTORE, '--port', '0', '--db', db],
      {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expectOperatorError({ code, signal: null, stdout, stderr });
    expect(stderr).toBe(
      "agent-auth-proxy: Cannot load libsodium (the sodium-native package), which verifies every JWT's signature: No native build was found for this platform\n",
    );
    expect(readdirSync(dir)).toEqual(['no-sodium.cjs']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('exits 2 with "cannot listen" when the port is taken', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const result = await runProcess(['serve', '--spec', PETSTORE, '--port', String(port)], tmp);
      expectOperatorError(result);
      expect(result.stderr).toBe(`agent-auth-proxy: cannot listen on 127.0.0.1:${port}: EADDRINUSE\n`);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});
