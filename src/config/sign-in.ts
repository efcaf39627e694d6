/**
 * `sign_in:` of the proxy config → SignInSettings: local accounts with their scrypt hashes parsed
 * (and bounded) and TOTP secrets decoded at start-up, so a typo stops the proxy rather than
 * locking a user out at the first sign-in; the trusted header's peers checked as CIDRs; the OIDC
 * provider's settings checked (src/config/oidc.ts).
 */
import { createHash } from 'node:crypto';
import { UserError } from '../errors.js';
import { parseConfigDuration } from './durations.js';
import { parsePasswordHash, type PasswordHash } from '../util/password.js';
import { decodeBase32 } from '../util/totp.js';
import { parseCidr } from './cidr.js';
import { resolveOidc, type OidcSettings } from './oidc.js';
import type { FileConfig, SecretConfig } from './schema.js';

export interface LocalUser {
  readonly userId: string;
  readonly passwordHash: PasswordHash;
  /** The decoded TOTP key; absent: password only. */
  readonly totpKey?: Buffer;
}

/**
 * A digest of what signs `user` in (the scrypt hash and the TOTP key), kept with each password
 * session: a restart with a changed `password_hash` or `totp_secret` ends the sessions the old one
 * started (protocol/sessions.ts stillSignsIn), as a person changing a leaked password expects.
 */
export function credentialTag(user: LocalUser): string {
  const h = user.passwordHash;
  return createHash('sha256')
    .update(`scrypt$${h.N}$${h.r}$${h.p}$`)
    .update(h.salt)
    .update('$')
    .update(h.hash)
    .update('$')
    .update(user.totpKey ?? Buffer.alloc(0))
    .digest('base64url')
    .slice(0, 22);
}

export interface SignInSettings {
  /** §8.11: an approval needs a sign-in at most this old. */
  readonly freshAuthMs: number;
  readonly sessionLifetimeMs: number;
  /** A first passkey also needs a one-time enrolment code from the operator (protocol/enrolment-codes.ts). */
  readonly firstPasskeyNeedsCode: boolean;
  /** By user_id. Empty: no local sign-in. */
  readonly localUsers: ReadonlyMap<string, LocalUser>;
  /** The organisation's OpenID Connect provider (src/config/oidc.ts). */
  readonly oidc?: OidcSettings;
  /** Lower-case header name and the peer addresses/CIDRs it is believed from. */
  readonly trustedHeader?: { readonly name: string; readonly from: readonly string[] };
}

type SignInConfig = FileConfig['sign_in'];

/** Headers the proxy or the HTTP layer own: never a source of identity. */
const RESERVED = new Set(['host', 'cookie', 'authorization', 'origin', 'content-type', 'content-length']);

export function resolveSignIn(
  config: SignInConfig,
  where: string,
  readSecret: (value: SecretConfig, at: string) => string,
): SignInSettings {
  // Config durations, so "1500ms" reads as the README and the config schema say it does.
  const freshAuthMs = parseConfigDuration(config.fresh_auth, `${where}: sign_in.fresh_auth`);
  const sessionLifetimeMs = parseConfigDuration(
    config.session_lifetime,
    `${where}: sign_in.session_lifetime`,
  );
  if (freshAuthMs < 1000) throw new UserError(`${where}: sign_in.fresh_auth must be at least 1s`);
  if (sessionLifetimeMs < freshAuthMs) {
    throw new UserError(`${where}: sign_in.session_lifetime must not be shorter than sign_in.fresh_auth`);
  }
  const localUsers = new Map<string, LocalUser>();
  (config.local?.users ?? []).forEach((u, i) => {
    const at = `${where}: sign_in.local.users[${i}]`;
    if (localUsers.has(u.user_id)) throw new UserError(`${at}: user_id ${u.user_id} is listed twice`);
    let passwordHash: PasswordHash;
    try {
      passwordHash = parsePasswordHash(u.password_hash);
    } catch (err) {
      throw new UserError(`${at}.password_hash: ${(err as Error).message}`);
    }
    let totpKey: Buffer | undefined;
    if (u.totp_secret !== undefined) {
      try {
        totpKey = decodeBase32(readSecret(u.totp_secret, `${at}.totp_secret`));
      } catch (err) {
        if (err instanceof UserError) throw err;
        throw new UserError(`${at}.totp_secret: ${(err as Error).message}`);
      }
      // RFC 4226 §4: at least 128 bits of shared secret.
      if (totpKey.length < 16)
        throw new UserError(`${at}.totp_secret: needs at least 128 bits (26 base32 letters)`);
    }
    localUsers.set(u.user_id, { userId: u.user_id, passwordHash, ...(totpKey ? { totpKey } : {}) });
  });
  const header = config.trusted_header;
  if (header) {
    const name = header.name.toLowerCase();
    if (RESERVED.has(name)) {
      throw new UserError(
        `${where}: sign_in.trusted_header.name: ${header.name} cannot carry a user's identity`,
      );
    }
    header.from.forEach((entry, i) => {
      try {
        parseCidr(entry);
      } catch (err) {
        throw new UserError(`${where}: sign_in.trusted_header.from[${i}]: ${(err as Error).message}`);
      }
    });
  }
  const oidc = config.oidc ? resolveOidc(config.oidc, where, readSecret) : undefined;
  return Object.freeze({
    freshAuthMs,
    sessionLifetimeMs,
    firstPasskeyNeedsCode: config.first_passkey === 'operator_code',
    localUsers,
    ...(oidc ? { oidc } : {}),
    ...(header
      ? { trustedHeader: Object.freeze({ name: header.name.toLowerCase(), from: [...header.from] }) }
      : {}),
  });
}

/** Whether any way of signing in is configured; without one the pages only show requests. */
export function signInEnabled(s: SignInSettings): boolean {
  return s.localUsers.size > 0 || s.oidc !== undefined || s.trustedHeader !== undefined;
}
