/**
 * Which `$defs` of a capability root schema lie on a reference cycle. Before issue #14 the
 * converter inlined every component except those on a cycle, so these are exactly the
 * definitions that the old layout kept as `#/$defs/…` (schema-text.ts writes that layout).
 * Definitions are shared, frozen objects (schema-convert.ts), so the answer is kept per object.
 */
import { cyclicDefName } from '../../openapi/inlined-marks.js';
import { defsOf, localRefNames, type DefLookup } from '../../openapi/local-ref.js';
import { isObject } from '../../openapi/pointer.js';
import { stronglyConnected } from '../../openapi/ref-graph.js';

const onCycle = new WeakMap<object, boolean>();
const usesOf = new WeakMap<object, readonly string[]>();

/** `$defs` names referenced inside a definition (not following them). */
export function defUses(def: object): readonly string[] {
  let uses = usesOf.get(def);
  if (uses === undefined) {
    uses = [...localRefNames(def)];
    usesOf.set(def, uses);
  }
  return uses;
}

/** A root schema's `$defs` lookup, with every definition's place on a cycle worked out. */
export function rootDefs(root: unknown): DefLookup {
  const lookup = defsOf(root);
  const defs = isObject(root) && isObject(root.$defs) ? root.$defs : {};
  const names = Object.keys(defs);
  if (names.every((n) => !isObject(defs[n]) || onCycle.has(defs[n] as object))) return lookup;
  // A root's `$defs` hold everything it reaches, so every cycle through them is inside them.
  const edges = new Map<string, readonly string[]>();
  for (const name of names) {
    const def = defs[name];
    edges.set(name, isObject(def) ? defUses(def).filter((n) => Object.hasOwn(defs, n)) : []);
  }
  const cyclic = stronglyConnected(edges);
  for (const name of names) {
    const def = defs[name];
    if (isObject(def) && !onCycle.has(def)) onCycle.set(def, cyclic.has(name));
  }
  return lookup;
}

/**
 * True for a definition on a cycle: of the document, as the converter marked it, or of the root's
 * `$defs` (schemas not made by the converter). rootDefs() of a root holding it must have run.
 */
export function isOnCycle(def: unknown): boolean {
  return isObject(def) && (cyclicDefName(def) !== undefined || onCycle.get(def) === true);
}

/** The `$defs` name a definition on a cycle had in the inlined layout (names moved with #14). */
export function inlinedLayoutName(def: unknown, name: string): string {
  return cyclicDefName(def) ?? name;
}
