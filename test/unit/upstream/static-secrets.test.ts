/**
 * The static secrets of an API (redaction.ts staticSecrets). Regression: a static
 * `Authorization: Bearer …` header was a secret only as its whole value, so an upstream echoing
 * the token alone (`token sk-… has expired`) handed it to the agent.
 */
import { describe, expect, it } from 'vitest';
import type { ApiExecutionSettings } from '../../../src/config/api-execution.js';
import { staticSecrets } from '../../../src/upstream/redaction.js';

function settings(
  headers: Record<string, string>,
  credentials: ApiExecutionSettings['credentials'] = {},
): ApiExecutionSettings {
  return {
    timeoutMs: 1000,
    retries: 0,
    retryBackoffMs: 10,
    maxResponseBytes: 1024,
    serverVariables: {},
    credentials,
    headers,
    operations: {},
  };
}

const TOKEN = 'sk-live-abcdef0123456789XYZ';
const basic = (pair: string): string => Buffer.from(pair).toString('base64');

describe('staticSecrets: the credential inside a static header', () => {
  it.each([
    ['Authorization', `Bearer ${TOKEN}`],
    ['Proxy-Authorization', `Bearer ${TOKEN}`],
    ['X-Auth', `Token ${TOKEN}`],
  ])('%s: %s → the value and the token alone', (name, value) => {
    expect(staticSecrets(settings({ [name]: value }))).toEqual([value, TOKEN]);
  });

  it('an auth-param list (`Token token="…"`): each long value too', () => {
    const value = `Token token="${TOKEN}"`;
    expect(staticSecrets(settings({ Authorization: value }))).toEqual([value, `token="${TOKEN}"`, TOKEN]);
  });

  it('Basic: the base64, `user:pass` and the password, as for an http basic credential', () => {
    const value = `Basic ${basic('svc:pw-0123456789')}`;
    const fromHeader = staticSecrets(settings({ Authorization: value }));
    expect(fromHeader).toEqual([value, basic('svc:pw-0123456789'), 'pw-0123456789', 'svc:pw-0123456789']);
    const fromCredential = staticSecrets(
      settings({}, { basicAuth: { kind: 'basic', username: 'svc', password: 'pw-0123456789' } }),
    );
    expect(new Set(fromHeader.slice(1))).toEqual(new Set(fromCredential));
  });

  it('a short Basic password is left out (it would rewrite ordinary words), the rest is kept', () => {
    const value = `Basic ${basic('service-user:pw')}`;
    expect(staticSecrets(settings({ Authorization: value }))).toEqual([
      value,
      basic('service-user:pw'),
      'service-user:pw',
    ]);
  });

  it('a description with spaces, a short credential, or a short header adds nothing', () => {
    expect(staticSecrets(settings({ 'User-Agent': 'acme-sync (ops at acme.com)' }))).toEqual([
      'acme-sync (ops at acme.com)',
    ]);
    expect(staticSecrets(settings({ 'X-Mode': 'Bearer abc' }))).toEqual(['Bearer abc']);
    expect(staticSecrets(settings({ 'X-Tenant': 'acme' }))).toEqual([]);
  });
});
