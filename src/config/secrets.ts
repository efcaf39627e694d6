/**
 * Secrets in the configuration: where a value may come from (inline, an environment variable, a
 * file), and the operator's own tokens (admin API, introspection) with their strength checked.
 * Values are never shown in an error, only where they were looked for.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { UserError } from '../errors.js';
import type { FileConfig, SecretConfig } from './schema.js';

export type Env = Readonly<Record<string, string | undefined>>;

/** Where secrets may also come from, so they stay out of argv and config files. */
export const ENV = {
  adminToken: 'AGENT_AUTH_PROXY_ADMIN_TOKEN',
  introspectionToken: 'AGENT_AUTH_PROXY_INTROSPECTION_TOKEN',
} as const;

const MIN_SECRET_LENGTH = 16;

/** A configured secret's value: inline, `{value}`, `{env}` or `{file}` (relative to `base`). */
export function resolveSecret(value: SecretConfig, where: string, base: string, env: Env): string {
  if (typeof value === 'string') return value;
  if (value.value !== undefined) return value.value;
  if (value.env !== undefined) {
    const v = env[value.env];
    if (v === undefined || v === '')
      throw new UserError(`${where}: environment variable ${value.env} is not set`);
    return v;
  }
  if (value.file !== undefined) return readSecretFile(resolve(base, value.file), where);
  throw new UserError(`${where}: expected env, file or value`);
}

/** The operator's tokens: each from its flag, its file flag, its variable or the config's file, first found. */
export function operatorTokens(sources: {
  readonly cli: {
    readonly adminToken?: string;
    readonly adminTokenFile?: string;
    readonly introspectionToken?: string;
    readonly introspectionTokenFile?: string;
  };
  readonly config: Pick<FileConfig, 'admin_token_file' | 'introspection_token_file'>;
  readonly cwd: string;
  readonly base: string;
  readonly env: Env;
}): { adminToken?: string; introspectionToken?: string } {
  const { cli, config, cwd, base, env } = sources;
  const adminToken = secret('admin token', [
    ['--admin-token', cli.adminToken],
    [
      '--admin-token-file',
      cli.adminTokenFile && readSecretFile(resolve(cwd, cli.adminTokenFile), '--admin-token-file'),
    ],
    [ENV.adminToken, env[ENV.adminToken]],
    [
      'admin_token_file',
      config.admin_token_file && readSecretFile(resolve(base, config.admin_token_file), 'admin_token_file'),
    ],
  ]);
  const introspectionToken = secret('introspection token', [
    ['--introspection-token', cli.introspectionToken],
    [
      '--introspection-token-file',
      cli.introspectionTokenFile &&
        readSecretFile(resolve(cwd, cli.introspectionTokenFile), '--introspection-token-file'),
    ],
    [ENV.introspectionToken, env[ENV.introspectionToken]],
    [
      'introspection_token_file',
      config.introspection_token_file &&
        readSecretFile(resolve(base, config.introspection_token_file), 'introspection_token_file'),
    ],
  ]);
  return {
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(introspectionToken !== undefined ? { introspectionToken } : {}),
  };
}

/**
 * What a bearer token may hold (RFC 6750 §2.1 b64token): an operator token with any other
 * character (`#`, `!`, `$` from a password manager) would be accepted here yet could never be
 * sent in an Authorization header the proxy accepts, silently disabling the API it guards.
 */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** The first source that sets the secret wins; a weak secret is refused (its value is never shown). */
function secret(
  what: string,
  sources: readonly (readonly [string, string | undefined])[],
): string | undefined {
  for (const [from, value] of sources) {
    if (value === undefined || value === '') continue;
    if (value.length < MIN_SECRET_LENGTH || /\s/.test(value)) {
      throw new UserError(
        `${from}: the ${what} must be at least ${MIN_SECRET_LENGTH} characters without whitespace (e.g. openssl rand -hex 32)`,
      );
    }
    if (!B64TOKEN.test(value)) {
      throw new UserError(
        `${from}: the ${what} is sent as a bearer token, so it may hold only letters, digits and - . _ ~ + / (then = at the end) (e.g. openssl rand -hex 32)`,
      );
    }
    return value;
  }
  return undefined;
}

export function readSecretFile(file: string, from: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    throw new UserError(`${from}: ${file}: not found or not readable`);
  }
}
