/**
 * Facts about converted schemas that their text no longer shows since components became
 * `$defs` references (issue #14), kept beside the (shared, frozen) objects rather than in them.
 * The §2.12 capability version rebuilds the text the converter wrote while it inlined components
 * (protocol/version/schema-text.ts) and needs them where the inlined text was not simply the
 * referenced component with the annotations beside the reference written over it.
 */

const cyclicDefs = new WeakMap<object, string>();
const nullableRefs = new WeakSet<object>();
const fallbackExamples = new WeakSet<object>();

/**
 * `def` is a `$defs` entry for a `$ref` on a cycle of the document: one the converter kept as a
 * reference, under `name`, when it inlined all others. (A direction may drop the property that
 * closed the cycle, so the capability's own `$defs` need not show it.)
 */
export function markCyclicDef(def: object, name: string): void {
  cyclicDefs.set(def, name);
}

/** The name a definition on a cycle had in the inlined layout; undefined off a cycle. */
export function cyclicDefName(def: unknown): string | undefined {
  return typeof def === 'object' && def !== null ? cyclicDefs.get(def) : undefined;
}

/**
 * `schema` is a reference that `nullable` wrapped as `{ anyOf: [schema, { type: 'null' }] }`:
 * inlined, `null` joined the component's own `type` (and `enum`) when it had a type to join.
 */
export function markNullableRef(schema: object): void {
  nullableRefs.add(schema);
}

export function isNullableRef(schema: unknown): boolean {
  return typeof schema === 'object' && schema !== null && nullableRefs.has(schema);
}

/**
 * The `examples` of `schema` are a parameter's example, added because the schema had none of its
 * own: inlined, a component's own `examples` were seen there and kept instead.
 */
export function markFallbackExamples(schema: object): void {
  fallbackExamples.add(schema);
}

export function hasFallbackExamples(schema: unknown): boolean {
  return typeof schema === 'object' && schema !== null && fallbackExamples.has(schema);
}

/**
 * The `examples` a converted schema left out for their size (schema-convert.ts,
 * MAX_EXAMPLES_CHARS). The version still covers them, as it covered them when they were written
 * out, so that bound changed no capability's version and suspended no grant. Kept as a
 * symbol-keyed property rather than in a map beside the object: spreads and rests copy it with
 * the schema as they copied `examples`, while JSON, Object.keys and the validator never see it.
 */
const LEFT_OUT_EXAMPLES = Symbol('left-out examples');

export function markLeftOutExamples(schema: object, examples: readonly unknown[]): void {
  (schema as Record<symbol, unknown>)[LEFT_OUT_EXAMPLES] = examples;
}

export function leftOutExamples(schema: unknown): readonly unknown[] | undefined {
  if (typeof schema !== 'object' || schema === null) return undefined;
  return (schema as Record<symbol, readonly unknown[] | undefined>)[LEFT_OUT_EXAMPLES];
}

/** Copies what `pick` by name would lose: the left-out examples of `from`, onto `to`. */
export function keepLeftOutExamples<T extends object>(from: object, to: T): T {
  const examples = leftOutExamples(from);
  if (examples !== undefined) markLeftOutExamples(to, examples);
  return to;
}
