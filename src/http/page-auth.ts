/**
 * Everything the pages need to know who is there (issue 11): the session cookie, local sign-in,
 * and the trusted header. Built once at start-up from `sign_in:`.
 *
 * The cookie is `HttpOnly; SameSite=Lax; Path=/`, `Secure` unless the issuer is plain http
 * (development), and then also named `__Host-` so that no sibling domain can set it.
 */
import type { IncomingMessage } from 'node:http';
import type { SignInSettings } from '../config/sign-in.js';
import { signInEnabled } from '../config/sign-in.js';
import type { Sessions } from '../protocol/sessions.js';
import type { LocalSignIn } from '../protocol/sign-in.js';
import type { SessionRecord } from '../storage/types.js';
import { ClientAddress, normalize } from './client-address.js';
import { hasControlCharacter } from '../util/control-characters.js';

export class PageAuth {
  readonly #trustedPeers: ClientAddress | undefined;

  constructor(
    readonly settings: SignInSettings,
    readonly sessions: Sessions,
    readonly local: LocalSignIn,
    /** The issuer, known only once the server listens when not configured. */
    private readonly issuer: () => string,
  ) {
    this.#trustedPeers = settings.trustedHeader ? new ClientAddress(settings.trustedHeader.from) : undefined;
  }

  get enabled(): boolean {
    return signInEnabled(this.settings);
  }

  get hasLocal(): boolean {
    return this.settings.localUsers.size > 0;
  }

  get secure(): boolean {
    return !this.issuer().startsWith('http://');
  }

  get cookieName(): string {
    return this.secure ? '__Host-aap_session' : 'aap_session';
  }

  /** The origin every page POST must come from (checked against `Origin`). */
  get origin(): string {
    return new URL(this.issuer()).origin;
  }

  cookie(value: string): string {
    const maxAge = Math.floor(this.settings.sessionLifetimeMs / 1000);
    return `${this.cookieName}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${this.secure ? '; Secure' : ''}`;
  }

  clearCookie(): string {
    return `${this.cookieName}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${this.secure ? '; Secure' : ''}`;
  }

  /** The session cookie's value in the request, if any. */
  cookieValue(req: IncomingMessage): string | undefined {
    return readCookie(req, this.cookieName);
  }

  /** Whether the TCP peer itself (not a forwarded address) is one of `trusted_header.from`. */
  fromTrustedPeer(req: IncomingMessage): boolean {
    if (!this.#trustedPeers) return false;
    const peer = normalize(req.socket.remoteAddress ?? '');
    return peer !== undefined && this.#trustedPeers.isTrusted(peer);
  }

  /**
   * The user the trusted header names, only when the TCP peer itself (not a forwarded address)
   * is one of `sign_in.trusted_header.from`; from any other peer the header means nothing.
   */
  trustedUser(req: IncomingMessage): string | undefined {
    const header = this.settings.trustedHeader;
    if (!header || !this.fromTrustedPeer(req)) return undefined;
    const value = req.headers[header.name];
    if (typeof value !== 'string') return undefined;
    const user = value.trim();
    // A user id with control characters is no user id.
    return user.length > 0 && user.length <= 200 && !hasControlCharacter(user) ? user : undefined;
  }
}

/** The value of the cookie `name` in the request, if any (the first, as browsers send most specific first). */
export function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Whether the authenticating proxy in front now speaks for someone other than `session`'s user:
 * from a trusted peer, a header naming another user, or, for a session the header started, no
 * user at all (that person signed out there). The person at the browser is whoever the header
 * names now; a cookie left by an earlier person on a shared browser must not decide for them.
 */
export function headerDisowns(auth: PageAuth, req: IncomingMessage, session: SessionRecord): boolean {
  if (!auth.fromTrustedPeer(req)) return false;
  const named = auth.trustedUser(req);
  return named === undefined ? session.authMethod === 'trusted_header' : named !== session.userId;
}

/** Only a local path may be returned to after sign-in: never another site (open redirect). */
export function safeReturn(value: string | null | undefined): string {
  if (!value || !value.startsWith('/') || value.startsWith('//') || value.includes('\\')) return '/device';
  // Control characters could split the Location header.
  if (hasControlCharacter(value) || value.length > 512) return '/device';
  // A Location header holds Latin-1 only (Node refuses more, after the session is made): a space or
  // a character past ASCII is sent percent-encoded, as a browser would; a lone surrogate is no path.
  try {
    return value.replace(/[^\u0021-\u007e]+/gu, (run) => encodeURIComponent(run));
  } catch {
    return '/device';
  }
}
