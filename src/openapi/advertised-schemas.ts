/**
 * What agents are shown of a capability's input and output schemas: at most
 * ADVERTISED_SCHEMA_MAX_CHARS of JSON between them (issue #14's 256 KiB).
 *
 * Every component a schema reaches already sits once under its `$defs`, descriptions kept, and
 * most capabilities of real APIs fit. A few do not, because of what they reach, not how it is
 * written: Stripe's expandable fields link nearly every resource to every other (697 KiB for one
 * operation, 322 KiB even without descriptions), DocuSign's envelopes reach 139 components of up
 * to 21 KiB. There the components nearest the operation, in breadth-first order from the schema's
 * root, are kept whole while they fit; those they refer to beyond that are *summarized*: they
 * keep their title, description and type, and lose their fields (and so their references: what
 * only summarized components reach is left out). The schema stays self-contained (every `$ref`
 * still resolves, cycles stay cycles) and only says less deep down. Execution is unaffected: it
 * validates arguments against the full `argumentsSchema`, and the §2.12 version hashes the full
 * schemas, so nothing here can change what a call may do.
 */
import { defsOf, localRefNames, reachableDefNames } from './local-ref.js';
import { isObject } from './pointer.js';
import type { Capability, JsonSchema } from './types.js';

/** Issue #14: no capability's input and output larger than 256 KiB, as JSON text. */
export const ADVERTISED_SCHEMA_MAX_CHARS = 256 * 1024;

/** A summarized component's `$comment` (the root's `$comment` says what it means). */
export const SUMMARIZED = 'summarized';

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
 * `schema` within `room` characters. Breadth-first from the root, each component met is first
 * shown summarized, then whole while that fits; a summary refers to nothing, so what only
 * summarized components refer to is left out, and every `$ref` shown still resolves. When the
 * components the root names do not fit even summarized (a root large by itself), that is what it
 * gets: the most this can do without dropping what the operation names.
 */
function withinChars(schema: JsonSchema, chars: number, room: number): JsonSchema {
  const { $defs: defs, ...root } = schema;
  if (chars <= room || !isObject(defs)) return schema;
  const reached = reachableDefNames(root, defsOf(schema), refNames);
  const total = Object.keys(defs).filter((name) => reached.has(name)).length;
  const entryChars = (name: string, value: unknown): number =>
    JSON.stringify(name).length + 1 + jsonChars(value);
  // The root with its note (numbers at their widest), `"$defs":{}`, and a comma before it.
  let used = JSON.stringify({ ...root, $comment: note(root, total, total, total) }).length + 11;
  const shown = new Map<string, 'whole' | 'summary'>();
  const queue: string[] = [];
  const meet = (names: readonly string[]): number => {
    let more = 0;
    for (const name of names) {
      if (shown.has(name) || !Object.hasOwn(defs, name)) continue;
      shown.set(name, 'summary');
      queue.push(name);
      // The entry and the comma between entries (one too many for the first: an upper bound).
      more += entryChars(name, summarized(defs[name])) + 1;
    }
    return more;
  };
  used += meet(refNames(root));
  for (const name of queue) {
    const def = defs[name];
    const unmet = refNames(def).filter((n) => !shown.has(n) && Object.hasOwn(defs, n));
    const wider = entryChars(name, def) - entryChars(name, summarized(def));
    const newSummaries = unmet.reduce((sum, n) => sum + entryChars(n, summarized(defs[n])) + 1, 0);
    // Nearest first: once one does not fit, nothing farther is shown whole either.
    if (used + wider + newSummaries > room) break;
    shown.set(name, 'whole');
    used += wider + meet(unmet);
  }
  let whole = 0;
  const shownDefs: Record<string, unknown> = {};
  for (const name of Object.keys(defs)) {
    const how = shown.get(name);
    if (how === 'whole') whole++;
    if (how !== undefined) shownDefs[name] = how === 'whole' ? defs[name] : summarized(defs[name]);
  }
  return {
    ...root,
    $comment: note(root, whole, shown.size - whole, total),
    $defs: shownDefs,
  };
}

/** The root's `$comment`: its own, then what is shown of the components and why. */
function note(root: Record<string, unknown>, whole: number, summaries: number, total: number): string {
  const ours =
    `${whole} of the ${total} components this schema reaches are shown whole and ${summaries} ` +
    `summarized (title, description and type; "$comment": "${SUMMARIZED}"); the others, reached ` +
    'only through those, are left out, to keep this capability within 256 KiB. The proxy checks ' +
    'arguments against the full schema.';
  return typeof root.$comment === 'string' ? `${root.$comment} ${ours}` : ours;
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

/** The `$defs` names `node` refers to (remembered: do not change the array). */
function refNames(node: unknown): readonly string[] {
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
