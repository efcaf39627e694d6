/**
 * What an OIDC sign-in (oidc.ts) ends in, and its bounds: apart from the sign-in itself so that
 * the routes can name them without loading openid-client, which app.ts loads only when a
 * provider is configured (it is several MiB of a start-up's memory otherwise).
 */

/** How long a started sign-in may take at the provider. */
export const PENDING_TTL_MS = 10 * 60_000;
/** Sign-ins started and not finished, kept at most (about 300 bytes each). */
export const MAX_PENDING = 10_000;
/** Every request to the provider (discovery, token, userinfo) gives up after this. */
export const PROVIDER_TIMEOUT_S = 10;
/** After a failed discovery, the next try waits at least this long. */
export const DISCOVERY_RETRY_MS = 10_000;

export type OidcRefusal =
  | 'unknown_state'
  | 'provider_error'
  | 'invalid_response'
  | 'acr_not_allowed'
  | 'not_fresh'
  | 'no_user_id'
  | 'email_not_verified'
  | 'unavailable';

export type OidcFinish =
  | {
      readonly kind: 'ok';
      readonly userId: string;
      /** When the person authenticated at the provider (ms), never later than now. */
      readonly authenticatedAt: number;
      readonly returnTo: string;
      readonly fresh: boolean;
      /** The ID token's `acr` and `amr`, kept with the session for decision records (issue 16). */
      readonly acr: string | null;
      readonly amr: readonly string[] | null;
    }
  | {
      readonly kind: 'refused';
      readonly reason: OidcRefusal;
      /** For the person, safe to show (escaped where rendered). */
      readonly message: string;
      /** Where the sign-in was meant to return ('/device' when the sign-in is unknown). */
      readonly returnTo: string;
    };

/** The provider could not be reached or its metadata is unusable: a sign-in cannot start. */
export class OidcUnavailable extends Error {}
