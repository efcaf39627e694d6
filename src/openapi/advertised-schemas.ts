/**
 * What agents are shown of a capability's input and output schemas: at most
 * ADVERTISED_SCHEMA_MAX_CHARS of JSON between them (issue #14's 256 KiB).
 *
 * Every component a schema reaches already sits once under its `$defs`, descriptions kept, and
 * most capabilities of real APIs fit. A few do not, because of what they reach, not how it is
 * written: Stripe's expandable fields link nearly every resource to every other (697 KiB for one
 * operation, 322 KiB even without descriptions), DocuSign's envelopes reach 139 components of up
 * to 21 KiB. There the components nearest the operation, in breadth-first order from the schema's
 * root, are kept whole while they fit; the rest are *summarized*: they keep their title,
 * description and type, and lose their fields. The schema stays self-contained (every `$ref`
 * still resolves, cycles stay cycles) and only says less deep down. Execution is unaffected: it
 * validates arguments against the full `argumentsSchema`, and the §2.12 version hashes the full
 * schemas, so nothing here can change what a call may do.
 */
import { localRefNames } from './local-ref.js';
import { isObject } from './pointer.js';
import type { Capability, JsonSchema } from './types.js';

/** Issue #14: no capability's input and output larger than 256 KiB, as JSON text. */
export const ADVERTISED_SCHEMA_MAX_CHARS = 256 * 1024;

/** What a summarized component says of itself, and the root's note of how many there are. */
export const SUMMARIZED = 'summarized: fields left out to keep this capability within 256 KiB';

export interface AdvertisedSchemas {
  readonly input?: JsonSchema;
  readonly output?: JsonSchema;
}

/**
 * The schemas to show for `capability`: the capability's own when they fit within `maxChars`
 * together (the same objects), else with their farthest components summarized. When one schema
 * is small, the other has the rest of the room; when both are large, each has half.
 */
export function advertisedSchemas(
  capability: Capability,
  maxChars = ADVERTISED_SCHEMA_MAX_CHARS,
): AdvertisedSchemas {
  const { input, output } = capability;
  const inputChars = input === undefined ? 0 : schemaChars(input);
  const outputChars = output === undefined ? 0 : schemaChars(output);
  if (inputChars + outputChars <= maxChars) return pick(input, output);
  const half = Math.floor(maxChars / 2);
  const [inputRoom, outputRoom] =
    inputChars <= half
      ? [inputChars, maxChars - inputChars]
      : outputChars <= half
        ? [maxChars - outputChars, outputChars]
        : [half, maxChars - half];
  return pick(
    input === undefined ? undefined : withinChars(input, inputChars, inputRoom),
    output === undefined ? undefined : withinChars(output, outputChars, outputRoom),
  );
}

function pick(input: JsonSchema | undefined, output: JsonSchema | undefined): AdvertisedSchemas {
  return { ...(input ? { input } : {}), ...(output ? { output } : {}) };
}

/**
 * `schema` within `room` characters: its `$defs` entries nearest the root kept whole, the others
 * summarized. When even every entry summarized does not fit (a root that is large by itself),
 * that is what it gets: the most this can do without dropping what the operation reaches.
 */
function withinChars(schema: JsonSchema, chars: number, room: number): JsonSchema {
  const { $defs: defs, ...root } = schema;
  if (chars <= room || !isObject(defs)) return schema;
  const names = Object.keys(defs);
  const stubs = new Map(names.map((name) => [name, summarized(defs[name])]));
  const entryChars = (name: string, value: unknown): number =>
    JSON.stringify(name).length + 1 + jsonChars(value);
  // The text with every entry summarized: the root, its note, then `"$defs":{…}` with commas.
  let used =
    JSON.stringify({ ...root, $comment: note(root, names.length, names.length) }).length +
    '"$defs":{}'.length +
    1 +
    Math.max(0, names.length - 1) +
    names.reduce((sum, name) => sum + entryChars(name, stubs.get(name)), 0);
  const whole = new Set<string>();
  for (const name of breadthFirst(root, defs)) {
    const more = entryChars(name, defs[name]) - entryChars(name, stubs.get(name));
    if (used + more > room) break;
    used += more;
    whole.add(name);
  }
  const summarizedCount = names.length - whole.size;
  return {
    ...root,
    $comment: note(root, summarizedCount, names.length),
    $defs: Object.fromEntries(names.map((name) => [name, whole.has(name) ? defs[name] : stubs.get(name)])),
  };
}

/** The root's `$comment`: its own, then how many components are summarized and why. */
function note(root: Record<string, unknown>, summarizedCount: number, total: number): string {
  const ours =
    `${summarizedCount} of the ${total} $defs entries are ${SUMMARIZED}; ` +
    'the proxy checks arguments against the full schema.';
  return typeof root.$comment === 'string' ? `${root.$comment} ${ours}` : ours;
}

/** `$defs` names in the order a reader meets them: those the root names, then theirs, and so on. */
function breadthFirst(root: unknown, defs: Record<string, unknown>): string[] {
  const order: string[] = [];
  const seen = new Set<string>();
  let frontier = refNames(root);
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const name of frontier) {
      if (seen.has(name) || !Object.hasOwn(defs, name)) continue;
      seen.add(name);
      order.push(name);
      next.push(...refNames(defs[name]));
    }
    frontier = next;
  }
  return order;
}

// Components are shared objects: capabilities that reach the same components share them, so what
// is learned of one (its length, its references, its summary) is kept for the next describe.
const charsOf = new WeakMap<object, number>();
const refsOf = new WeakMap<object, string[]>();
const summaryOf = new WeakMap<object, JsonSchema>();

/**
 * The length of `JSON.stringify(schema)`, summed from its root and its `$defs` entries so that
 * no string of a whole large schema is made (megabytes for Microsoft Graph's largest, which V8
 * would keep until a full collection).
 */
function schemaChars(schema: JsonSchema): number {
  const { $defs: defs, ...root } = schema;
  if (!isObject(defs)) return jsonChars(schema);
  const known = charsOf.get(schema);
  if (known !== undefined) return known;
  const names = Object.keys(defs);
  const rootChars = JSON.stringify(root).length;
  const entries = names.reduce(
    (sum, name) => sum + JSON.stringify(name).length + 1 + jsonChars(defs[name]),
    0,
  );
  // `{…root…,"$defs":{entries joined by commas}}`: a comma before `$defs` unless the root is empty.
  const chars =
    rootChars +
    (Object.keys(root).length > 0 ? 1 : 0) +
    '"$defs":{}'.length +
    entries +
    Math.max(0, names.length - 1);
  charsOf.set(schema, chars);
  return chars;
}

function jsonChars(value: unknown): number {
  if (!isObject(value)) return JSON.stringify(value ?? null).length;
  let chars = charsOf.get(value);
  if (chars === undefined) {
    chars = JSON.stringify(value).length;
    charsOf.set(value, chars);
  }
  return chars;
}

function refNames(node: unknown): string[] {
  if (!isObject(node)) return [];
  let names = refsOf.get(node);
  if (names === undefined) {
    names = [...localRefNames(node)];
    refsOf.set(node, names);
  }
  return names;
}

/** A component's title, description and type, marked as summarized. */
function summarized(def: unknown): JsonSchema {
  if (!isObject(def)) return { $comment: SUMMARIZED };
  let summary = summaryOf.get(def);
  if (summary === undefined) {
    const { title, description, type } = def;
    summary = {
      ...(typeof title === 'string' ? { title } : {}),
      ...(typeof description === 'string' ? { description } : {}),
      ...(typeof type === 'string' || Array.isArray(type) ? { type } : {}),
      $comment: SUMMARIZED,
    };
    summaryOf.set(def, summary);
  }
  return summary;
}
