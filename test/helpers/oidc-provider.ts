/**
 * A real OpenID Connect provider for the page tests: `oidc-provider` on 127.0.0.1 (a free port),
 * one confidential client for the proxies under test, accounts with e-mail and username claims,
 * and its login and consent interactions as plain HTML forms that the browser fills in.
 *
 * Knobs a test may turn, as a real provider could behave:
 * - `acr`: the authentication context the next logins report;
 * - `authTimeOffsetSec`: how far before the login the reported `auth_time` lies (a provider that
 *   answers `max_age=0` without asking anyone);
 * - `now`: the login time comes from the test's clock, so that the proxy's TestClock and the
 *   provider agree on when the person signed in.
 * With `max_age` in the request this provider always asks for credentials again (the base policy
 * would skip that when the session's login time, taken from the test clock, lies ahead of the
 * wall clock).
 */
import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { interactionPolicy, type Configuration } from 'oidc-provider';
import { newKeyPair } from '../../src/util/key-pair.js';

export const IDP_PASSWORD = 'idp password for tests';

export interface IdpAccount {
  readonly email: string;
  /** A string too, as some providers send it. */
  readonly email_verified: boolean | string;
  readonly preferred_username: string;
  readonly name: string;
}

export interface TestIdp {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  acr: string;
  authTimeOffsetSec: number;
  /** Completed logins (the login form accepted), to see when the provider asked again. */
  readonly logins: number;
  close(): Promise<void>;
}

export async function startTestIdp(options: {
  readonly redirectUris: readonly string[];
  readonly accounts: Readonly<Record<string, IdpAccount>>;
  readonly now: () => number;
  readonly acr?: string;
  /** false: `auth_time` only when the request asks for it (max_age), as OIDC Core allows. */
  readonly requireAuthTime?: boolean;
}): Promise<TestIdp> {
  const clientId = 'agent-auth-proxy';
  const clientSecret = randomBytes(24).toString('base64url');
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const policy = interactionPolicy.base();
  policy
    .get('login')
    ?.checks.add(
      new interactionPolicy.Check('max_age_asks_again', 'max_age asks for credentials again', (ctx) =>
        ctx.oidc.params?.max_age !== undefined && !ctx.oidc.result?.login
          ? interactionPolicy.Check.REQUEST_PROMPT
          : interactionPolicy.Check.NO_NEED_TO_PROMPT,
      ),
    );
  const jwk = newKeyPair('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const configuration: Configuration = {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [...options.redirectUris],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        // auth_time in every ID token, as many providers send it: the proxy dates sessions by it.
        require_auth_time: options.requireAuthTime ?? true,
      },
    ],
    findAccount: (_ctx, id) => {
      const account = options.accounts[id];
      return account ? { accountId: id, claims: () => ({ sub: id, ...account }) } : undefined;
    },
    claims: {
      // amr is issued only when a requested scope names it; the approver's record keeps it (issue 16).
      openid: ['sub', 'amr'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
    },
    acrValues: ['urn:example:pwd', 'urn:example:mfa'],
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}`, policy },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    jwks: { keys: [jwk] },
    pkce: { required: () => true },
  };
  const provider = new Provider(issuer, configuration);
  const oidcHandler = provider.callback();

  const state = { acr: options.acr ?? 'urn:example:mfa', authTimeOffsetSec: 0, logins: 0 };

  const page = (res: ServerResponse, status: number, body: string): void => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Test IdP</title></head><body>${body}</body></html>`,
    );
  };

  const loginForm = (uid: string, error = ''): string =>
    `<h1>Test IdP: sign in</h1>${error ? `<p id="idp-error">${error}</p>` : ''}
<form method="post" action="/interaction/${uid}/login">
<label for="idp-login">Login</label><input id="idp-login" name="login" autocomplete="username">
<label for="idp-password">Password</label><input id="idp-password" name="password" type="password">
<button type="submit" id="idp-submit">Sign in</button>
</form>`;

  const interaction = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const [, , uid = '', action] = path.split('/');
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) {
      page(res, 400, '<p>Wrong interaction.</p>');
      return;
    }
    if (req.method === 'GET') {
      page(
        res,
        200,
        details.prompt.name === 'login'
          ? loginForm(uid)
          : `<h1>Test IdP: allow access</h1><p>The agent-auth-proxy wants to know who you are.</p>
<form method="post" action="/interaction/${uid}/confirm"><button type="submit" id="idp-allow">Allow</button></form>
<form method="post" action="/interaction/${uid}/abort"><button type="submit" id="idp-deny">Deny</button></form>`,
      );
      return;
    }
    const form = new URLSearchParams(await readBody(req));
    if (action === 'login') {
      const login = form.get('login') ?? '';
      if (!options.accounts[login] || form.get('password') !== IDP_PASSWORD) {
        page(res, 200, loginForm(uid, 'Wrong login or password.'));
        return;
      }
      state.logins += 1;
      const ts = Math.floor(options.now() / 1000) - state.authTimeOffsetSec;
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: login, acr: state.acr, amr: ['pwd', 'otp'], ts } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    if (action === 'abort') {
      await provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'The person said no.' },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    const accountId = details.session?.accountId ?? '';
    const clientOf = String(details.params.client_id);
    const grant = details.grantId
      ? ((await provider.Grant.find(details.grantId)) ??
        new provider.Grant({ accountId, clientId: clientOf }))
      : new provider.Grant({ accountId, clientId: clientOf });
    const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[] };
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    const grantId = await grant.save();
    return provider.interactionFinished(
      req,
      res,
      { consent: { grantId } },
      { mergeWithLastSubmission: true },
    );
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', issuer).pathname;
    if (path.startsWith('/interaction/')) {
      interaction(req, res, path).catch((err: unknown) => {
        if (!res.headersSent) page(res, 500, `<p>${String(err)}</p>`);
      });
      return;
    }
    void oidcHandler(req, res);
  });

  return {
    issuer,
    clientId,
    clientSecret,
    get acr() {
      return state.acr;
    },
    set acr(value: string) {
      state.acr = value;
    },
    get authTimeOffsetSec() {
      return state.authTimeOffsetSec;
    },
    set authTimeOffsetSec(value: number) {
      state.authTimeOffsetSec = value;
    },
    get logins() {
      return state.logins;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 16_384) throw new Error('form too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The browser's side at the provider: its cookies (by name and path, as a browser keeps them) and
 * the redirects it follows, up to the one that leaves for the proxy's callback.
 */
export class IdpBrowser {
  private readonly cookies = new Map<string, { path: string; value: string }>();

  constructor(
    private readonly idp: Pick<TestIdp, 'issuer'>,
    private readonly login: string,
  ) {}

  /** Follows redirects from `url` at the provider; returns the first location outside it. */
  async follow(url: string, form?: Record<string, string>): Promise<string> {
    let next: string | undefined = url;
    let body = form;
    for (let hops = 0; hops < 10 && next !== undefined; hops++) {
      const target = new URL(next, this.idp.issuer);
      if (target.origin !== this.idp.issuer) return target.href;
      const res = await fetch(target, {
        method: body ? 'POST' : 'GET',
        redirect: 'manual',
        headers: {
          cookie: this.cookieFor(target.pathname),
          ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        ...(body ? { body: new URLSearchParams(body).toString() } : {}),
      });
      for (const line of res.headers.getSetCookie()) this.keep(line);
      const text = await res.text();
      body = undefined;
      next = res.headers.get('location') ?? undefined;
      if (next === undefined) {
        // A page: the login form, then the consent form; the person fills in each.
        const action = /<form method="post" action="([^"]+)"/.exec(text)?.[1];
        if (!action) throw new Error(`the provider answered ${res.status}: ${text.slice(0, 200)}`);
        next = action;
        body = action.endsWith('/login') ? { login: this.login, password: IDP_PASSWORD } : {};
      }
    }
    throw new Error('too many redirects at the provider');
  }

  private keep(line: string): void {
    const [pair = '', ...attributes] = line.split(';').map((p) => p.trim());
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq);
    const path = attributes.find((a) => a.toLowerCase().startsWith('path='))?.slice(5) ?? '/';
    const expired = attributes.some((a) => /^expires=thu, 01 jan 1970/i.test(a));
    if (expired) this.cookies.delete(`${name};${path}`);
    else this.cookies.set(`${name};${path}`, { path, value: pair });
  }

  private cookieFor(pathname: string): string {
    return [...this.cookies.values()]
      .filter((c) => pathname.startsWith(c.path))
      .map((c) => c.value)
      .join('; ');
  }
}
