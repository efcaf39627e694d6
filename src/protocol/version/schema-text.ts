/**
 * Writes a capability root schema as canonical JSON (util/canonical-json.ts) piece by piece into
 * a sink, in one of two forms that do not depend on how the converter lays components out:
 *
 * - `inlined`: the text the converter wrote before issue #14, byte for byte. Every reference to
 *   a definition off a cycle is replaced by that definition's content, with the annotations
 *   written beside the reference winning (as they did when components were inlined); references
 *   on a cycle stay `#/$defs/Name` and the root's `$defs` holds just those definitions.
 * - `merkle`: a reference to a definition off a cycle is written as the hash of that definition's
 *   own merkle text (its content with its references so replaced), so no text grows past the
 *   document's own size; cycles stay references by name, as in the inlined form.
 *
 * Nothing here materializes an inlined schema: a definition's text is written where it is used
 * and may be replayed from the sink's memory (sinks.ts).
 */
import { createHash } from 'node:crypto';
import {
  cyclicDefName,
  hasFallbackExamples,
  isNullableRef,
  leftOutExamples,
} from '../../openapi/inlined-marks.js';
import { DEFS_PREFIX, defName, type DefLookup } from '../../openapi/local-ref.js';
import { isObject } from '../../openapi/pointer.js';
import { canonicalJson } from '../../util/canonical-json.js';
import { inlinedLayoutName, isOnCycle, rootDefs } from './def-cycles.js';

export type SchemaForm = 'inlined' | 'merkle';

export interface TextSink {
  write(text: string): void;
  /** Writes a definition's text from memory; false when the sink does not have it. */
  replay(def: object): boolean;
  /** Brackets the text of one definition, so the sink may remember it. */
  begin(): void;
  end(def: object): void;
}

type Layer = Readonly<Record<string, unknown>>;

/** Keywords whose values are instances (data), written as they are. */
const VALUE_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'dependentRequired', 'required']);
/** Keywords whose values map names to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas', '$defs']);

const merkleHashes = new WeakMap<object, string>();

/** Writes a capability root schema (`argumentsSchema` or `output`) in the given form. */
export function writeRoot(root: Layer, form: SchemaForm, sink: TextSink): void {
  const lookup = rootDefs(root);
  const { $defs: defs, ...body } = root;
  // The inlined layout's `$defs`: the definitions on a cycle, under their names of that layout.
  const kept = isObject(defs)
    ? Object.keys(defs)
        .filter((n) => isOnCycle(defs[n]))
        .map((n): [string, Layer] => [inlinedLayoutName(defs[n], n), defs[n] as Layer])
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    : [];
  const writer = new SchemaWriter(lookup, form, sink);
  const extra =
    kept.length === 0
      ? undefined
      : (): void => {
          sink.write('{');
          kept.forEach(([name, def], i) => {
            sink.write(`${i > 0 ? ',' : ''}${JSON.stringify(name)}:`);
            writer.definition(def);
          });
          sink.write('}');
        };
  writer.root(body, extra);
}

class SchemaWriter {
  constructor(
    private readonly lookup: DefLookup,
    private readonly form: SchemaForm,
    private readonly sink: TextSink,
  ) {}

  /** The root: like any node, except that `$defs` is added and a boolean stays an object. */
  root(body: Layer, defs: (() => void) | undefined): void {
    const resolved = this.resolve(body);
    if (resolved === undefined) {
      this.object([body], defs);
      return;
    }
    const [target, layers] = resolved;
    // The old converter wrapped a boolean root as `{}` or `{"not":{}}` beside `$schema`.
    const base = isObject(target) ? target : target === false ? { not: {} } : {};
    this.object([base, ...layers], defs);
  }

  node(node: unknown): void {
    if (Array.isArray(node)) {
      this.sink.write('[');
      node.forEach((item, i) => {
        if (i > 0) this.sink.write(',');
        this.node(item);
      });
      this.sink.write(']');
      return;
    }
    if (!isObject(node)) {
      this.sink.write(JSON.stringify(node) ?? 'null');
      return;
    }
    const plain = this.form === 'inlined' ? this.plainReference(node) : undefined;
    if (isObject(plain)) {
      this.definition(plain);
      return;
    }
    const fallback = hasFallbackExamples(node);
    const resolved: [unknown, Layer[]] | undefined = plain === undefined ? this.resolve(node) : [plain, []];
    if (resolved === undefined) {
      this.object([node], undefined, fallback);
      return;
    }
    const [target, layers] = resolved;
    // A reference to a boolean schema was the boolean, annotations beside it dropped.
    if (isObject(target)) this.object([target, ...layers], undefined, fallback);
    else this.sink.write(JSON.stringify(target));
  }

  /** A kept reference, to its definition's name in the inlined layout. */
  private refText(ref: string): string {
    const name = defName(ref);
    const target = name === undefined ? undefined : this.lookup(name);
    const legacy = target === undefined ? undefined : cyclicDefName(target);
    return legacy === undefined ? ref : `${DEFS_PREFIX}${legacy}`;
  }

  /** The definition a bare reference (no siblings) stands for in the inlined form, if any. */
  private plainReference(node: Layer): unknown {
    if (typeof node.$ref !== 'string' || Object.keys(node).length !== 1 || leftOutExamples(node))
      return undefined;
    const name = defName(node.$ref);
    const target = name === undefined ? undefined : this.lookup(name);
    return target === undefined || isOnCycle(target) ? undefined : target;
  }

  /**
   * A reference the form replaces: the schema it stands for and the sibling layers over it, the
   * nearest last (it wins). Undefined for a node that is not such a reference.
   */
  resolve(node: Layer): [unknown, Layer[]] | undefined {
    const layers: Layer[] = [];
    let current: unknown = node;
    // Finite: a chain that loops is a cycle, and references on a cycle are not followed.
    while (isObject(current) && typeof current.$ref === 'string') {
      const name = defName(current.$ref);
      const target = name === undefined ? undefined : this.lookup(name);
      if (target === undefined || isOnCycle(target)) break;
      const { $ref: _ref, ...siblings } = current;
      if (Object.keys(siblings).length > 0 || leftOutExamples(siblings)) layers.push(siblings);
      if (this.form === 'merkle') {
        const hashed = { $ref: `sha256:${this.merkleHash(target)}` };
        return [hashed, layers.reverse()];
      }
      current = target;
    }
    return current === node ? undefined : [current, layers.reverse()];
  }

  /** A definition's text in this form, from the sink's memory when it has it. */
  definition(def: Layer): void {
    // Sinks remember inlined texts; a merkle text is short, and must never be taken for one.
    if (this.form !== 'inlined') {
      this.node(def);
      return;
    }
    if (this.sink.replay(def)) return;
    this.sink.begin();
    this.node(def);
    this.sink.end(def);
  }

  /** Keys of all layers in canonical order; a key's value comes from the last layer holding it. */
  private object(layered: readonly Layer[], defs: (() => void) | undefined, fallbackExamples = false): void {
    const given = layered.map(withLeftOutExamples);
    const composed = this.form === 'inlined' && (fallbackExamples || hasNullableRef(given));
    const layers = composed ? inlinedLayers(given, fallbackExamples, this) : given;
    const values = layers.length === 1 ? (layers[0] as Layer) : merge(layers);
    const keys = Object.keys(values).filter((k) => values[k] !== undefined);
    if (defs) keys.push('$defs');
    keys.sort();
    const sink = this.sink;
    sink.write('{');
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      sink.write(i > 0 ? `,${JSON.stringify(key)}:` : `${JSON.stringify(key)}:`);
      const value = values[key];
      if (key === '$defs' && defs) defs();
      else if (key === '$ref' && typeof value === 'string') sink.write(JSON.stringify(this.refText(value)));
      else if (VALUE_KEYWORDS.has(key)) sink.write(canonicalJson(value));
      else if (SCHEMA_MAPS.has(key) && isObject(value)) this.map(value);
      else this.node(value);
    }
    sink.write('}');
  }

  private map(value: Layer): void {
    const keys = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort();
    const sink = this.sink;
    sink.write('{');
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      sink.write(i > 0 ? `,${JSON.stringify(key)}:` : `${JSON.stringify(key)}:`);
      this.node(value[key]);
    }
    sink.write('}');
  }

  /** The merkle hash of a definition off a cycle: sha256 of its own merkle text. */
  private merkleHash(def: unknown): string {
    const key = isObject(def) ? def : undefined;
    const known = key && merkleHashes.get(key);
    if (known) return known;
    const hash = createHash('sha256');
    const writer = new SchemaWriter(
      this.lookup,
      'merkle',
      textSink((t) => hash.update(t)),
    );
    writer.node(def);
    const digest = hash.digest('base64url');
    if (key) merkleHashes.set(key, digest);
    return digest;
  }
}

/** The layer as it was written before examples over MAX_EXAMPLES_CHARS were left out. */
function withLeftOutExamples(layer: Layer): Layer {
  const examples = leftOutExamples(layer);
  return examples === undefined || layer.examples !== undefined ? layer : { ...layer, examples };
}

/** Each key's value from the last layer holding it (`$ref` only from the base layer). */
function merge(layers: readonly Layer[]): Layer {
  const values: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  layers.forEach((layer, i) => {
    // A sibling layer's own `$ref` was followed; only the base layer's stays.
    for (const key of Object.keys(layer)) if (key !== '$ref' || i === 0) values[key] = layer[key];
  });
  return values;
}

/** Whether the `anyOf` the layers end up with may be one `nullable` wrapped around a reference. */
function hasNullableRef(layers: readonly Layer[]): boolean {
  for (let i = layers.length - 1; i >= 0; i--) {
    const anyOf = (layers[i] as Layer).anyOf;
    if (anyOf !== undefined) return Array.isArray(anyOf) && isNullableRef(anyOf[0]);
  }
  return false;
}

/**
 * The layers as the inlining converter composed them, where that was not "the component, the
 * annotations beside the reference over it" (openapi/inlined-marks.ts):
 * - a parameter's example stood only where the inlined schema had no `examples` of its own;
 * - `nullable` beside a reference joined `null` to the component's own `type` and `enum` when it
 *   had a type, rather than wrapping it as `anyOf: [ref, {type: null}]`.
 */
function inlinedLayers(given: readonly Layer[], fallbackExamples: boolean, writer: SchemaWriter): Layer[] {
  let layers = [...given];
  const top = layers[layers.length - 1] as Layer;
  let bottom: Layer[] = [];
  if (fallbackExamples && top.examples !== undefined) {
    const { examples, ...rest } = top;
    bottom = [{ examples }];
    layers = [...layers.slice(0, -1), rest];
  }
  const anyOf = merge(layers).anyOf;
  const nullable = nullableReference(anyOf, writer);
  if (nullable) {
    layers = [...nullable, ...layers.map(({ anyOf: _anyOf, ...rest }) => rest)];
  }
  return [...bottom, ...layers];
}

/** The inlined layers of `[ref, {type: null}]` written for `nullable` beside a reference, if so. */
function nullableReference(anyOf: unknown, writer: SchemaWriter): Layer[] | undefined {
  if (!Array.isArray(anyOf) || anyOf.length !== 2) return undefined;
  const [ref, nullType] = anyOf as unknown[];
  if (!isNullableRef(ref) || !isObject(nullType) || Object.keys(nullType).length !== 1) return undefined;
  if (nullType.type !== 'null') return undefined;
  const resolved = writer.resolve(ref as Layer);
  if (resolved === undefined || !isObject(resolved[0])) return undefined;
  const layers = [resolved[0], ...resolved[1]];
  const merged = merge(layers);
  const type = merged.type;
  const patch: Record<string, unknown> = {};
  // As the converter's makeNullable did to the component it had inlined.
  if (typeof type === 'string') patch.type = type === 'null' ? 'null' : [type, 'null'];
  else if (Array.isArray(type)) patch.type = type.includes('null') ? type : [...(type as unknown[]), 'null'];
  else return undefined;
  const values = merged.enum;
  if (Array.isArray(values) && !values.includes(null)) patch.enum = [...(values as unknown[]), null];
  return [...layers, patch];
}

/** A sink that passes text on and remembers nothing. */
export function textSink(write: (text: string) => void): TextSink {
  return { write, replay: () => false, begin: () => undefined, end: () => undefined };
}
