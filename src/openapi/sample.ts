/**
 * Synthesizes a minimal, deterministic instance of a JSON Schema (2020-12), so the mock upstream
 * can answer operations whose documents carry a schema but no example. Best effort: it never
 * throws, and aims to produce values that validate for the schemas the converter emits.
 */
import { isObject, resolvePointer } from './pointer.js';
import type { JsonSchema } from './types.js';

/** How many times one `$def` may be on the expansion stack before its samples shrink to a minimum. */
const DEF_EXPANSIONS = 3;
/** Past this, even minimal expansion stops: only schemas with no finite instance get this far. */
const HARD_DEF_EXPANSIONS = DEF_EXPANSIONS * 2;
/** Guards against cyclic object graphs handed in by mistake (recursion should go through `$ref`). */
const MAX_DEPTH = 64;
const MAX_OPTIONAL_PROPERTIES = 5;

const FORMAT_SAMPLES: Readonly<Record<string, string>> = {
  'date-time': '2026-01-01T00:00:00Z',
  date: '2026-01-01',
  time: '00:00:00Z',
  uuid: '00000000-0000-4000-8000-000000000000',
  email: 'user@example.com',
  'idn-email': 'user@example.com',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  'uri-reference': 'https://example.com/',
  iri: 'https://example.com/',
  'iri-reference': 'https://example.com/',
  hostname: 'example.com',
  'idn-hostname': 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
};

/** Keywords that say nothing about which values are valid. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  '$comment',
  '$schema',
  '$id',
  '$defs',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

interface Context {
  readonly root: JsonSchema;
  /** `$ref` → how many expansions of it enclose the current node. Shared along one walk. */
  readonly active: Map<string, number>;
  readonly depth: number;
  /**
   * Set once a `$def` has been expanded DEF_EXPANSIONS times: from there on, only what validity
   * demands is generated (required properties, minItems, null where allowed), so recursion ends.
   */
  readonly minimal: boolean;
}

export function sampleFromSchema(schema: JsonSchema): unknown {
  return sample(schema, { root: schema, active: new Map(), depth: 0, minimal: false });
}

function sample(node: unknown, ctx: Context): unknown {
  if (!isObject(node) || ctx.depth > MAX_DEPTH) return null;
  const inner: Context = { ...ctx, depth: ctx.depth + 1 };

  if (Object.hasOwn(node, 'const')) return node.const;
  const examples = nonEmptyArray(node.examples);
  if (examples) return examples[0];
  if (Object.hasOwn(node, 'default')) return node.default;
  const enumeration = nonEmptyArray(node.enum);
  if (enumeration) return enumeration[0];
  if (typeof node.$ref === 'string') return sampleRef(node.$ref, inner);
  const parts = nonEmptyArray(node.allOf);
  if (parts) return sampleAllOf(node, parts, inner);
  const alternatives = nonEmptyArray(node.anyOf) ?? nonEmptyArray(node.oneOf);
  if (alternatives) return sampleAlternatives(node, alternatives, inner);

  switch (typeOf(node)) {
    case 'object':
      return sampleObject(node, inner);
    case 'array':
      return sampleArray(node, inner);
    case 'string':
      return sampleString(node);
    case 'integer':
      return sampleNumber(node, true);
    case 'number':
      return sampleNumber(node, false);
    case 'boolean':
      return false;
    default:
      return null;
  }
}

function sampleRef(ref: string, ctx: Context): unknown {
  const target = resolvePointer(ctx.root, ref);
  if (!isObject(target)) return null;
  const count = (ctx.active.get(ref) ?? 0) + 1;
  if (count > HARD_DEF_EXPANSIONS) return allowsNull(target, ctx.root) ? null : emptyOf(target);
  const minimal = ctx.minimal || count > DEF_EXPANSIONS;
  if (minimal && allowsNull(target, ctx.root)) return null;
  ctx.active.set(ref, count);
  try {
    return sample(target, { ...ctx, minimal });
  } finally {
    ctx.active.set(ref, count - 1);
  }
}

/** Object parts are merged (each contributes its properties); otherwise the first part wins. */
function sampleAllOf(node: JsonSchema, parts: readonly unknown[], ctx: Context): unknown {
  const samples = parts.map((part) => sample(part, ctx));
  const rest = without(node, 'allOf');
  if (constrains(rest)) samples.unshift(sample(rest, ctx));
  if (samples.every(isObject)) return samples.reduce<Record<string, unknown>>(deepMerge, {});
  return samples[0] ?? null;
}

/**
 * The first alternative that is not just `null` — unless expansion has gone minimal and `null` is
 * an option, which is what lets `anyOf: [{$ref: Self}, {type: null}]` recursion stop.
 */
function sampleAlternatives(node: JsonSchema, alternatives: readonly unknown[], ctx: Context): unknown {
  const nullable = alternatives.some(isNullOnly);
  if (ctx.minimal && nullable) return null;
  const chosen = alternatives.find((alt) => !isNullOnly(alt) && !(nullable && isExhaustedRef(alt, ctx)));
  if (chosen === undefined) return null;
  const rest = without(without(node, 'anyOf'), 'oneOf');
  // Siblings such as `properties` next to `oneOf: [{required: [...]}]` constrain the same value, so
  // they are folded into the alternative rather than sampled apart.
  if (!constrains(rest) || !isObject(chosen) || typeof chosen.$ref === 'string') return sample(chosen, ctx);
  return sample(mergeSchemas(rest, chosen), ctx);
}

function sampleObject(node: JsonSchema, ctx: Context): Record<string, unknown> {
  const properties = isObject(node.properties) ? node.properties : {};
  const required = asArray(node.required).filter((r): r is string => typeof r === 'string');
  const maxProperties = count(node.maxProperties) ?? Infinity;
  const result: Record<string, unknown> = {};
  for (const name of required) {
    const schema = Object.hasOwn(properties, name) ? properties[name] : node.additionalProperties;
    result[name] = sample(schema, ctx);
  }
  if (ctx.minimal) return result;
  let optional = 0;
  for (const [name, schema] of Object.entries(properties)) {
    if (optional >= MAX_OPTIONAL_PROPERTIES || Object.keys(result).length >= maxProperties) break;
    if (Object.hasOwn(result, name) || schema === false || isExhaustedRef(schema, ctx)) continue;
    result[name] = sample(schema, ctx);
    optional += 1;
  }
  return result;
}

function sampleArray(node: JsonSchema, ctx: Context): unknown[] {
  const prefix = asArray(node.prefixItems);
  const minItems = count(node.minItems) ?? 0;
  const maxItems = count(node.maxItems) ?? Infinity;
  const result = prefix.slice(0, maxItems).map((item) => sample(item, ctx));
  const items = node.items;
  if (items === false) return result;
  // One item shows the shape; more only when minItems demands them.
  const wanted = Math.min(
    maxItems,
    Math.max(minItems, ctx.minimal || isExhaustedRef(items, ctx) ? 0 : Math.max(result.length, 1)),
  );
  if (result.length >= wanted) return result;
  const item = sample(items, ctx);
  while (result.length < wanted) result.push(item);
  return result;
}

function sampleString(node: JsonSchema): string {
  const minLength = count(node.minLength) ?? 0;
  const maxLength = count(node.maxLength) ?? Infinity;
  if (typeof node.contentEncoding === 'string' && node.contentEncoding.toLowerCase() === 'base64') {
    // Whole base64 quanta, so the padded string still decodes.
    return 'A'.repeat(Math.ceil(minLength / 4) * 4);
  }
  const base = (typeof node.format === 'string' ? FORMAT_SAMPLES[node.format] : undefined) ?? 'string';
  return base.padEnd(minLength, 'x').slice(0, Math.max(minLength, maxLength));
}

function sampleNumber(node: JsonSchema, integer: boolean): number {
  const minimum = finite(node.minimum);
  const exclusiveMinimum = finite(node.exclusiveMinimum);
  const maximum = finite(node.maximum);
  const exclusiveMaximum = finite(node.exclusiveMaximum);
  const low = Math.max(minimum ?? -Infinity, exclusiveMinimum ?? -Infinity);
  const high = Math.min(maximum ?? Infinity, exclusiveMaximum ?? Infinity);
  const valid = (n: number): boolean =>
    (minimum === undefined || n >= minimum) &&
    (exclusiveMinimum === undefined || n > exclusiveMinimum) &&
    (maximum === undefined || n <= maximum) &&
    (exclusiveMaximum === undefined || n < exclusiveMaximum);
  const ceil = (n: number): number => (integer ? Math.ceil(n) : n);
  const floor = (n: number): number => (integer ? Math.floor(n) : n);
  const candidates = [
    minimum !== undefined ? ceil(minimum) : undefined,
    exclusiveMinimum !== undefined
      ? integer
        ? Math.floor(exclusiveMinimum) + 1
        : exclusiveMinimum + 1
      : undefined,
    0,
    maximum !== undefined ? floor(maximum) : undefined,
    exclusiveMaximum !== undefined
      ? integer
        ? Math.ceil(exclusiveMaximum) - 1
        : exclusiveMaximum - 1
      : undefined,
  ];
  // Lower bounds first, as documented; the midpoint catches ranges narrower than the ±1 steps.
  const lowerFirst =
    minimum !== undefined || exclusiveMinimum !== undefined ? candidates : candidates.slice(2);
  let value =
    lowerFirst.find((n): n is number => n !== undefined && valid(n)) ??
    (Number.isFinite(low) && Number.isFinite(high) ? ceil((low + high) / 2) : 0);
  const multipleOf = finite(node.multipleOf);
  if (multipleOf !== undefined && multipleOf > 0) value = Math.ceil(value / multipleOf) * multipleOf;
  return value;
}

/** The declared type (first non-null one), or the one its keywords imply. */
function typeOf(node: JsonSchema): string | undefined {
  const declared = typeof node.type === 'string' ? [node.type] : asArray(node.type);
  const types = declared.filter((t): t is string => typeof t === 'string');
  if (types.length > 0) return types.find((t) => t !== 'null') ?? 'null';
  const has = (...keys: string[]): boolean => keys.some((k) => Object.hasOwn(node, k));
  if (has('properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties'))
    return 'object';
  if (has('items', 'prefixItems', 'minItems', 'maxItems')) return 'array';
  if (has('format', 'minLength', 'maxLength', 'pattern', 'contentEncoding')) return 'string';
  if (has('minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf')) return 'number';
  return undefined;
}

/** Whether `null` is valid, looking through `$ref`s and `anyOf`/`oneOf` a few levels deep. */
function allowsNull(node: unknown, root: JsonSchema, depth = 0): boolean {
  if (!isObject(node) || depth > 8) return false;
  if (typeof node.$ref === 'string') return allowsNull(resolvePointer(root, node.$ref), root, depth + 1);
  if (Object.hasOwn(node, 'const')) return node.const === null;
  if (Array.isArray(node.enum)) return asArray(node.enum).includes(null);
  if (node.type === 'null' || asArray(node.type).includes('null')) return true;
  const alternatives = nonEmptyArray(node.anyOf) ?? nonEmptyArray(node.oneOf);
  return alternatives !== undefined && alternatives.some((alt) => allowsNull(alt, root, depth + 1));
}

function isNullOnly(node: unknown): boolean {
  if (!isObject(node)) return false;
  if (Object.hasOwn(node, 'const')) return node.const === null;
  if (node.type === 'null') return true;
  const types = asArray(node.type);
  return types.length > 0 && types.every((t) => t === 'null');
}

/** A `$ref` whose def is already expanded to the limit: worth skipping where it is optional. */
function isExhaustedRef(node: unknown, ctx: Context): boolean {
  return (
    isObject(node) && typeof node.$ref === 'string' && (ctx.active.get(node.$ref) ?? 0) >= DEF_EXPANSIONS
  );
}

function emptyOf(node: JsonSchema): unknown {
  switch (typeOf(node)) {
    case 'object':
      return {};
    case 'array':
      return [];
    case 'string':
      return sampleString(node);
    case 'integer':
      return sampleNumber(node, true);
    case 'number':
      return sampleNumber(node, false);
    case 'boolean':
      return false;
    default:
      return null;
  }
}

/** True when the schema has a keyword beyond annotations, i.e. it restricts the value. */
function constrains(node: JsonSchema): boolean {
  return Object.keys(node).some((k) => !ANNOTATIONS.has(k));
}

/** Shallow schema merge, except that `properties` and `required` accumulate. */
function mergeSchemas(base: JsonSchema, extra: JsonSchema): JsonSchema {
  const merged: JsonSchema = { ...base, ...extra };
  if (isObject(base.properties) || isObject(extra.properties)) {
    merged.properties = {
      ...(isObject(base.properties) ? base.properties : {}),
      ...(isObject(extra.properties) ? extra.properties : {}),
    };
  }
  if (Array.isArray(base.required) || Array.isArray(extra.required)) {
    merged.required = [...new Set([...asArray(base.required), ...asArray(extra.required)])];
  }
  return merged;
}

function deepMerge(
  target: Record<string, unknown>,
  source: Record<string, unknown>,
): Record<string, unknown> {
  const result: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(source)) {
    const existing = result[key];
    result[key] = isObject(existing) && isObject(value) ? deepMerge(existing, value) : value;
  }
  return result;
}

function without(node: JsonSchema, key: string): JsonSchema {
  return Object.fromEntries(Object.entries(node).filter(([k]) => k !== key));
}

function asArray(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

function nonEmptyArray(value: unknown): readonly unknown[] | undefined {
  const array = asArray(value);
  return array.length > 0 ? array : undefined;
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}
