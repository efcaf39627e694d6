/**
 * Approvers signing in at the organisation's OpenID Connect provider (issue 11), with
 * `openid-client`: authorization code flow with PKCE (S256), `state` and `nonce`.
 *
 * - Discovery happens on first use and is then kept; until it succeeds every start of a sign-in
 *   tries again (at most once per DISCOVERY_RETRY_MS), each try bounded by PROVIDER_TIMEOUT_S, so
 *   a provider that is down never stops the proxy from starting or serving agents. The proxy
 *   warms it in the background at start-up (src/app.ts).
 * - A pending sign-in (nonce, PKCE verifier, where to return, fresh or not) is kept in the store
 *   under the SHA-256 of its `state` (issue 13: the callback may reach another replica, or come
 *   after a restart), bounded (MAX_PENDING, least recent evicted) and short-lived (PENDING_TTL_MS).
 *   It is bound to the browser that started it: the callback must carry the same random browser
 *   cookie (its SHA-256 is stored), so a callback URL sent to someone else signs nobody in (login
 *   CSRF), and it is used once: taken in one statement, so a replayed callback finds nothing.
 * - §8.11 fresh authentication: a fresh sign-in asks the provider for `max_age=0` and then refuses
 *   an ID token whose `auth_time` is older than `sign_in.fresh_auth` by this proxy's clock.
 * - No token, code or secret is ever logged or shown; refusals carry a reason code.
 */
import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import type { Clock } from '../clock.js';
import type { OidcSettings } from '../config/oidc.js';
import type { Logger } from '../log.js';
import type { Store } from '../storage/types.js';
import {
  DISCOVERY_RETRY_MS,
  MAX_PENDING,
  OidcUnavailable,
  PENDING_TTL_MS,
  PROVIDER_TIMEOUT_S,
  type OidcFinish,
  type OidcRefusal,
} from './oidc-outcomes.js';
import { hasControlCharacter } from '../util/control-characters.js';

export class OidcSignIn {
  #config: Promise<oidc.Configuration> | undefined;
  #failedAt = -Infinity;

  constructor(
    private readonly settings: OidcSettings,
    /** Where pending sign-ins are kept (shared by replicas). */
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly freshAuthMs: number,
    private readonly logger: Logger,
    /** `{issuer}/sign-in/oidc/callback` of this proxy (its issuer is known once it listens). */
    private readonly redirectUri: () => string,
  ) {}

  get name(): string {
    return this.settings.name;
  }

  /** Discovery in the background (start-up): a failure is logged, and retried on first use. */
  warm(): void {
    this.#configuration().catch(() => undefined);
  }

  /**
   * A new pending sign-in for the browser whose cookie is `browser`; the provider URL to send it
   * to. `fresh`: the person must authenticate again now (§8.11), whatever the provider's session.
   */
  async begin(returnTo: string, fresh: boolean, browser: string): Promise<URL> {
    const config = await this.#configuration();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const verifier = oidc.randomPKCECodeVerifier();
    const now = this.clock.now();
    await this.store.insertOidcPending(
      {
        stateHash: sha256(state),
        nonce,
        verifier,
        returnTo,
        fresh,
        browserHash: sha256(browser),
        expiresAt: now + PENDING_TTL_MS,
      },
      MAX_PENDING,
      now,
    );
    const params: Record<string, string> = {
      redirect_uri: this.redirectUri(),
      response_type: 'code',
      scope: this.settings.scopes.join(' '),
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    };
    if (this.settings.acrValues) params.acr_values = this.settings.acrValues.join(' ');
    if (fresh) params.max_age = '0';
    return oidc.buildAuthorizationUrl(config, params);
  }

  /** The provider's answer at the callback (`query`: its query string) → who signed in, or why not. */
  async finish(query: URLSearchParams, browser: string | undefined): Promise<OidcFinish> {
    const state = query.get('state') ?? '';
    // Taken only by the browser that started it (used once, whatever happens next).
    const pending =
      state && browser !== undefined
        ? await this.store.takeOidcPending(sha256(state), sha256(browser), this.clock.now())
        : undefined;
    if (!pending) {
      // Unknown, expired, used, or started in another browser: the same answer for each.
      return this.#refuse(
        'unknown_state',
        'This sign-in has expired, was already used, or was not started in this browser. Nothing was signed in: start again.',
        '/device',
      );
    }
    const { returnTo } = pending;
    const config = await this.#configuration().catch(() => undefined);
    if (!config) return this.#unavailable(returnTo);
    const callback = new URL(this.redirectUri());
    callback.search = query.toString();
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: pending.verifier,
        expectedState: state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
    } catch (err) {
      return this.#providerFailure(err, returnTo);
    }
    const claims = tokens.claims();
    if (!claims) return this.#refuse('invalid_response', 'The sign-in provider sent no ID token.', returnTo);
    const acrValues = this.settings.acrValues;
    if (acrValues && (typeof claims.acr !== 'string' || !acrValues.includes(claims.acr))) {
      return this.#refuse(
        'acr_not_allowed',
        `Your sign-in at ${this.name} did not use a method this server accepts for approvals. Nothing was signed in.`,
        returnTo,
        { acr: typeof claims.acr === 'string' ? claims.acr.slice(0, 200) : null },
      );
    }
    const now = this.clock.now();
    const authTime = authenticationTime(claims.auth_time, now);
    // §8.11: a fresh sign-in counts only if the person authenticated within fresh_auth.
    if (pending.fresh && (authTime === undefined || now - authTime > this.freshAuthMs)) {
      return this.#refuse(
        'not_fresh',
        `${this.name} did not ask you to sign in again, so this does not count as a fresh sign-in for approving. Nothing was approved.`,
        returnTo,
      );
    }
    let source: Readonly<Record<string, unknown>> = claims;
    if (claims[this.settings.userIdClaim] === undefined && tokens.access_token) {
      try {
        source = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
      } catch (err) {
        return this.#providerFailure(err, returnTo);
      }
    }
    const userId = userIdFrom(source[this.settings.userIdClaim]);
    if (userId === undefined) {
      return this.#refuse(
        'no_user_id',
        `${this.name} did not say who you are (no usable ${this.settings.userIdClaim}). Nothing was signed in.`,
        returnTo,
      );
    }
    // An address the provider says it has not verified is anyone's to type in. Some providers
    // (userinfo of several) send the claim as a string: "false" is as unverified as false.
    if (
      this.settings.userIdClaim === 'email' &&
      (source.email_verified === false || source.email_verified === 'false')
    ) {
      return this.#refuse(
        'email_not_verified',
        `${this.name} has not verified your e-mail address, so it cannot name you here. Nothing was signed in.`,
        returnTo,
      );
    }
    return {
      kind: 'ok',
      userId,
      // Without auth_time nobody can say when the person last authenticated: the provider may
      // have reused a session of its own hours old, with nobody at the keyboard. Such a session
      // is never fresh (§8.11); a fresh sign-in asks with max_age=0 and needs auth_time.
      authenticatedAt: authTime ?? 0,
      returnTo,
      fresh: pending.fresh,
      ...authenticationClaims(claims),
    };
  }

  /** The provider's metadata, discovered once; a failure is retried after DISCOVERY_RETRY_MS. */
  #configuration(): Promise<oidc.Configuration> {
    if (this.#config) return this.#config;
    if (this.clock.now() - this.#failedAt < DISCOVERY_RETRY_MS) {
      return Promise.reject(new OidcUnavailable('discovery failed recently'));
    }
    const s = this.settings;
    const attempt = oidc
      .discovery(s.issuer, s.clientId, undefined, oidc.ClientSecretBasic(s.clientSecret), {
        timeout: PROVIDER_TIMEOUT_S,
        // Plain http only for a loopback issuer (checked at start-up, src/config/oidc.ts).
        // eslint-disable-next-line @typescript-eslint/no-deprecated -- deprecated only as a warning sign; used for loopback only
        ...(s.allowHttp ? { execute: [oidc.allowInsecureRequests] } : {}),
      })
      .catch((err: unknown) => {
        this.#config = undefined;
        this.#failedAt = this.clock.now();
        this.logger.warn('oidc discovery failed', { issuer: s.issuer.href, ...errorFields(err) });
        throw new OidcUnavailable('discovery failed');
      });
    this.#config = attempt;
    return attempt;
  }

  #providerFailure(err: unknown, returnTo: string): OidcFinish {
    if (err instanceof oidc.AuthorizationResponseError) {
      // The provider said no (the person cancelled, or was not allowed): its error code only.
      return this.#refuse(
        'provider_error',
        `${this.name} did not sign you in (${err.error.slice(0, 64)}). Nothing was signed in.`,
        returnTo,
        { provider_error: err.error.slice(0, 64) },
      );
    }
    if (isNetworkError(err)) return this.#unavailable(returnTo, err);
    return this.#refuse(
      'invalid_response',
      `The answer from ${this.name} could not be verified. Nothing was signed in.`,
      returnTo,
      errorFields(err),
    );
  }

  #unavailable(returnTo: string, err?: unknown): OidcFinish {
    return this.#refuse(
      'unavailable',
      `${this.name} could not be reached. Nothing was signed in: try again in a minute.`,
      returnTo,
      err === undefined ? {} : errorFields(err),
    );
  }

  #refuse(
    reason: OidcRefusal,
    message: string,
    returnTo: string,
    fields: Record<string, string | null> = {},
  ): OidcFinish {
    this.logger.warn('oidc sign-in refused', { reason, ...fields });
    return { kind: 'refused', reason, message, returnTo };
  }
}

/** A claim value usable as a user_id: a short string without control characters. */
function userIdFrom(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const id = value.trim();
  // A user id with control characters is no user id.
  return id.length > 0 && id.length <= 200 && !hasControlCharacter(id) ? id : undefined;
}

/** What may be logged of an openid-client failure: its class, code and message (never its cause, which may hold a token response). */
function errorFields(err: unknown): Record<string, string | null> {
  if (!(err instanceof Error)) return { error: 'unknown' };
  const code = (err as { code?: unknown }).code;
  return {
    error: err.name,
    code: typeof code === 'string' ? code : null,
    detail: err.message.slice(0, 200),
  };
}

/** fetch's failures: refused connections, timeouts, aborted requests. */
function isNetworkError(err: unknown): boolean {
  return (
    (err instanceof TypeError && err.message === 'fetch failed') ||
    (err instanceof DOMException && (err.name === 'TimeoutError' || err.name === 'AbortError'))
  );
}

function sha256(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

/** Bounded copies of an ID token's `acr` and `amr` (they come from the provider, not the user). */
function authenticationClaims(claims: Readonly<Record<string, unknown>>): {
  readonly acr: string | null;
  readonly amr: readonly string[] | null;
} {
  const acr = typeof claims.acr === 'string' && claims.acr !== '' ? claims.acr.slice(0, 200) : null;
  const amr = Array.isArray(claims.amr)
    ? claims.amr
        .filter((m): m is string => typeof m === 'string' && m !== '')
        .slice(0, 10)
        .map((m) => m.slice(0, 50))
    : [];
  return { acr, amr: amr.length > 0 ? amr : null };
}

/** How far ahead of this server's clock a provider's may run and its `auth_time` still count. */
const AUTH_TIME_AHEAD_MS = 60_000;

/**
 * `auth_time` (OIDC Core §2) as whole epoch ms, at most now; undefined when absent, not a finite
 * number, or further ahead than a provider's clock may be. A time to come cannot be when someone
 * authenticated, and taken as now it counted as a fresh sign-in (§8.11); a fraction of a second
 * made a sign-in time no store column holds.
 */
function authenticationTime(value: unknown, now: number): number | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value)) return undefined;
  const at = Math.floor(value * 1000);
  return at > now + AUTH_TIME_AHEAD_MS ? undefined : Math.min(at, now);
}
