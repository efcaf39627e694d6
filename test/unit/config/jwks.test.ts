/** `jwks:` in the proxy config (§8.12): defaults, the CA file read once, and each mistake named. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { UserError } from '../../../src/errors.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

function settings(block: string): ReturnType<typeof resolveSettings> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-jwks-'));
  writeFileSync(join(dir, 'ca.pem'), PEM);
  writeFileSync(join(dir, 'not-a-cert.pem'), 'hello');
  const file = join(dir, 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: spec.yaml\n${block}`);
  return resolveSettings({ config: file }, dir, {});
}

function failure(block: string): string {
  try {
    settings(block);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('expected a UserError');
}

describe('jwks config', () => {
  it('defaults to https only, no private addresses, 5 s, 64 KiB, 30 s between refreshes', () => {
    expect(settings('').jwks).toEqual({
      allowHttp: false,
      allowedCidrs: [],
      timeoutMs: 5_000,
      maxBytes: 65_536,
      refreshIntervalMs: 30_000,
    });
  });

  it('reads the CA file relative to the config file', () => {
    const jwks = settings(
      'jwks:\n  ca_file: ca.pem\n  allowed_cidrs: [10.0.0.0/8, "::1"]\n  timeout: 750ms\n',
    ).jwks;
    expect(jwks.ca).toBe(PEM);
    expect(jwks.allowedCidrs).toEqual(['10.0.0.0/8', '::1']);
    expect(jwks.timeoutMs).toBe(750);
  });

  it.each([
    ['jwks:\n  allowed_cidrs: [intranet]\n', /jwks\.allowed_cidrs\[0\]: "intranet" is not an IP address/],
    ['jwks:\n  ca_file: missing.pem\n', /jwks\.ca_file: cannot read/],
    ['jwks:\n  ca_file: not-a-cert.pem\n', /jwks\.ca_file: .* holds no PEM certificate/],
    ['jwks:\n  max_bytes: 10\n', /max_bytes/],
    ['jwks:\n  timeout: soon\n', /timeout/],
  ])('names the mistake in %j', (block, message) => {
    expect(failure(block)).toMatch(message);
  });
});
