/** `notifications.webhook` in the proxy config: defaults, secrets from env/file, and each mistake named. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { UserError } from '../../../src/errors.js';

const SECRET = 'hook-secret-0123456789';

function settings(block: string, env: Record<string, string> = {}): ReturnType<typeof resolveSettings> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-notify-'));
  writeFileSync(join(dir, 'url.txt'), 'https://chat.example/hooks/T0/B0/xyz\n');
  const file = join(dir, 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: spec.yaml\n${block}`);
  return resolveSettings({ config: file }, dir, env);
}

function failure(block: string, env: Record<string, string> = {}): string {
  try {
    settings(block, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('expected a UserError');
}

describe('notifications config', () => {
  it('is off by default', () => {
    expect(settings('').notifications).toEqual({});
  });

  it('reads the URL from a file and the secret from the environment, with the documented defaults', () => {
    const s = settings(
      'notifications:\n  webhook:\n    url: { file: url.txt }\n    secret: { env: HOOK }\n',
      { HOOK: SECRET },
    );
    expect(s.notifications.webhook).toEqual({
      url: 'https://chat.example/hooks/T0/B0/xyz',
      secret: SECRET,
      events: new Set(['ciba', 'per_call']),
      timeoutMs: 5000,
      maxAttempts: 6,
      retryBackoffMs: 1000,
      maxBackoffMs: 300_000,
      maxQueue: 1000,
    });
  });

  it('refuses a short secret, a missing variable, a URL that is not http(s), and backoffs out of order', () => {
    const hook = (extra: string, secret = '{ env: HOOK }', url = 'https://chat.example/h') =>
      `notifications:\n  webhook:\n    url: ${url}\n    secret: ${secret}\n${extra}`;
    expect(failure(hook('', 'short-secret'))).toMatch(/notifications\.webhook\.secret: must be at least 16/);
    expect(failure(hook(''))).toMatch(/environment variable HOOK is not set/);
    expect(failure(hook('', '{ env: HOOK }', 'ftp://chat.example/h'), { HOOK: SECRET })).toMatch(
      /notifications\.webhook\.url: must be an http\(s\) URL/,
    );
    expect(failure(hook('    retry_backoff: 10m\n    max_backoff: 1m\n'), { HOOK: SECRET })).toMatch(
      /max_backoff: must not be shorter than retry_backoff/,
    );
    expect(failure(hook('    events: []\n'), { HOOK: SECRET })).toMatch(/events/);
    expect(failure(hook('    max_queue: 0\n'), { HOOK: SECRET })).toMatch(/max_queue/);
  });
});
