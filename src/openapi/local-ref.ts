/**
 * Local `$ref`s of a capability's schemas. Each component a capability's input or output reaches
 * sits once under that root schema's `$defs` and is referenced as `#/$defs/Name` (issue #14), so
 * anything reading a property's type, description or fields must look through those references.
 * This is the one place that does.
 */
import { isObject, unescapeToken } from './pointer.js';
import type { JsonSchema } from './types.js';

export const DEFS_PREFIX = '#/$defs/';

/** Longer `$ref` → `$ref` chains than this are treated as unresolvable (they can only be loops). */
const MAX_HOPS = 32;

/** `$defs` name → its schema; undefined when there is none (or the caller will not look through it). */
export type DefLookup = (name: string) => unknown;

/** The `$defs` name a local reference points at, or undefined for any other kind of `$ref`. */
export function defName(ref: string): string | undefined {
  if (!ref.startsWith(DEFS_PREFIX)) return undefined;
  const token = ref.slice(DEFS_PREFIX.length);
  return token.includes('/') ? undefined : unescapeToken(token);
}

export function defRef(name: string): string {
  return `${DEFS_PREFIX}${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** Looks names up in a root schema's own `$defs`. */
export function defsOf(root: unknown): DefLookup {
  const defs = isObject(root) && isObject(root.$defs) ? root.$defs : {};
  return (name) => (Object.hasOwn(defs, name) ? defs[name] : undefined);
}

/**
 * The schema `node` stands for, following `#/$defs/…` references through `lookup`. A reference's
 * sibling keywords (the converter leaves only annotations there, such as a parameter's own
 * description) override the target's, nearest first, as they did when components were inlined.
 * Returns `node` itself when it is not a reference, and undefined when a reference cannot be
 * followed (unknown name, a name `lookup` declines, or a chain that loops).
 */
export function followLocalRefs(node: unknown, lookup: DefLookup): unknown {
  let current = node;
  const layers: Record<string, unknown>[] = [];
  for (let hops = 0; isObject(current) && typeof current.$ref === 'string'; hops++) {
    const name = defName(current.$ref);
    if (hops >= MAX_HOPS || name === undefined) return undefined;
    const { $ref: _ref, ...siblings } = current;
    if (Object.keys(siblings).length > 0) layers.push(siblings);
    current = lookup(name);
    if (current === undefined) return undefined;
  }
  if (layers.length === 0 || !isObject(current)) return current;
  return Object.assign({}, current, ...layers.reverse()) as Record<string, unknown>;
}

/** `followLocalRefs` against the `$defs` of the capability root schema that holds `node`. */
export function resolveLocalRef(root: unknown, node: unknown): unknown {
  return followLocalRefs(node, defsOf(root));
}

/** A top-level property of a capability root schema, with references followed. */
export function propertySchema(root: unknown, property: string): Record<string, unknown> | undefined {
  if (!isObject(root) || !isObject(root.properties) || !Object.hasOwn(root.properties, property))
    return undefined;
  const resolved = resolveLocalRef(root, root.properties[property]);
  return isObject(resolved) ? resolved : undefined;
}

/** `$defs` names referenced anywhere inside a schema (not following them). */
export function localRefNames(node: unknown): Set<string> {
  const out = new Set<string>();
  for (const part of schemaParts(node)) {
    if (isObject(part) && typeof part.$ref === 'string') {
      const name = defName(part.$ref);
      if (name !== undefined) out.add(name);
    }
  }
  return out;
}

/** Keywords whose values are instances, not schemas: what is inside them is data. */
const VALUE_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'dependentRequired', 'required']);
/** Keywords whose values map names (which may be anything, even "enum") to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas', '$defs']);

/** Every object and array a schema is built of, instance values excluded. */
export function* schemaParts(node: unknown): Generator<object> {
  if (Array.isArray(node)) {
    yield node;
    for (const item of node) yield* schemaParts(item);
  } else if (isObject(node)) {
    yield node;
    for (const [key, value] of Object.entries(node)) {
      if (VALUE_KEYWORDS.has(key)) continue;
      if (SCHEMA_MAPS.has(key) && isObject(value)) {
        yield value;
        for (const sub of Object.values(value)) yield* schemaParts(sub);
      } else {
        yield* schemaParts(value);
      }
    }
  }
}

/**
 * The `$defs` names reachable from `node` through `lookup`, following references inside what
 * they name (a name that `lookup` does not know is reached, but leads nowhere). `refsOf` reads a
 * node's own references; a caller that meets the same nodes often may pass a remembering one.
 */
export function reachableDefNames(
  node: unknown,
  lookup: DefLookup,
  refsOf: (node: unknown) => Iterable<string> = localRefNames,
): Set<string> {
  const queue = [...refsOf(node)];
  const seen = new Set(queue);
  for (let i = 0; i < queue.length; i++) {
    for (const next of refsOf(lookup(queue[i] as string))) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

/**
 * The root schema with only the `$defs` it still reaches, for a root whose properties were removed
 * (pinned arguments): a schema carries what it refers to and nothing else. The kept definitions
 * are the same (shared) objects.
 */
export function withReachableDefs(root: JsonSchema): JsonSchema {
  if (!isObject(root.$defs)) return root;
  const { $defs: defs, ...rest } = root;
  const seen = reachableDefNames(rest, defsOf(root));
  const kept = Object.keys(defs).filter((name) => seen.has(name));
  if (kept.length === 0) return rest;
  return { ...rest, $defs: Object.fromEntries(kept.map((name) => [name, defs[name]])) };
}
