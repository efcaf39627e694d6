/** `sign_in.oidc` in the proxy config: defaults, and each operator mistake stopping start-up by name. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { signInEnabled } from '../../../src/config/sign-in.js';
import { UserError } from '../../../src/errors.js';

function settings(oidc: string, env: Record<string, string> = {}): ReturnType<typeof resolveSettings> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-oidc-'));
  const file = join(dir, 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: spec.yaml\nsign_in:\n  oidc:\n${oidc}`);
  return resolveSettings({ config: file }, dir, env);
}

function failure(oidc: string, env: Record<string, string> = {}): string {
  try {
    settings(oidc, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('expected a UserError');
}

const BASE = '    issuer: https://login.example.com\n    client_id: proxy\n';
const SECRET = '    client_secret: { env: OIDC_SECRET }\n';
const ENV = { OIDC_SECRET: 'a-client-secret' };

describe('sign_in.oidc config', () => {
  it('defaults: user_id from email, scopes openid email profile, the button named after the host', () => {
    const s = settings(BASE + SECRET, ENV).signIn;
    expect(signInEnabled(s)).toBe(true);
    expect(s.oidc).toMatchObject({
      clientId: 'proxy',
      clientSecret: 'a-client-secret',
      userIdClaim: 'email',
      scopes: ['openid', 'email', 'profile'],
      name: 'login.example.com',
      allowHttp: false,
    });
    expect(s.oidc?.issuer.href).toBe('https://login.example.com/');
    expect(s.oidc?.acrValues).toBeUndefined();
  });

  it('reads acr_values, a name, another claim and plain http on a loopback issuer', () => {
    const s = settings(
      '    issuer: http://127.0.0.1:9000/realms/x\n    client_id: proxy\n    client_secret: inline-secret\n    name: Example SSO\n    user_id_claim: sub\n    acr_values: [urn:mfa, urn:mfa]\n    scopes: [openid]\n',
    ).signIn.oidc;
    expect(s).toMatchObject({
      name: 'Example SSO',
      userIdClaim: 'sub',
      acrValues: ['urn:mfa'],
      scopes: ['openid'],
      allowHttp: true,
    });
  });

  it.each([
    ['plain http to a non-loopback provider', 'issuer: http://login.example.com', 'must be an https URL'],
    [
      'the discovery document instead of the issuer',
      'issuer: https://login.example.com/.well-known/openid-configuration',
      'not its discovery document',
    ],
    ['an issuer with a query', 'issuer: https://login.example.com/?tenant=x', 'no query'],
    ['a claim that names no person', 'user_id_claim: aud', 'does not name a person'],
    ['scopes without openid', 'scopes: [email]', 'must include openid'],
    ['user_id_claim email without the email scope', 'scopes: [openid, profile]', 'needs the email scope'],
  ])('refuses %s, naming sign_in.oidc', (_what, line, message) => {
    const yaml = line.startsWith('issuer:')
      ? `    ${line}\n    client_id: proxy\n${SECRET}`
      : `${BASE}${SECRET}    ${line}\n`;
    const error = failure(yaml, ENV);
    expect(error).toContain('sign_in.oidc');
    expect(error).toContain(message);
  });

  it('refuses a client secret from an unset environment variable, naming the key', () => {
    expect(failure(BASE + SECRET)).toMatch(
      /sign_in\.oidc\.client_secret: environment variable OIDC_SECRET is not set/,
    );
  });

  it('refuses a missing client_secret, an unknown key and a bad acr value (schema)', () => {
    expect(failure(BASE)).toContain('sign_in.oidc.client_secret: is required');
    expect(failure(`${BASE}${SECRET}    redirect_uri: https://x.example/cb\n`, ENV)).toContain(
      'sign_in.oidc.redirect_uri: unknown key',
    );
    expect(failure(`${BASE}${SECRET}    acr_values: ["has space"]\n`, ENV)).toContain(
      'sign_in.oidc.acr_values[0]: must match',
    );
  });
});
