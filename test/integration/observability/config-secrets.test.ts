/**
 * Configuration errors name where a secret is, never its value (README: "Values are never shown in
 * an error, only where they were looked for"): on stderr, in `check`'s output (CI logs, journald),
 * in the log of a refused reload. Upstream URLs carrying user info are refused without quoting it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { resolveSettings } from '../../../src/config/settings.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { userError } from '../../helpers/user-error.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-config-secrets-'));
  writeFileSync(join(dir, 'api.yaml'), 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths: {}\n');
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function messageFor(name: string, yaml: string): string {
  const file = join(dir, name);
  writeFileSync(file, yaml);
  return userError(() => resolveSettings({ config: file }, dir, {})).message;
}

const SECRET = 'Sup3rSecretServicePassw0rd';

describe('config validation errors never quote secret values', () => {
  it('a basic credential with a misspelt extra key does not print its password', () => {
    const msg = messageFor(
      'basic.yaml',
      `apis:\n  - spec: api.yaml\n    credentials:\n      basicAuth: {username: bob, password: ${SECRET}, pasword_typo: x}\n`,
    );
    expect(msg).toContain('credentials');
    expect(msg).not.toContain(SECRET);
  });

  it('a numeric API key (YAML reads it as a number) is not printed', () => {
    // Observed before: "must be an object (got 918273645546372900)", from the credential's object
    // branches, which were not marked secret.
    const msg = messageFor(
      'numeric.yaml',
      `apis:\n  - spec: api.yaml\n    credentials:\n      api_key: 918273645546372819\n`,
    );
    expect(msg).toContain('credentials.api_key');
    expect(msg).not.toContain('918273645546');
  });

  it('an oauth2 credential with an invalid token_url does not print its client_secret', () => {
    const msg = messageFor(
      'oauth.yaml',
      `apis:\n  - spec: api.yaml\n    credentials:\n      cc: {client_id: app, client_secret: ${SECRET}, token_url: "ftp://x"}\n`,
    );
    expect(msg).not.toContain(SECRET);
  });

  it('a secret given as both {value} and {env} does not print the value', () => {
    const msg = messageFor(
      'both.yaml',
      `apis:\n  - spec: api.yaml\n    headers:\n      X-Api-Key: {value: ${SECRET}, env: SOME_VAR}\n`,
    );
    expect(msg).not.toContain(SECRET);
  });

  it('a password_hash that is not scrypt (a pasted password) is not printed', () => {
    const msg = messageFor(
      'hash.yaml',
      `sign_in:\n  local:\n    users:\n      - {user_id: alice, password_hash: ${SECRET}}\napis:\n  - spec: api.yaml\n`,
    );
    expect(msg).toContain('password_hash');
    expect(msg).not.toContain(SECRET);
  });

  it('an oidc client_secret next to a bad key is not printed', () => {
    const msg = messageFor(
      'oidc.yaml',
      `sign_in:\n  oidc: {issuer: "https://idp.example", client_id: app, client_secret: {value: ${SECRET}, file: x}}\napis:\n  - spec: api.yaml\n`,
    );
    expect(msg).not.toContain(SECRET);
  });

  it('a webhook secret of the wrong type is not printed', () => {
    const msg = messageFor(
      'hook.yaml',
      `notifications:\n  webhook: {url: "https://hooks.example/T0/B0/${SECRET}", secret: {valu: ${SECRET}}}\napis:\n  - spec: api.yaml\n`,
    );
    expect(msg).not.toContain(SECRET);
  });
});

describe('what a validation message quotes', () => {
  it('a scalar outside secrets, with the user info of a URL in it masked', () => {
    const msg = messageFor(
      'ftp.yaml',
      `apis:\n  - spec: api.yaml\n    upstream: "ftp://svc:${SECRET}@x.example"\n`,
    );
    expect(msg).toContain('apis[0].upstream: must be an http(s) URL (got "ftp://…@x.example")');
  });

  it('of an object only its kind', () => {
    const msg = messageFor('object.yaml', `apis:\n  - spec: {path: api.yaml, token: ${SECRET}}\n`);
    expect(msg).toContain('apis[0].spec: must be a string (got an object)');
    expect(msg).not.toContain(SECRET);
  });
});

describe('a refused reload logs the error, never the secret', () => {
  it('reload of a config whose static secret header is mis-written logs no secret value', async () => {
    const { startTestProxy } = await import('../../helpers/proxy.js');
    const file = join(dir, 'live.yaml');
    const good = `apis:\n  - spec: ${PETSTORE}\n    upstream: "http://127.0.0.1:9"\n    headers:\n      X-Api-Key: {value: ${SECRET}}\n`;
    writeFileSync(file, good);
    const lines: string[] = [];
    const proxy = await startTestProxy({ config: file }, { logSink: (l) => lines.push(l) });
    try {
      writeFileSync(
        file,
        `apis:\n  - spec: ${PETSTORE}\n    upstream: "http://127.0.0.1:9"\n    headers:\n      X-Api-Key: {value: ${SECRET}, env: TYPO}\n`,
      );
      const result = await proxy.reload();
      expect(result.ok).toBe(false);
      expect(lines.some((l) => l.includes('reload refused'))).toBe(true);
      expect(lines.filter((l) => l.includes(SECRET))).toEqual([]);
    } finally {
      await proxy.close();
    }
  });
});

describe('URLs with user info', () => {
  it('an oidc issuer carrying user:password is refused without quoting the password', () => {
    const msg = messageFor(
      'oidc-userinfo.yaml',
      `sign_in:\n  oidc: {issuer: "https://app:${SECRET}@idp.example", client_id: app, client_secret: {env: OIDC_SECRET}}\napis:\n  - spec: api.yaml\n`,
    );
    expect(msg).toContain('issuer');
    expect(msg).not.toContain(SECRET);
  });

  it.each([
    ['the config', (file: string) => ({ config: file })],
    ['--upstream', () => ({ specs: ['api.yaml'], upstreams: [`https://svc:${SECRET}@api.example/v1`] })],
  ])(
    'an upstream URL carrying user:password in %s is refused without quoting the password',
    (_where, cli) => {
      const file = join(dir, 'upstream-userinfo.yaml');
      writeFileSync(
        file,
        `apis:\n  - spec: api.yaml\n    upstream: "https://svc:${SECRET}@api.example/v1"\n`,
      );
      const msg = userError(() => resolveSettings(cli(file), dir, {})).message;
      expect(msg).toMatch(/upstream: must not carry user info/);
      expect(msg).not.toContain(SECRET);
    },
  );
});

describe('`check` output', () => {
  it('a mis-written oauth2 client_secret is not printed on stderr', async () => {
    const file = join(dir, 'proxy.yaml');
    writeFileSync(
      file,
      `apis:\n  - spec: ${PETSTORE}\n    credentials:\n      apiKey: {client_id: app, client_secret: ${SECRET}, scope: [a]}\n`,
    );
    let out = '';
    let err = '';
    const code = await runCli(['check', '--config', file], {
      out: (t) => void (out += t),
      err: (t) => void (err += t),
    });
    expect(code).not.toBe(0);
    expect(err).toContain('credentials');
    expect(out + err).not.toContain(SECRET);
  });
});
