/**
 * Where an API's operations are called: the operator's `upstream`, else the document's first
 * server with its variables filled from config (or their defaults). Variables never come from
 * agents, so a credential stays bound to the origin the operator chose.
 */
import { UserError } from '../errors.js';
import type { ApiInfo } from '../openapi/types.js';
import { shownUrl } from '../util/shown-url.js';

export function resolveBaseUrl(
  api: ApiInfo,
  variables: Readonly<Record<string, string>>,
  where: string,
): string | undefined {
  if (api.upstream !== undefined) return api.upstream;
  const server = api.servers[0];
  if (!server) return undefined;
  for (const name of Object.keys(variables)) {
    if (!server.variables[name]) {
      throw new UserError(`${where}.server_variables.${name}: the server ${server.url} has no such variable`);
    }
  }
  const url = server.url.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const declared = server.variables[name];
    const value = variables[name] ?? declared?.default;
    if (value === undefined) {
      throw new UserError(
        `${where}: server variable ${name} of ${server.url} has no value; set server_variables.${name}`,
      );
    }
    if (declared?.enum && declared.enum.length > 0 && !declared.enum.includes(value)) {
      throw new UserError(
        `${where}.server_variables.${name}: ${JSON.stringify(value)} is not one of ${declared.enum.join(', ')}`,
      );
    }
    return value;
  });
  // A relative server URL is relative to where the document came from (OpenAPI 3 §4.8.5).
  let resolved: string | undefined;
  if (/^https?:\/\//i.test(url)) resolved = url;
  else if (/^https?:\/\//i.test(api.source)) resolved = URL.parse(url, api.source)?.href;
  if (resolved !== undefined) refuseQuery(api, resolved, where);
  return resolved;
}

/**
 * Requests go to the origin, base path and operation path: a server URL's query
 * (`?api-version=2024-01-01`) would be silently left out of every call. Refused at load, as the
 * `upstream` setting refuses one, with query values masked (a key may be in them).
 */
function refuseQuery(api: ApiInfo, url: string, where: string): void {
  const query = URL.parse(url)?.search ?? '';
  if (query === '') return;
  throw new UserError(
    `${where}: the first server URL of ${shownUrl(api.source)}, ${shownUrl(url)}, has a query, which is never sent ` +
      '(requests go to its origin and path only); set upstream to the URL without the query, and declare ' +
      'what the API needs there as a query parameter of its operations (pinned with operations.NAME.pin)',
  );
}
