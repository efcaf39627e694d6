/** `sign_in:` in the proxy config: defaults, and each operator mistake stopping start-up by name. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { signInEnabled } from '../../../src/config/sign-in.js';
import { UserError } from '../../../src/errors.js';

const HASH = 'scrypt$16384$8$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const TOTP = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

function settings(signIn: string, env: Record<string, string> = {}): ReturnType<typeof resolveSettings> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-signin-'));
  const file = join(dir, 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: spec.yaml\n${signIn}`);
  return resolveSettings({ config: file }, dir, env);
}

function failure(signIn: string, env: Record<string, string> = {}): string {
  try {
    settings(signIn, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('expected a UserError');
}

describe('sign_in config', () => {
  it('defaults to no sign-in (read-only pages), fresh_auth 5m and sessions of 12h', () => {
    const s = settings('').signIn;
    expect(s.freshAuthMs).toBe(300_000);
    expect(s.sessionLifetimeMs).toBe(12 * 3_600_000);
    expect(s.firstPasskeyNeedsCode).toBe(false);
    expect(signInEnabled(s)).toBe(false);
  });

  it('first_passkey: operator_code asks for the operator code; any other value stops start-up by name', () => {
    expect(settings('sign_in:\n  first_passkey: operator_code\n').signIn.firstPasskeyNeedsCode).toBe(true);
    expect(settings('sign_in:\n  first_passkey: fresh_sign_in\n').signIn.firstPasskeyNeedsCode).toBe(false);
    expect(failure('sign_in:\n  first_passkey: sometimes\n')).toContain('first_passkey');
  });

  it('reads local users with a TOTP secret from the environment, and a trusted header', () => {
    const s = settings(
      `sign_in:\n  fresh_auth: 2m\n  local:\n    users:\n      - user_id: alice\n        password_hash: "${HASH}"\n        totp_secret: { env: ALICE_TOTP }\n  trusted_header:\n    name: X-Forwarded-Email\n    from: [10.0.0.0/8, "::1"]\n`,
      { ALICE_TOTP: TOTP },
    ).signIn;
    expect(s.freshAuthMs).toBe(120_000);
    expect(s.localUsers.get('alice')?.totpKey?.toString('ascii')).toBe('12345678901234567890');
    expect(s.trustedHeader).toEqual({ name: 'x-forwarded-email', from: ['10.0.0.0/8', '::1'] });
    expect(signInEnabled(s)).toBe(true);
  });

  it.each([
    ['a plain-text password', 'password_hash: "hunter2"', 'password_hash'],
    [
      'a hash too cheap to resist guessing',
      'password_hash: "scrypt$1024$8$1$aaaaaaaaaaaaaaaaaaaaaa$aaaaaaaaaaaaaaaaaaaaaa"',
      'sign_in.local.users[0].password_hash',
    ],
    [
      'a TOTP secret that is not base32',
      `password_hash: "${HASH}"\n        totp_secret: { value: "not-base32!" }`,
      'totp_secret',
    ],
    [
      'a TOTP secret shorter than 128 bits',
      `password_hash: "${HASH}"\n        totp_secret: { value: "GEZDGNBV" }`,
      '128 bits',
    ],
    [
      'a TOTP secret from an unset variable',
      `password_hash: "${HASH}"\n        totp_secret: { env: NOPE }`,
      'NOPE is not set',
    ],
  ])('refuses %s', (_what, userYaml, message) => {
    expect(
      failure(`sign_in:\n  local:\n    users:\n      - user_id: alice\n        ${userYaml}\n`),
    ).toContain(message);
  });

  it('refuses one user listed twice', () => {
    const user = `      - user_id: alice\n        password_hash: "${HASH}"\n`;
    expect(failure(`sign_in:\n  local:\n    users:\n${user}${user}`)).toContain('listed twice');
  });

  it('refuses a trusted header with a bad peer range, or trusted from nowhere', () => {
    expect(failure('sign_in:\n  trusted_header:\n    name: X-User\n    from: [10.0.0.0/33]\n')).toContain(
      'sign_in.trusted_header.from[0]',
    );
    expect(failure('sign_in:\n  trusted_header:\n    name: X-User\n    from: []\n')).toContain('from');
  });

  it('refuses a trusted header the HTTP layer owns (Cookie, Authorization, Host)', () => {
    expect(failure('sign_in:\n  trusted_header:\n    name: Authorization\n    from: [10.0.0.1]\n')).toContain(
      "cannot carry a user's identity",
    );
  });

  it('reads its durations as every config duration, milliseconds included (as the README and schema say)', () => {
    const s = settings('sign_in:\n  fresh_auth: 1500ms\n  session_lifetime: 90000ms\n').signIn;
    expect([s.freshAuthMs, s.sessionLifetimeMs]).toEqual([1500, 90_000]);
    expect(failure('sign_in:\n  fresh_auth: 999ms\n')).toContain('fresh_auth must be at least 1s');
  });

  it('refuses fresh_auth longer than the session itself', () => {
    expect(failure('sign_in:\n  fresh_auth: 1d\n  session_lifetime: 1h\n')).toContain('session_lifetime');
  });
});
