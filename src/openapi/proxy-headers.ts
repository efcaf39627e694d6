/**
 * Header parameters the proxy sets itself are not the agent's to give (issue 10, class 6): an
 * operation's header parameter named like an identity header or a static header of the operator
 * (in any spelling a server reads as that name) leaves the capability's input and its binding,
 * so it is neither advertised, nor accepted, nor sent with the agent's value.
 */
import { createCatalog, type Catalog } from './catalog.js';
import { nameKey } from './credential-names.js';
import { removeInputs } from './pins.js';
import type { Capability } from './types.js';

/** API id → names of the headers the proxy sets for it. */
export type ProxyHeaders = ReadonlyMap<string, readonly string[]>;

export function withoutProxyHeaders(catalog: Catalog, headers: ProxyHeaders): Catalog {
  let changed = false;
  const capabilities = catalog.capabilities.map((capability) => {
    const keys = new Set((headers.get(capability.operation.apiId) ?? []).map((n) => nameKey('header', n)));
    const owned = capability.operation.parameters.filter(
      (p) => p.in === 'header' && keys.has(nameKey('header', p.name)),
    );
    if (owned.length === 0) return capability;
    changed = true;
    return withoutParameters(
      capability,
      owned.map((p) => p.argument),
    );
  });
  return changed ? createCatalog(catalog.apis, capabilities, catalog.warnings) : catalog;
}

function withoutParameters(capability: Capability, args: readonly string[]): Capability {
  const stripped = removeInputs(capability, args);
  return Object.freeze({
    ...stripped,
    operation: Object.freeze({
      ...capability.operation,
      parameters: Object.freeze(
        capability.operation.parameters.filter((p) => p.in !== 'header' || !args.includes(p.argument)),
      ),
    }),
  });
}
