/**
 * The service's own credentials, chosen per operation by its OpenAPI `security` requirement and
 * applied to the upstream request. Agents never see them: they are not inputs (the deriver drops
 * credential parameters), and nothing here returns or logs a value.
 */
import type { ServiceCredential } from '../config/api-execution.js';
import type { SecurityRequirement, SecuritySchemeInfo } from '../openapi/types.js';
import type { OAuthTokens } from './oauth.js';

export interface AppliedCredentials {
  readonly headers: Readonly<Record<string, string>>;
  readonly query: readonly (readonly [string, string])[];
  readonly cookies: readonly (readonly [string, string])[];
  /** The OAuth2 scheme used, so a 401 can refresh its token once. */
  readonly oauthScheme?: string;
}

const NONE: AppliedCredentials = Object.freeze({ headers: {}, query: [], cookies: [] });

export class ServiceCredentials {
  /** Results without OAuth tokens, by requirement list (an operation's, for the catalog's life). */
  private readonly fixed = new WeakMap<readonly SecurityRequirement[], AppliedCredentials>();

  constructor(
    private readonly apiId: string,
    private readonly schemes: Readonly<Record<string, SecuritySchemeInfo>>,
    private readonly configured: Readonly<Record<string, ServiceCredential>>,
    private readonly oauth: OAuthTokens,
  ) {}

  /**
   * Schemes that operations require but no credential covers, for a start-up warning.
   * Configured credentials for schemes the document does not define are refused at start-up.
   */
  check(requirements: Iterable<readonly SecurityRequirement[]>): { missing: string[]; unknown: string[] } {
    const missing = new Set<string>();
    for (const alternatives of requirements) {
      if (alternatives.length === 0 || this.choose(alternatives) !== undefined) continue;
      for (const name of Object.keys(alternatives[0] ?? {})) {
        if (!this.configured[name]) missing.add(name);
      }
    }
    const unknown = Object.keys(this.configured).filter((name) => !this.schemes[name]);
    return { missing: [...missing].sort(), unknown };
  }

  /**
   * Credentials for one call: the first alternative of `security` whose schemes all have a
   * credential (OpenAPI: one satisfied alternative meets the requirement). None when the
   * operation needs no security or nothing is configured; the upstream then decides.
   *
   * Synchronous unless an OAuth token must be fetched: without one, what a requirement list gets
   * is the same on every call, so it is built once and remembered (every execution asks).
   */
  apply(
    security: readonly SecurityRequirement[],
    refresh = false,
  ): AppliedCredentials | Promise<AppliedCredentials> {
    const fixed = this.fixed.get(security);
    if (fixed !== undefined) return fixed;
    const alternative = this.choose(security);
    if (alternative && Object.keys(alternative).some((name) => this.configured[name]?.kind === 'oauth2')) {
      return this.withTokens(alternative, refresh);
    }
    const applied = alternative ? this.build(alternative, new Map()) : NONE;
    this.fixed.set(security, applied);
    return applied;
  }

  private async withTokens(alternative: SecurityRequirement, refresh: boolean): Promise<AppliedCredentials> {
    const tokens = new Map<string, string>();
    for (const [name, scopes] of Object.entries(alternative)) {
      const credential = this.configured[name] as ServiceCredential;
      if (credential.kind !== 'oauth2') continue;
      const scheme = this.schemes[name] as SecuritySchemeInfo;
      tokens.set(
        name,
        await this.oauth.token(`${this.apiId}/${name}`, credential, scheme.tokenUrl, scopes, refresh),
      );
    }
    return this.build(alternative, tokens);
  }

  /** The headers, query and cookies of one alternative; `tokens` holds its OAuth schemes' tokens. */
  private build(alternative: SecurityRequirement, tokens: ReadonlyMap<string, string>): AppliedCredentials {
    const headers: Record<string, string> = {};
    const query: [string, string][] = [];
    const cookies: [string, string][] = [];
    let oauthScheme: string | undefined;
    for (const name of Object.keys(alternative)) {
      const scheme = this.schemes[name] as SecuritySchemeInfo;
      const credential = this.configured[name] as ServiceCredential;
      if (credential.kind === 'oauth2') {
        headers.authorization = `Bearer ${tokens.get(name) ?? ''}`;
        oauthScheme = name;
      } else if (credential.kind === 'basic') {
        const pair = Buffer.from(`${credential.username}:${credential.password}`, 'utf8').toString('base64');
        headers.authorization = `Basic ${pair}`;
      } else if (scheme.type === 'apiKey' && scheme.in && scheme.name) {
        if (scheme.in === 'header') headers[scheme.name.toLowerCase()] = credential.value;
        else if (scheme.in === 'query') query.push([scheme.name, credential.value]);
        else if (scheme.in === 'cookie') cookies.push([scheme.name, credential.value]);
      } else if (scheme.type === 'http' && scheme.scheme === 'basic') {
        // A single secret for a basic scheme is taken as `user:password`.
        headers.authorization = `Basic ${Buffer.from(credential.value, 'utf8').toString('base64')}`;
      } else {
        // http bearer, openIdConnect, oauth2 given a ready token: the value is a bearer token.
        headers.authorization = `Bearer ${credential.value}`;
      }
    }
    // Frozen: one result may serve every call of an operation.
    return Object.freeze({
      headers: Object.freeze(headers),
      query: Object.freeze(query),
      cookies: Object.freeze(cookies),
      ...(oauthScheme !== undefined ? { oauthScheme } : {}),
    });
  }

  /**
   * Alternatives that would be chosen yet cannot be sent: two of their schemes put a credential in
   * the same place (two of them in Authorization, which carries one credential, or one header,
   * query or cookie name twice), so one would silently replace the other. Each conflict is the
   * list of scheme names involved, with the place, e.g. `header authorization: basicAuth, oauth`.
   */
  conflicts(requirements: Iterable<readonly SecurityRequirement[]>): string[] {
    const out = new Set<string>();
    for (const alternatives of requirements) {
      const alternative = this.choose(alternatives);
      if (!alternative) continue;
      const byPlace = new Map<string, string[]>();
      for (const name of Object.keys(alternative)) {
        const place = this.placement(name);
        byPlace.set(place, [...(byPlace.get(place) ?? []), name]);
      }
      for (const [place, names] of byPlace) {
        if (names.length > 1) out.add(`${place}: ${[...names].sort().join(', ')}`);
      }
    }
    return [...out].sort();
  }

  /** Where a configured scheme's credential goes, as apply() sends it. */
  private placement(name: string): string {
    const scheme = this.schemes[name] as SecuritySchemeInfo;
    const credential = this.configured[name] as ServiceCredential;
    if (credential.kind === 'secret' && scheme.type === 'apiKey' && scheme.in && scheme.name) {
      return scheme.in === 'header' ? `header ${scheme.name.toLowerCase()}` : `${scheme.in} ${scheme.name}`;
    }
    return 'header authorization';
  }

  /** An empty alternative (`{}`, "auth optional") is used only when no other one can be satisfied. */
  private choose(security: readonly SecurityRequirement[]): SecurityRequirement | undefined {
    return security.find((alt) => {
      const names = Object.keys(alt);
      return (
        names.length > 0 &&
        names.every((name) => this.configured[name] !== undefined && this.schemes[name] !== undefined)
      );
    });
  }
}
