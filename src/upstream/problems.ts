/**
 * Start-up diagnostics of the execution settings against the catalog: APIs without a base URL,
 * credentials for unknown or missing schemes, schemes that would overwrite each other, settings
 * for capabilities that do not exist, a request-id header that a credential already uses.
 */
import type { Catalog } from '../openapi/catalog.js';
import type { ApiRuntime } from './runtime.js';

export function executionProblems(
  apis: Iterable<ApiRuntime>,
  catalog: Catalog,
  requestIdHeader: string,
): { errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  for (const api of apis) {
    const id = api.info.id;
    if (!api.origin)
      warnings.push(`API ${id}: no usable upstream URL; set upstream (its executions fail with 502)`);
    const requirements = catalog.capabilities
      .filter((c) => c.operation.apiId === id)
      .map((c) => c.operation.security);
    const { missing, unknown } = api.credentials.check(requirements);
    for (const name of unknown)
      errors.push(`API ${id}: credentials.${name} names no security scheme of the document`);
    for (const conflict of api.credentials.conflicts(requirements)) {
      errors.push(
        `API ${id}: operations require security schemes that are sent in one place ` +
          `(${conflict}); configure a credential for only one of them`,
      );
    }
    for (const name of missing) {
      warnings.push(`API ${id}: operations require security scheme ${name} but no credential is configured`);
    }
    for (const name of Object.keys(api.settings.operations)) {
      const c = catalog.get(name);
      if (!c || c.operation.apiId !== id)
        errors.push(`API ${id}: operations.${name} names no capability of this API`);
    }
    for (const [scheme, info] of Object.entries(api.info.securitySchemes)) {
      if (info.type === 'apiKey' && info.in === 'header' && info.name?.toLowerCase() === requestIdHeader) {
        errors.push(
          `API ${id}: server.request_id_header ${requestIdHeader} is the header of security scheme ${scheme}`,
        );
      }
    }
  }
  return { errors, warnings };
}
