/** Settings: config file + CLI flags → one frozen object, and every operator mistake as a clear UserError. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, readConfigFile } from '../../../src/config/config-file.js';
import { resolveSettings } from '../../../src/config/settings.js';
import { toOverrides } from '../../../src/cli/overrides.js';
import { userError } from '../../helpers/user-error.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-settings-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Writes `text` to `name` under the test's temp directory and returns the absolute path. */
function writeConfig(name: string, text: string): string {
  const file = join(dir, name);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, text);
  return file;
}

describe('operator tokens', () => {
  it('refuses one that is short, has whitespace, or could not be sent as a bearer token; never showing it', () => {
    const refused = (adminToken: string): string =>
      userError(() => resolveSettings({ specs: ['api.yaml'], adminToken }, '/srv/app')).message;
    expect(refused('short-token')).toMatch(/--admin-token: the admin token must be at least 16 characters/);
    expect(refused('has white space in it')).toMatch(/without whitespace/);
    // A password manager's token: accepted before, then answered 400 on every Authorization header.
    const manager = 'S3cret#Admin!Token$2024';
    expect(refused(manager)).toMatch(/--admin-token: the admin token is sent as a bearer token/);
    expect(refused(manager)).not.toContain(manager);
    const ok = 'b64/Token+with~marks-._==';
    expect(resolveSettings({ specs: ['api.yaml'], adminToken: ok }, '/srv/app').adminToken).toBe(ok);
    expect(
      userError(() =>
        resolveSettings({ specs: ['api.yaml'] }, '/srv/app', {
          AGENT_AUTH_PROXY_INTROSPECTION_TOKEN: 'in=trospection-token',
        }),
      ).message,
    ).toMatch(/introspection token is sent as a bearer token/);
  });
});

describe('defaults', () => {
  // The issuer then follows the address the server listens on (http://HOST:PORT): the CLI test
  // checks it on a real server.
  it('listens on 127.0.0.1:8080 with every documented default and no explicit issuer', () => {
    const settings = resolveSettings({ specs: ['api.yaml'] }, '/srv/app');
    expect(settings).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      maxBodyBytes: 1048576,
      allowRemoteRefs: false,
      allowHttpSpecs: false,
      specMaxBytes: 10485760,
      specTimeoutMs: 5000,
      apis: [{ spec: '/srv/app/api.yaml' }],
      mockUpstream: false,
      logLevel: 'info',
    });
    expect('issuer' in settings).toBe(false);
  });

  it('is frozen, down to each API', () => {
    const settings = resolveSettings({ specs: ['a.yaml', 'b.yaml'] }, '/srv/app');
    expect(Object.isFrozen(settings)).toBe(true);
    expect(Object.isFrozen(settings.apis)).toBe(true);
    expect(settings.apis.every((api) => Object.isFrozen(api))).toBe(true);
  });

  it('fills every default into an empty config file', () => {
    expect(parseConfig('', 'proxy.yaml')).toMatchObject({
      server: { host: '127.0.0.1', port: 8080, max_body_bytes: 1048576 },
      provider: {},
      specs: { allow_remote_refs: false, allow_http: false, max_bytes: 10485760, timeout_ms: 5000 },
      apis: [],
      mock_upstream: false,
      log_level: 'info',
    });
  });

  it('keeps spec URLs as they are and resolves --spec paths against the working directory', () => {
    const settings = resolveSettings(
      {
        specs: [
          'https://api.example.com/openapi.json',
          'HTTP://legacy.local/spec.yaml',
          'specs/x.yaml',
          '/abs/y.yaml',
        ],
      },
      '/srv/app',
    );
    expect(settings.apis.map((a) => a.spec)).toEqual([
      'https://api.example.com/openapi.json',
      'HTTP://legacy.local/spec.yaml',
      '/srv/app/specs/x.yaml',
      '/abs/y.yaml',
    ]);
  });
});

describe('CLI overrides', () => {
  const configText = `
server:
  host: 0.0.0.0
  port: 9000
  issuer: https://config.example.com
  max_body_bytes: 2048
provider:
  name: shop
  description: The shop
specs:
  allow_remote_refs: true
  allow_http: true
  max_bytes: 4096
  timeout_ms: 250
apis:
  - spec: shop.yaml
mock_upstream: true
log_level: debug
`;

  it('takes every value from the config file when no flag is given', () => {
    const config = writeConfig('overrides/proxy.yaml', configText);
    expect(resolveSettings({ config }, '/elsewhere')).toMatchObject({
      host: '0.0.0.0',
      port: 9000,
      issuer: 'https://config.example.com',
      maxBodyBytes: 2048,
      providerName: 'shop',
      providerDescription: 'The shop',
      allowRemoteRefs: true,
      allowHttpSpecs: true,
      specMaxBytes: 4096,
      specTimeoutMs: 250,
      apis: [{ spec: join(dir, 'overrides/shop.yaml') }],
      mockUpstream: true,
      logLevel: 'debug',
    });
  });

  it('lets flags override the config file', () => {
    const config = writeConfig('overrides/proxy.yaml', configText);
    const settings = resolveSettings(
      {
        config,
        host: '127.0.0.2',
        port: 0,
        issuer: 'https://cli.example.com/agents/',
        allowRemoteRefs: false,
        allowHttpSpecs: false,
        mockUpstream: false,
        logLevel: 'error',
      },
      '/elsewhere',
    );
    expect(settings).toMatchObject({
      host: '127.0.0.2',
      port: 0, // 0 is a value, not "unset"
      issuer: 'https://cli.example.com/agents', // trailing slash dropped
      allowRemoteRefs: false,
      allowHttpSpecs: false,
      mockUpstream: false,
      logLevel: 'error',
    });
    // Flags that have no config counterpart leave the config's values alone.
    expect(settings).toMatchObject({ maxBodyBytes: 2048, specMaxBytes: 4096, specTimeoutMs: 250 });
  });

  it('lists the config file APIs first, then one per --spec; --upstream applies to --spec APIs only', () => {
    const config = writeConfig(
      'order/proxy.yaml',
      'apis:\n  - spec: first.yaml\n    upstream: https://first.example.com\n  - spec: second.yaml\n',
    );
    const settings = resolveSettings(
      { config, specs: ['third.yaml', 'fourth.yaml'], upstreams: ['https://cli.example.com'] },
      '/work',
    );
    expect(settings.apis.map(({ execution: _execution, ...api }) => api)).toEqual([
      { spec: join(dir, 'order/first.yaml'), upstream: 'https://first.example.com' },
      { spec: join(dir, 'order/second.yaml') },
      { spec: '/work/third.yaml', upstream: 'https://cli.example.com' },
      { spec: '/work/fourth.yaml', upstream: 'https://cli.example.com' },
    ]);
  });

  it('pairs one --upstream per --spec in order', () => {
    const settings = resolveSettings(
      { specs: ['a.yaml', 'b.yaml'], upstreams: ['https://a.example.com', 'http://b.internal:8080'] },
      '/work',
    );
    expect(settings.apis.map(({ execution: _execution, ...api }) => api)).toEqual([
      { spec: '/work/a.yaml', upstream: 'https://a.example.com' },
      { spec: '/work/b.yaml', upstream: 'http://b.internal:8080' },
    ]);
  });
});

describe('spec paths in a config file', () => {
  it('resolve against the directory of the config file, not the working directory', () => {
    const config = writeConfig(
      'nested/conf/proxy.yaml',
      [
        'apis:',
        '  - spec: petstore.yaml',
        '  - spec: ../specs/billing.json',
        '  - spec: /opt/specs/abs.yaml',
        '  - spec: https://specs.example.com/remote.yaml',
      ].join('\n'),
    );
    const expected = [
      join(dir, 'nested/conf/petstore.yaml'),
      join(dir, 'nested/specs/billing.json'),
      '/opt/specs/abs.yaml',
      'https://specs.example.com/remote.yaml',
    ];
    // The config given relative to the working directory, and given absolute from somewhere else.
    expect(resolveSettings({ config: 'nested/conf/proxy.yaml' }, dir).apis.map((a) => a.spec)).toEqual(
      expected,
    );
    expect(resolveSettings({ config }, '/somewhere/else').apis.map((a) => a.spec)).toEqual(expected);
  });

  it('while --spec paths given next to --config still resolve against the working directory', () => {
    const config = writeConfig('mixed/proxy.yaml', 'apis:\n  - spec: from-config.yaml\n');
    const settings = resolveSettings({ config, specs: ['from-cli.yaml'] }, '/work');
    expect(settings.apis.map((a) => a.spec)).toEqual([
      join(dir, 'mixed/from-config.yaml'),
      '/work/from-cli.yaml',
    ]);
  });
});

describe('--upstream, --issuer and the API list', () => {
  it('refuses more --upstream than --spec', () => {
    const err = userError(() =>
      resolveSettings({ specs: ['a.yaml'], upstreams: ['https://a.example.com', 'https://b.example.com'] }),
    );
    expect(err.message).toBe(
      '--upstream was given 2 times for 1 --spec; give one for all, or one per --spec in the same order',
    );
  });

  it('refuses several --upstream that do not match the number of --spec', () => {
    const err = userError(() =>
      resolveSettings({
        specs: ['a.yaml', 'b.yaml', 'c.yaml'],
        upstreams: ['https://a.example.com', 'https://b.example.com'],
      }),
    );
    expect(err.message).toContain('--upstream was given 2 times for 3 --spec');
  });

  it('refuses --upstream without any --spec, even when the config file has APIs', () => {
    const config = writeConfig('upstream-only/proxy.yaml', 'apis:\n  - spec: a.yaml\n');
    for (const cli of [
      { upstreams: ['https://a.example.com'] },
      { config, upstreams: ['https://a.example.com'] },
    ]) {
      expect(userError(() => resolveSettings(cli)).message).toBe(
        '--upstream needs a --spec to apply to (set `upstream` per API in the config file instead)',
      );
    }
  });

  it('refuses an issuer with user info, from a flag or the file, without quoting it: discovery would publish it', () => {
    const issuer = 'https://svc:Issuer-Passw0rd@agents.example.com';
    const err = userError(() => resolveSettings({ specs: ['a.yaml'], issuer }));
    expect(err.message).toBe(
      '--issuer: must not carry user info (user:password@): it is published in discovery',
    );
    const config = writeConfig(
      'issuer-userinfo/proxy.yaml',
      `server:\n  issuer: ${issuer}\napis:\n  - spec: a.yaml\n`,
    );
    const fromFile = userError(() => resolveSettings({ config })).message;
    expect(fromFile).toContain('server.issuer: must not carry user info');
    expect(fromFile).not.toContain('Issuer-Passw0rd');
  });

  it('refuses an upstream with a query or fragment, which would never be sent, without quoting it', () => {
    for (const upstream of [
      'https://api.example.com/v1?api_key=Query-Secret-1',
      'https://api.example.com/v1#Frag-Secret-1',
    ]) {
      const err = userError(() => resolveSettings({ specs: ['a.yaml'], upstreams: [upstream] }));
      expect(err.message).toMatch(/^--upstream: must not carry a query or fragment/);
      expect(err.message).not.toMatch(/Secret-1/);
      const config = writeConfig(
        'upstream-query/proxy.yaml',
        `apis:\n  - spec: a.yaml\n    upstream: "${upstream}"\n`,
      );
      const fromFile = userError(() => resolveSettings({ config })).message;
      expect(fromFile).toMatch(/apis\[0\]\.upstream: must not carry a query or fragment/);
      expect(fromFile).not.toMatch(/Secret-1/);
    }
  });

  it('refuses an --upstream of another scheme with user info without quoting the password', () => {
    const err = userError(() =>
      resolveSettings({ specs: ['a.yaml'], upstreams: ['ftp://svc:Upstr3am-Passw0rd@api.example.com'] }),
    );
    expect(err.message).toMatch(/^--upstream: must not carry user info/);
    expect(err.message).not.toContain('Upstr3am-Passw0rd');
  });

  it('refuses an --upstream that is not an http(s) URL', () => {
    for (const upstream of ['ftp://files.example.com', 'legacy.internal', 'http://']) {
      const err = userError(() => resolveSettings({ specs: ['a.yaml'], upstreams: [upstream] }));
      expect(err.message).toBe(`--upstream ${JSON.stringify(upstream)}: must be an http(s) URL`);
    }
  });

  it('refuses an issuer that is not an http(s) URL or carries a query or fragment, from a flag or the file', () => {
    for (const [issuer, shown] of [
      ['ftp://agents.example.com', 'ftp://agents.example.com'],
      // A query's values are not quoted: they may be tokens.
      ['https://agents.example.com/?x=1', 'https://agents.example.com/?x=…'],
      ['https://a.example.com/#f', 'https://a.example.com/'],
    ]) {
      const err = userError(() => resolveSettings({ specs: ['a.yaml'], issuer }));
      expect(err.message).toBe(
        `--issuer ${JSON.stringify(shown)}: must be an http(s) URL without query or fragment`,
      );
    }
    const config = writeConfig(
      'issuer/proxy.yaml',
      'server:\n  issuer: https://a.example.com/?q\napis:\n  - spec: a.yaml\n',
    );
    expect(userError(() => resolveSettings({ config })).message).toContain(
      'must be an http(s) URL without query',
    );
  });

  it('refuses to start without any API', () => {
    const empty = writeConfig('no-apis/proxy.yaml', 'server:\n  port: 9000\n');
    for (const cli of [{}, { config: empty }]) {
      expect(userError(() => resolveSettings(cli)).message).toBe(
        'no API to serve: pass --spec FILE|URL, or --config FILE with an `apis` list',
      );
    }
  });
});

describe('config validation messages name the file, the key path and what was expected', () => {
  const cases: [string, string, string][] = [
    ['a wrong type', 'server:\n  port: abc\n', 'server.port: must be an integer (got "abc")'],
    ['a number out of range', 'server:\n  port: 70000\n', 'server.port: must be <= 65535 (got 70000)'],
    ['a size below the minimum', 'specs:\n  max_bytes: 10\n', 'specs.max_bytes: must be >= 1024 (got 10)'],
    [
      'a non-URL upstream',
      'apis:\n  - spec: a.yaml\n    upstream: ftp://x\n',
      'apis[0].upstream: must be an http(s) URL (got "ftp://x")',
    ],
    [
      'an unknown key in an API',
      'apis:\n  - spec: a.yaml\n    prefx: shop\n',
      'apis[0].prefx: unknown key; allowed keys: id, spec, upstream, prefix, include, exclude, server_variables, credentials, headers, identity_headers, timeout, retries, retry_backoff, max_response_bytes, operations',
    ],
    ['a missing required key', 'apis:\n  - upstream: https://x.example.com\n', 'apis[0].spec: is required'],
    [
      'a value outside an enum',
      'log_level: loud\n',
      'log_level: must be one of "debug", "info", "warn", "error", "silent" (got "loud")',
    ],
    [
      'a bad method deep in a selector',
      'apis:\n  - spec: a.yaml\n  - spec: b.yaml\n    exclude:\n      - methods: [DELETE, FETCH]\n',
      'apis[1].exclude[0].methods[1]: must be one of "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE" (got "FETCH")',
    ],
    [
      'an empty selector',
      'apis:\n  - spec: a.yaml\n    include: [{}]\n',
      'apis[0].include[0]: must set at least one key',
    ],
    [
      'a path glob without a leading slash',
      'apis:\n  - spec: a.yaml\n    include: [{paths: [admin]}]\n',
      'apis[0].include[0].paths[0]: must start with "/" (got "admin")',
    ],
    [
      'a bad prefix',
      'apis:\n  - spec: a.yaml\n    prefix: Shop\n',
      'apis[0].prefix: must match ^[a-z0-9_]{1,32}$ (got "Shop")',
    ],
    ['an empty section', 'server:\n', 'server: must be an object (got null)'],
    ['a list at the top level', '- a\n- b\n', '(top level): must be an object (got ["a","b"])'],
  ];

  it.each(cases)('%s', (_label, text, expected) => {
    expect(userError(() => parseConfig(text, 'proxy.yaml')).message).toBe(`proxy.yaml: ${expected}`);
  });

  it('lists the allowed keys for an unknown top-level key', () => {
    const message = userError(() => parseConfig('serverz: {}\n', 'proxy.yaml')).message;
    expect(message).toMatch(
      /^proxy\.yaml: serverz: unknown key; allowed keys: server, provider, specs, apis, /,
    );
    expect(message).toMatch(/, mock_upstream, log_level, log_format$/);
  });

  it('lists every problem, one per line', () => {
    const err = userError(() =>
      parseConfig('server:\n  host: ""\n  port: abc\nmock_upstream: yes please\n', 'p.yaml'),
    );
    expect(err.message.split('\n')).toEqual([
      'p.yaml: server.host: must not be empty',
      'p.yaml: server.port: must be an integer (got "abc")',
      'p.yaml: mock_upstream: must be a boolean (got "yes please")',
    ]);
  });

  it('names the config file by its resolved path when loaded through --config', () => {
    const config = writeConfig('invalid/proxy.yaml', 'apis:\n  - spec: a.yaml\n    upstream: nope\n');
    const err = userError(() => resolveSettings({ config: 'invalid/proxy.yaml' }, dir));
    expect(err.message).toBe(`${config}: apis[0].upstream: must be an http(s) URL (got "nope")`);
  });
});

describe('YAML problems', () => {
  it('reports a syntax error with the file, line and column, without the code frame', () => {
    const err = userError(() => parseConfig('server:\n  port: [8080\nlog_level: info\n', 'proxy.yaml'));
    expect(err.message).toMatch(/^proxy\.yaml: .+ at line \d+, column \d+/);
    expect(err.message).not.toContain('\n');
  });

  it('reports a bad indentation as a syntax error, not as a schema problem', () => {
    const err = userError(() => parseConfig('server:\n  host: a\n   port: 1\n', 'proxy.yaml'));
    expect(err.message).toMatch(/^proxy\.yaml: .* at line 2, column 9/);
    expect(err.message).not.toMatch(/must be|unknown key/);
  });

  it('refuses duplicate keys instead of keeping the last one', () => {
    const top = userError(() => parseConfig('log_level: info\nlog_level: debug\n', 'proxy.yaml'));
    expect(top.message).toMatch(/^proxy\.yaml: Map keys must be unique at line 2, column 1/);
    const nested = userError(() =>
      parseConfig('apis:\n  - spec: a.yaml\n    prefix: a\n    prefix: b\n', 'proxy.yaml'),
    );
    expect(nested.message).toMatch(/^proxy\.yaml: Map keys must be unique at line 4, column 5/);
  });

  it('reads duplicate-key errors from a file through resolveSettings as well', () => {
    const config = writeConfig('dup/proxy.yaml', 'server:\n  port: 1\n  port: 2\napis:\n  - spec: a.yaml\n');
    const err = userError(() => resolveSettings({ config }));
    expect(err.message.startsWith(`${config}: Map keys must be unique at line 3, column 3`)).toBe(true);
  });
});

describe('missing config file', () => {
  it('is a UserError naming the resolved path', () => {
    const err = userError(() => resolveSettings({ config: 'does-not-exist.yaml', specs: ['a.yaml'] }, dir));
    expect(err.message).toBe(`${join(dir, 'does-not-exist.yaml')}: config file not found or not readable`);
  });

  it('treats a directory like a missing file', () => {
    expect(userError(() => readConfigFile(dir)).message).toBe(
      `${dir}: config file not found or not readable`,
    );
  });
});

describe('execution settings', () => {
  const spec = (): string =>
    writeConfig('exec/spec.yaml', 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths: {}\n');

  it('defaults: 30 s timeout, 2 retries from 100 ms, 10 MiB responses, 1 h streams checked every 30 s, 24 h jobs', () => {
    const s = resolveSettings({ specs: [spec()] }, dir, {});
    expect(s.apis[0]?.execution).toMatchObject({
      timeoutMs: 30_000,
      retries: 2,
      retryBackoffMs: 100,
      maxResponseBytes: 10_485_760,
      credentials: {},
      headers: {},
      operations: {},
    });
    expect(s.execution).toEqual({
      streamMaxDurationMs: 3_600_000,
      streamRevocationCheckMs: 30_000,
      asyncJobTtlMs: 86_400_000,
    });
  });

  it('per-API values override the execution defaults; secrets come from env, file or inline', () => {
    writeConfig('exec/token.txt', 'file-token-0123456789\n');
    const file = writeConfig(
      'exec/proxy.yaml',
      [
        'execution: {timeout: 5s, retries: 1}',
        'apis:',
        '  - spec: spec.yaml',
        '    timeout: 250ms',
        '    credentials:',
        '      key: {env: EXEC_KEY}',
        '      bearer: {file: token.txt}',
        '      basic: {username: svc, password: inline-password}',
        '      oauth: {client_id: {env: EXEC_ID}, client_secret: s3cret-value, scopes: [a, b]}',
        '    headers: {X-Tenant: acme}',
        '    identity_headers: true',
        '    operations: {get_thing: {timeout: 2s, pin: {owner: {from: user_id}, tenant: acme}}}',
        '',
      ].join('\n'),
    );
    spec();
    const s = resolveSettings({ config: file }, dir, { EXEC_KEY: 'env-key-0123456789', EXEC_ID: 'client-1' });
    const e = s.apis[0]?.execution;
    expect(e).toMatchObject({ timeoutMs: 250, retries: 1, headers: { 'X-Tenant': 'acme' } });
    expect(e?.credentials).toEqual({
      key: { kind: 'secret', value: 'env-key-0123456789' },
      bearer: { kind: 'secret', value: 'file-token-0123456789' },
      basic: { kind: 'basic', username: 'svc', password: 'inline-password' },
      oauth: { kind: 'oauth2', clientId: 'client-1', clientSecret: 's3cret-value', scopes: ['a', 'b'] },
    });
    expect(e?.identityHeaders).toEqual({
      agent: 'X-Agent-Id',
      host: 'X-Agent-Host-Id',
      user: 'X-Agent-User-Id',
    });
    expect(e?.operations.get_thing).toEqual({
      timeoutMs: 2000,
      pin: { owner: { from: 'user_id' }, tenant: 'acme' },
    });
  });

  it('refuses a missing variable, a missing file, control characters and framing headers, naming the key', () => {
    spec();
    const cfg = (lines: string): string =>
      writeConfig('exec/bad.yaml', `apis:\n  - spec: spec.yaml\n${lines}\n`);
    expect(
      userError(() => resolveSettings({ config: cfg('    credentials: {k: {env: NOPE_VAR}}') }, dir, {}))
        .message,
    ).toMatch(/apis\[0\]\.credentials\.k: environment variable NOPE_VAR is not set/);
    expect(
      userError(() => resolveSettings({ config: cfg('    credentials: {k: {file: missing.txt}}') }, dir, {}))
        .message,
    ).toMatch(/apis\[0\]\.credentials\.k/);
    expect(
      userError(() =>
        resolveSettings({ config: cfg('    headers: {X-A: {env: CRLF}}') }, dir, { CRLF: 'a\r\nX-Evil: 1' }),
      ).message,
    ).toMatch(/headers\.X-A: the value contains control characters/);
    for (const name of ['Host', 'Connection', 'Content-Length', 'Transfer-Encoding']) {
      expect(
        userError(() => resolveSettings({ config: cfg(`    headers: {${name}: x}`) }, dir, {})).message,
      ).toMatch(new RegExp(`headers\\.${name}: this header is set by the proxy`));
    }
  });

  it('--upstream-header and --upstream-timeout apply to --spec APIs, and are checked', () => {
    const s = resolveSettings(
      { specs: [spec()], upstreamHeaders: ['X-Api-Key: abc def', 'X-Other:1'], upstreamTimeout: '1500ms' },
      dir,
      {},
    );
    expect(s.apis[0]?.execution).toMatchObject({
      timeoutMs: 1500,
      headers: { 'X-Api-Key': 'abc def', 'X-Other': '1' },
    });
    expect(
      userError(() => resolveSettings({ specs: [spec()], upstreamHeaders: ['no colon'] }, dir, {})).message,
    ).toMatch(/--upstream-header/);
    expect(
      userError(() => resolveSettings({ specs: [spec()], upstreamTimeout: 'soon' }, dir, {})).message,
    ).toMatch(/invalid duration/);
    expect(
      userError(() =>
        resolveSettings(
          { upstreamTimeout: '1s', config: writeConfig('exec/empty.yaml', `apis: [{spec: spec.yaml}]\n`) },
          dir,
          {},
        ),
      ).message,
    ).toMatch(/apply to --spec APIs/);
  });

  it.each([
    ['execution: {timeout: 25d}', /execution\.timeout: must be from 1ms to 24d \(got "25d"\)/],
    ['execution: {timeout: 0}', /execution\.timeout: must be from 1ms to 24d/],
    ['execution: {stream_max_duration: 30d}', /execution\.stream_max_duration: must be from 1ms to 24d/],
    ['execution: {retry_backoff: 25d}', /execution\.retry_backoff: must be at most 24d/],
    ['server: {shutdown_grace: 25d}', /server\.shutdown_grace: must be at most 24d/],
    ['server: {headers_timeout: 0}', /server\.headers_timeout: must be from 1ms to 24d/],
    ['jwks: {timeout: 25d}', /jwks\.timeout: must be from 1ms to 24d/],
  ])('refuses a duration a timer cannot hold, or a zero that fires at once: %s', (line, message) => {
    spec();
    const file = writeConfig('exec/timers.yaml', `${line}\napis: [{spec: spec.yaml, timeout: 10s}]\n`);
    expect(userError(() => resolveSettings({ config: file }, dir, {})).message).toMatch(message);
  });

  it('refuses per-API, per-operation and --upstream-timeout durations a timer cannot hold', () => {
    spec();
    const perApi = writeConfig('exec/api-timer.yaml', 'apis: [{spec: spec.yaml, timeout: 25d}]\n');
    expect(userError(() => resolveSettings({ config: perApi }, dir, {})).message).toMatch(
      /apis\[0\]\.timeout: must be from 1ms to 24d/,
    );
    expect(
      userError(() => resolveSettings({ specs: ['spec.yaml'], upstreamTimeout: '30d' }, dir, {})).message,
    ).toMatch(/must be from 1ms to 24d/);
  });

  it('refuses a headers timeout longer than the request timeout, which serve could not start with', () => {
    spec();
    const file = writeConfig(
      'exec/headers.yaml',
      'server: {headers_timeout: 60s}\napis: [{spec: spec.yaml}]\n',
    );
    expect(userError(() => resolveSettings({ config: file }, dir, {})).message).toMatch(
      /server\.headers_timeout \(1m\) must not be longer than server\.request_timeout \(30s\)/,
    );
    // A request timeout of 0 is none: any headers timeout goes.
    const none = writeConfig(
      'exec/headers-none.yaml',
      'server: {headers_timeout: 60s, request_timeout: 0}\napis: [{spec: spec.yaml}]\n',
    );
    expect(resolveSettings({ config: none }, dir, {}).connections.headersTimeoutMs).toBe(60_000);
  });

  it('a stream revocation check must be at most 60 s (§5.11)', () => {
    spec();
    const file = writeConfig(
      'exec/slow.yaml',
      'execution: {stream_revocation_check: 2m}\napis: [{spec: spec.yaml}]\n',
    );
    expect(userError(() => resolveSettings({ config: file }, dir, {})).message).toMatch(
      /between 10ms and 60s/,
    );
  });
});

describe('audit group commit (issue 10 class 14)', () => {
  const spec = (): string =>
    writeConfig('audit/spec.yaml', 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths: {}\n');

  it('defaults: a 20 ms commit window, 256 records per batch at most, 90 days of retention', () => {
    expect(resolveSettings({ specs: [spec()] }, dir, {}).audit).toEqual({
      commitWindowMs: 20,
      maxBatch: 256,
      retentionMs: 90 * 86_400_000,
    });
  });

  it('takes audit.commit_window and audit.commit_max_records', () => {
    spec();
    const file = writeConfig(
      'audit/proxy.yaml',
      'apis:\n  - spec: spec.yaml\naudit: {commit_window: 50ms, commit_max_records: 1000, retention: null}\n',
    );
    expect(resolveSettings({ config: file }, dir, {}).audit).toEqual({
      commitWindowMs: 50,
      maxBatch: 1000,
      retentionMs: null,
    });
  });

  it('refuses a window that would let a crash lose more than a second of activity, or none at all', () => {
    spec();
    for (const [window, message] of [
      ['2s', 'audit.commit_window must be between 1ms and 1s (got "2s")'],
      ['0ms', 'audit.commit_window must be between 1ms and 1s (got "0ms")'],
      ['1m', 'audit.commit_window: must match ^[0-9]+(ms|s)$ (got "1m")'],
    ]) {
      const file = writeConfig(
        'audit/bad.yaml',
        `apis:\n  - spec: spec.yaml\naudit: {commit_window: ${window}}\n`,
      );
      expect(userError(() => resolveSettings({ config: file }, dir, {})).message).toContain(message);
    }
  });
});

describe('internal listener (server.internal_port, --internal-port)', () => {
  it('is off by default', () => {
    expect(resolveSettings({ specs: ['x.yaml'] }, dir).internal).toBeUndefined();
  });

  it('listens on server.internal_host (default 127.0.0.1); the flag overrides the config port', () => {
    const config = writeConfig(
      'internal/proxy.yaml',
      'server:\n  internal_port: 9090\napis:\n  - spec: x.yaml\n',
    );
    expect(resolveSettings({ config }, dir).internal).toEqual({ host: '127.0.0.1', port: 9090 });
    expect(resolveSettings({ config, internalPort: 0 }, dir).internal).toEqual({
      host: '127.0.0.1',
      port: 0,
    });
    const pod = writeConfig(
      'internal/pod.yaml',
      'server:\n  internal_port: 9090\n  internal_host: 0.0.0.0\napis:\n  - spec: x.yaml\n',
    );
    expect(resolveSettings({ config: pod }, dir).internal).toEqual({ host: '0.0.0.0', port: 9090 });
  });

  it('refuses the public port as the internal one, which serve could not bind', () => {
    const config = writeConfig(
      'internal/same.yaml',
      'server:\n  port: 9090\n  internal_port: 9090\napis:\n  - spec: x.yaml\n',
    );
    expect(userError(() => resolveSettings({ config }, dir)).message).toMatch(
      /server\.internal_port 9090: is the public port too/,
    );
    expect(
      userError(() => resolveSettings({ specs: ['x.yaml'], port: 8080, internalPort: 8080 }, dir)).message,
    ).toMatch(/^--internal-port 8080: is the public port too/);
  });

  it('--internal-port takes a port number', () => {
    expect(toOverrides({ 'internal-port': '0' })).toEqual({ internalPort: 0 });
    expect(() => toOverrides({ 'internal-port': '70000' })).toThrow(
      '--internal-port "70000": must be a number from 0 to 65535',
    );
  });
});

describe('worker processes (server.workers, --workers)', () => {
  it('is one process by default', () => {
    expect(resolveSettings({ specs: ['x.yaml'] }, dir).workers).toBe(1);
  });

  it('takes more than one only with PostgreSQL, from the config or the flag', () => {
    const config = writeConfig(
      'workers/proxy.yaml',
      'server:\n  workers: 4\ndatabase: postgres://proxy@db.internal/proxy\napis:\n  - spec: x.yaml\n',
    );
    expect(resolveSettings({ config }, dir).workers).toBe(4);
    expect(resolveSettings({ config, workers: 2 }, dir).workers).toBe(2);
  });

  it('refuses more than one on SQLite, naming where the number came from and the fix', () => {
    const config = writeConfig('workers/sqlite.yaml', 'server:\n  workers: 2\napis:\n  - spec: x.yaml\n');
    expect(userError(() => resolveSettings({ config }, dir)).message).toBe(
      `${config}: server.workers: 2 needs a shared store: replay and rate state live in one process with SQLite; use --db postgres://… (or database: in the config)`,
    );
    expect(userError(() => resolveSettings({ specs: ['x.yaml'], workers: 3 }, dir)).message).toMatch(
      /^--workers 3 needs a shared store/,
    );
  });

  it('--workers takes a whole number from 1 to 64; the config the same', () => {
    expect(toOverrides({ workers: '8' })).toEqual({ workers: 8 });
    for (const bad of ['0', '65', '2.5', '-1', 'auto']) {
      expect(() => toOverrides({ workers: bad })).toThrow(
        `--workers ${JSON.stringify(bad)}: must be a whole number from 1 to 64`,
      );
    }
    expect(() => parseConfig('server:\n  workers: 0\n', 'w.yaml')).toThrow('server.workers');
  });
});
