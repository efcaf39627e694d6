/**
 * Operator-pinned arguments: a pinned argument disappears from the capability's advertised input
 * and from the schema execution validates against, so an agent can neither see nor set it; the
 * executor always sends the pinned value instead.
 */
import { createCatalog, type Catalog } from './catalog.js';
import { withReachableDefs } from './local-ref.js';
import type { Capability, JsonSchema } from './types.js';

/** Capability name → names of its pinned arguments. */
export type PinnedArguments = ReadonlyMap<string, readonly string[]>;

export class PinError extends Error {}

export function pinArguments(catalog: Catalog, pins: PinnedArguments): Catalog {
  if (pins.size === 0) return catalog;
  const capabilities = catalog.capabilities.map((capability) => {
    const pinned = pins.get(capability.name);
    return pinned && pinned.length > 0 ? withoutArguments(capability, pinned) : capability;
  });
  for (const name of pins.keys()) {
    if (!catalog.get(name))
      throw new PinError(`pins name capability ${name}, which the catalog does not have`);
  }
  return createCatalog(catalog.apis, capabilities, catalog.warnings);
}

function withoutArguments(capability: Capability, pinned: readonly string[]): Capability {
  const properties = capability.argumentsSchema.properties as Record<string, unknown> | undefined;
  for (const name of pinned) {
    if (!properties || !Object.hasOwn(properties, name)) {
      throw new PinError(`capability ${capability.name} has no input argument ${name} to pin`);
    }
  }
  return removeInputs(capability, pinned);
}

/** The capability without those input arguments (advertised input and validated schema). */
export function removeInputs(capability: Capability, pinned: readonly string[]): Capability {
  const argumentsSchema = strip(capability.argumentsSchema, pinned);
  const remaining = Object.keys((argumentsSchema.properties as Record<string, unknown>) ?? {});
  const { input: _input, ...rest } = capability;
  return Object.freeze({
    ...rest,
    argumentsSchema,
    // §5.2.1: no input schema when nothing is left for the agent to supply.
    ...(capability.input && remaining.length > 0 ? { input: strip(capability.input, pinned) } : {}),
  });
}

function strip(schema: JsonSchema, pinned: readonly string[]): JsonSchema {
  const properties = Object.fromEntries(
    Object.entries((schema.properties as Record<string, unknown> | undefined) ?? {}).filter(
      ([name]) => !pinned.includes(name),
    ),
  );
  const required = Array.isArray(schema.required)
    ? (schema.required as unknown[]).filter((r) => typeof r !== 'string' || !pinned.includes(r))
    : undefined;
  const { required: _required, ...rest } = schema;
  // Only the root is rebuilt: the `$defs` it keeps are the catalog's shared, frozen definitions.
  return withReachableDefs({
    ...rest,
    properties,
    ...(required && required.length > 0 ? { required } : {}),
  });
}
