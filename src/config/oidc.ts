/**
 * `sign_in.oidc` of the proxy config → OidcSettings, checked at start-up so that a mistake stops
 * the proxy with the key named, rather than failing an approver's first sign-in. Only the
 * provider's metadata (discovery) waits for the first use: see src/protocol/oidc.ts.
 */
import { UserError } from '../errors.js';
import type { FileConfig, SecretConfig } from './schema.js';
import { hasControlCharacter } from '../util/control-characters.js';

export interface OidcSettings {
  /** The provider's issuer identifier (no trailing slash added or removed: it must match exactly). */
  readonly issuer: URL;
  readonly clientId: string;
  /** Never logged. */
  readonly clientSecret: string;
  /** The button says "Sign in with {name}". */
  readonly name: string;
  readonly userIdClaim: string;
  /** When set, an ID token whose `acr` is not one of these is refused. */
  readonly acrValues?: readonly string[];
  readonly scopes: readonly string[];
  /** Plain http, allowed only for a loopback issuer (development and tests). */
  readonly allowHttp: boolean;
}

type OidcConfig = NonNullable<FileConfig['sign_in']['oidc']>;

/**
 * Claims that say something about the token rather than the person: none of them names a user.
 * (`sub` does, and is a fine choice where e-mail addresses change.)
 */
const NOT_A_USER = new Set([
  'iss',
  'aud',
  'exp',
  'iat',
  'nbf',
  'jti',
  'nonce',
  'acr',
  'amr',
  'azp',
  'auth_time',
  'at_hash',
  'c_hash',
  'sid',
  'email_verified',
  'phone_number_verified',
]);

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

export function resolveOidc(
  config: OidcConfig,
  where: string,
  readSecret: (value: SecretConfig, at: string) => string,
): OidcSettings {
  const at = `${where}: sign_in.oidc`;
  let issuer: URL;
  try {
    issuer = new URL(config.issuer);
  } catch {
    throw new UserError(`${at}.issuer: ${config.issuer} is not a URL`);
  }
  if (issuer.username || issuer.password) {
    // Not quoted: the user info may be a password.
    throw new UserError(`${at}.issuer: must have no user info (user:password@)`);
  }
  const loopback = LOOPBACK.test(issuer.hostname);
  if (issuer.protocol !== 'https:' && !(issuer.protocol === 'http:' && loopback)) {
    throw new UserError(
      `${at}.issuer: must be an https URL (plain http only on localhost or 127.0.0.1, for development); got ${config.issuer}`,
    );
  }
  if (issuer.search || issuer.hash) {
    throw new UserError(`${at}.issuer: must have no query or fragment; got ${config.issuer}`);
  }
  if (issuer.pathname.includes('/.well-known/')) {
    throw new UserError(
      `${at}.issuer: give the issuer identifier, not its discovery document (drop /.well-known/…)`,
    );
  }
  const claim = config.user_id_claim;
  if (NOT_A_USER.has(claim)) {
    throw new UserError(`${at}.user_id_claim: ${claim} does not name a person; use email, sub or the like`);
  }
  const scopes = [...new Set(config.scopes)];
  if (!scopes.includes('openid')) {
    throw new UserError(`${at}.scopes: must include openid (got ${scopes.join(' ')})`);
  }
  // OIDC Core §5.4: the email claim comes with the email scope; without it no user_id arrives.
  if (claim === 'email' && !scopes.includes('email')) {
    throw new UserError(`${at}.scopes: user_id_claim email needs the email scope`);
  }
  const clientSecret = readSecret(config.client_secret, `${at}.client_secret`);
  // A secret read from a file must not carry a line break into a header.
  if (hasControlCharacter(clientSecret)) {
    throw new UserError(`${at}.client_secret: the value contains control characters`);
  }
  return Object.freeze({
    issuer,
    clientId: config.client_id,
    clientSecret,
    name: config.name ?? issuer.hostname,
    userIdClaim: claim,
    ...(config.acr_values ? { acrValues: Object.freeze([...new Set(config.acr_values)]) } : {}),
    scopes: Object.freeze(scopes),
    allowHttp: issuer.protocol === 'http:',
  });
}
