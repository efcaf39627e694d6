/**
 * What the executor knows about one API, worked out once at start-up: where it lives, how it
 * authenticates, which secrets it must never hand back, which header and parameter names belong
 * to the proxy rather than to the agent, and which operations a status URL may name.
 */
import type { ApiExecutionSettings } from '../config/api-execution.js';
import type { Catalog } from '../openapi/catalog.js';
import { credentialKeys, nameKey } from '../openapi/credential-names.js';
import type { ApiInfo, Capability } from '../openapi/types.js';
import { ServiceCredentials } from './credentials.js';
import type { OAuthTokens } from './oauth.js';
import { Redactor, staticSecrets } from './redaction.js';
import type { RetiredSecrets } from './retired-secrets.js';

export interface CallerIdentity {
  readonly agentId: string;
  readonly hostId: string;
  readonly userId: string | null;
}

export interface ApiRuntime {
  readonly info: ApiInfo;
  /** `https://host:port`, or undefined when no usable base URL is configured. */
  readonly origin?: string;
  /** The base URL's path without a trailing slash, e.g. `/v1`. */
  readonly basePath: string;
  readonly settings: ApiExecutionSettings;
  readonly credentials: ServiceCredentials;
  readonly redactor: Redactor;
  /**
   * Header names (as nameKey) that only the proxy sets: credential headers, the operator's static
   * headers and the identity headers. An agent's header parameter of such a name is dropped.
   */
  readonly proxyHeaderKeys: ReadonlySet<string>;
  /** Names (as nameKey) of the API's apiKey credentials sent in the query and in cookies. */
  readonly credentialQueryKeys: ReadonlySet<string>;
  readonly credentialCookieKeys: ReadonlySet<string>;
  /** The GET operations a status URL of this API may name (issue 10, class 4). */
  readonly getOperations: readonly Capability[];
}

export function apiRuntimes(
  catalog: Catalog,
  settings: ReadonlyMap<string, ApiExecutionSettings>,
  baseUrlFor: (apiId: string) => string | undefined,
  oauth: OAuthTokens,
  retired?: RetiredSecrets,
): Map<string, ApiRuntime> {
  const out = new Map<string, ApiRuntime>();
  // OAuth tokens in use or replaced, and static secrets a reload replaced: they come and go.
  const changing = (): readonly string[] => {
    const tokens = oauth.currentTokens();
    const replaced = retired?.list() ?? [];
    if (replaced.length === 0) return tokens;
    return tokens.length === 0 ? replaced : [...tokens, ...replaced];
  };
  for (const info of catalog.apis) {
    const apiSettings = settings.get(info.id);
    if (!apiSettings) throw new Error(`no execution settings for API ${info.id}`);
    const identity = Object.values(apiSettings.identityHeaders ?? {});
    out.set(info.id, {
      info,
      ...parseBase(baseUrlFor(info.id)),
      settings: apiSettings,
      credentials: new ServiceCredentials(info.id, info.securitySchemes, apiSettings.credentials, oauth),
      redactor: new Redactor(staticSecrets(apiSettings), changing),
      proxyHeaderKeys: new Set([
        ...credentialKeys('header', info.securitySchemes),
        ...[...Object.keys(apiSettings.headers), ...identity].map((n) => nameKey('header', n)),
      ]),
      credentialQueryKeys: credentialKeys('query', info.securitySchemes),
      credentialCookieKeys: credentialKeys('cookie', info.securitySchemes),
      getOperations: catalog.capabilities.filter(
        (c) => c.operation.apiId === info.id && c.operation.method === 'get',
      ),
    });
  }
  return out;
}

function parseBase(base: string | undefined): { origin?: string; basePath: string } {
  if (!base) return { basePath: '' };
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    return { basePath: '' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { basePath: '' };
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, '') };
}
