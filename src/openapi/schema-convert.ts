/**
 * Converts OpenAPI schemas (Swagger 2.0, OpenAPI 3.0 and 3.1 dialects) into self-contained JSON
 * Schema 2020-12. Every `$ref` becomes a reference to the capability root's own `$defs`
 * (`#/$defs/Name`), where the component appears once (issue #14: catalogs of real APIs stay small);
 * cycles stay cycles. Unknown or malformed keywords are dropped (with a warning where they carried
 * meaning), so every result compiles with ajv's strict 2020 validator.
 *
 * A component is converted once per direction and the result is frozen and shared by every
 * capability that reaches it, so memory grows with the document, not with its operations.
 */
import {
  keepLeftOutExamples,
  leftOutExamples,
  markCyclicDef,
  markLeftOutExamples,
  markNullableRef,
} from './inlined-marks.js';
import { createHash } from 'node:crypto';
import { defRef, localRefNames, schemaParts, type DefLookup } from './local-ref.js';
import { isObject, resolvePointer } from './pointer.js';
import { analyzeRefs } from './ref-graph.js';
import type { JsonSchema, SpecFlavour } from './types.js';
import { putOwn } from '../util/own-keys.js';
import { linearRefusal } from '../util/linear-regexp.js';

export const JSON_SCHEMA_2020 = 'https://json-schema.org/draft/2020-12/schema';

/** `input` drops `readOnly` properties, `output` drops `writeOnly` ones. */
export type Direction = 'input' | 'output';

export type SchemaNode = JsonSchema | boolean;

/** One converted component: its schema and the `$defs` names it refers to directly. */
interface Definition {
  readonly schema: SchemaNode;
  readonly uses: readonly string[];
}

/**
 * The largest `examples` (as JSON) a capability schema carries. An example illustrates; the
 * description says what a field is. Some real documents give one schema a whole response as its
 * `example` (a travel API: 420 KiB; a blockchain API: 322 KiB), which alone put their capabilities
 * over issue 14's 256 KiB. Larger ones are left out of the capability, with a warning.
 */
export const MAX_EXAMPLES_CHARS = 8 * 1024;

const JSON_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
const ANNOTATIONS = ['title', 'description', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly'];

type Check = (v: unknown) => boolean;
const isNumber: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const isCount: Check = (v) => Number.isInteger(v) && (v as number) >= 0;
const isString: Check = (v) => typeof v === 'string';
const isBoolean: Check = (v) => typeof v === 'boolean';

/** Keywords copied as they are once their value has the right type. */
const PLAIN: Readonly<Record<string, Check>> = {
  title: isString,
  description: isString,
  $comment: isString,
  default: () => true,
  const: () => true,
  deprecated: isBoolean,
  readOnly: isBoolean,
  writeOnly: isBoolean,
  multipleOf: (v) => isNumber(v) && (v as number) > 0,
  maximum: isNumber,
  minimum: isNumber,
  maxLength: isCount,
  minLength: isCount,
  maxItems: isCount,
  minItems: isCount,
  maxContains: isCount,
  minContains: isCount,
  maxProperties: isCount,
  minProperties: isCount,
  uniqueItems: isBoolean,
  contentEncoding: isString,
  contentMediaType: isString,
};
const SUBSCHEMA = [
  'additionalProperties',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contentSchema',
];
const SUBSCHEMA_LIST = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_MAP = ['patternProperties', 'dependentSchemas'];

export class SchemaConverter {
  /** Every `format` seen, so the validator can register unknown ones as annotations. */
  readonly formats = new Set<string>();
  /** Every local `$ref` of the document. */
  readonly refs: ReadonlySet<string>;
  private readonly recursive: ReadonlySet<string>;
  /** Document `$ref` → `$defs` name, and back. */
  private readonly defNames = new Map<string, string>();
  private readonly refsByName = new Map<string, string>();
  private readonly definitions = new Map<string, Definition>();
  /** Names of the `$ref`s on a cycle as the converter gave them before issue #14. */
  private readonly legacyNames: ReadonlyMap<string, string>;
  private readonly warned = new Set<string>();
  /** `$defs` objects made so far, by a digest of their direction and names (see sharedDefs). */
  private readonly defsSets = new Map<string, Record<string, SchemaNode>[]>();
  /** `#/$defs/…` reference text by `$defs` name, made once per name. */
  private readonly refTexts = new Map<string, string>();

  constructor(
    private readonly doc: unknown,
    private readonly flavour: SpecFlavour,
    private readonly onWarning: (message: string) => void,
  ) {
    const graph = analyzeRefs(doc);
    this.refs = graph.refs;
    this.recursive = graph.recursive;
    this.legacyNames = legacyDefNames(graph.recursive);
    // Named over the whole document in pointer order, so a name never depends on the operation.
    for (const ref of [...graph.refs].sort()) this.nameRef(ref);
  }

  /** Converts one schema found at `where` (a JSON pointer, for messages). */
  convert(node: unknown, direction: Direction, where: string): SchemaNode {
    return this.node(node, direction, where);
  }

  /**
   * Wraps a converted schema as a capability's root schema: `$schema`, plus `$defs` holding every
   * definition it reaches, transitively, and nothing else.
   */
  finish(schema: SchemaNode, direction: Direction): JsonSchema {
    const root: JsonSchema = {
      $schema: JSON_SCHEMA_2020,
      ...(typeof schema === 'boolean' ? (schema ? {} : { not: {} }) : schema),
    };
    const queue = [...localRefNames(root)];
    const seen = new Set(queue);
    const out: Record<string, SchemaNode> = {};
    while (queue.length > 0) {
      const name = queue.shift() as string;
      const def = this.definition(name, direction);
      if (!def) continue;
      putOwn(out, name, def.schema);
      for (const next of def.uses) {
        if (!seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
      }
    }
    const names = Object.keys(out).sort();
    if (names.length > 0) root.$defs = this.sharedDefs(names, direction, out);
    return root;
  }

  /**
   * The `$defs` object of these names, one per set of names and direction: the same names always
   * hold the same definitions here, and capabilities of one resource often reach the same set
   * (Microsoft Graph beta's 20,678 `$defs` are 3,091 sets, 8 of its 117 MiB catalog). Sets are
   * found by a digest of their names, so that what is kept to find them stays small.
   */
  private sharedDefs(
    names: readonly string[],
    direction: Direction,
    defs: Readonly<Record<string, SchemaNode>>,
  ): Record<string, SchemaNode> {
    const key = createHash('sha256')
      .update(`${direction}\u0000${names.join('\u0000')}`)
      .digest('base64');
    const candidates = this.defsSets.get(key) ?? [];
    const known = candidates.find((set) => sameNames(Object.keys(set), names));
    if (known !== undefined) return known;
    const made = Object.freeze(Object.fromEntries(names.map((n) => [n, defs[n] as SchemaNode])));
    this.defsSets.set(key, [...candidates, made]);
    return made;
  }

  /**
   * Definitions as request-body flattening may look through them: those on a cycle are declined,
   * so a recursive body stays one wrapped argument as it always was (argument names are stable).
   */
  acyclicDefinitions(direction: Direction): DefLookup {
    return (name) => {
      const ref = this.refsByName.get(name);
      if (ref === undefined || this.recursive.has(ref)) return undefined;
      return this.definition(name, direction)?.schema;
    };
  }

  /** `values` as a capability schema's `examples`, or undefined (warned) past MAX_EXAMPLES_CHARS. */
  examples(values: readonly unknown[], where: string): unknown[] | undefined {
    let chars: number;
    try {
      chars = JSON.stringify(values).length;
    } catch {
      chars = Infinity; // a YAML alias cycle: no JSON at all
    }
    if (chars <= MAX_EXAMPLES_CHARS) return values as unknown[];
    this.warn(
      where,
      `left out an example of ${Number.isFinite(chars) ? `${Math.ceil(chars / 1024)} KiB` : 'no JSON form'}: capability schemas carry examples of up to ${MAX_EXAMPLES_CHARS / 1024} KiB`,
    );
    return undefined;
  }

  /** Resolves `$ref` chains of a raw schema to the object that carries its keywords. */
  resolveRaw(node: unknown): unknown {
    let current = node;
    for (let hops = 0; hops < 32 && isObject(current) && typeof current.$ref === 'string'; hops++) {
      current = resolvePointer(this.doc, current.$ref);
    }
    return current;
  }

  private refText(name: string): string {
    let text = this.refTexts.get(name);
    if (text === undefined) this.refTexts.set(name, (text = defRef(name)));
    return text;
  }

  /** Assigns the `$defs` name of a document `$ref`: its last token, suffixed on a collision. */
  private nameRef(ref: string): string {
    const known = this.defNames.get(ref);
    if (known !== undefined) return known;
    const base = baseDefName(ref);
    let name = base;
    for (let n = 2; this.refsByName.has(name); n++) name = `${base}_${n}`;
    this.defNames.set(ref, name);
    this.refsByName.set(name, ref);
    return name;
  }

  /** The converted component behind a `$defs` name, converted on first use per direction. */
  private definition(name: string, direction: Direction): Definition | undefined {
    const ref = this.refsByName.get(name);
    if (ref === undefined) return undefined;
    const key = `${direction}\u0000${ref}`;
    let def = this.definitions.get(key);
    if (!def) {
      const cycle = this.aliasCycle(ref);
      if (cycle) {
        // why: "any value" is English here (what {} accepts), not the TypeScript type.
        this.warn(ref, `$ref cycle with no schema in it (${cycle.join(' → ')}): treated as {} (any value)`);
      }
      const schema = freezeSchema(cycle ? {} : this.node(resolvePointer(this.doc, ref), direction, ref));
      const legacyName = this.legacyNames.get(ref);
      if (legacyName !== undefined && typeof schema === 'object') markCyclicDef(schema, legacyName);
      def = { schema, uses: [...localRefNames(schema)] };
      this.definitions.set(key, def);
    }
    return def;
  }

  /**
   * The `$ref`s from `ref` back to itself when each only points to the next (annotations aside):
   * `A: {$ref: B}, B: {$ref: A}` describes nothing, and a validator compiling it recurses for
   * ever. Undefined for a real cycle, which passes through a schema with keywords on the way.
   */
  private aliasCycle(ref: string): string[] | undefined {
    const chain = [ref];
    let raw = resolvePointer(this.doc, ref);
    while (isObject(raw) && typeof raw.$ref === 'string' && raw.$ref.startsWith('#')) {
      if (!Object.keys(raw).every((k) => k === '$ref' || ANNOTATIONS.includes(k) || k === 'nullable')) {
        return undefined;
      }
      const next = raw.$ref;
      if (chain.includes(next)) return [...chain.slice(chain.indexOf(next)), next];
      chain.push(next);
      raw = resolvePointer(this.doc, next);
    }
    return undefined;
  }

  private warn(where: string, message: string): void {
    const line = `${where}: ${message}`;
    if (this.warned.has(line)) return;
    this.warned.add(line);
    this.onWarning(line);
  }

  private node(raw: unknown, dir: Direction, where: string): SchemaNode {
    if (typeof raw === 'boolean') return raw;
    if (!isObject(raw)) {
      this.warn(where, 'schema is not an object; treated as {}');
      return {};
    }
    if (typeof raw.$ref === 'string') return this.ref(raw, raw.$ref, dir, where);
    return this.keywords(raw, dir, where);
  }

  private ref(raw: Record<string, unknown>, ref: string, dir: Direction, where: string): SchemaNode {
    // A `$ref` outside the document cannot be followed: bundling leaves none, so this is a warning.
    const base: SchemaNode = ref.startsWith('#')
      ? { $ref: this.refText(this.nameRef(ref)) }
      : this.node(undefined, dir, ref);
    const { $ref: _ref, nullable, 'x-nullable': xNullable, ...siblings } = raw;
    const extra = this.keywords(siblings, dir, where);
    let result: SchemaNode = base;
    const keys = Object.keys(extra);
    if ((keys.length > 0 || leftOutExamples(extra)) && typeof base !== 'boolean') {
      if (this.flavour === 'openapi-3.1' && !keys.every((k) => ANNOTATIONS.includes(k))) {
        // 3.1 schemas are JSON Schema: constraints beside `$ref` apply too.
        result = { allOf: [base, extra] };
      } else {
        // 2.0/3.0 ignore `$ref` siblings; their annotations still help the reader.
        result = keepLeftOutExamples(extra, { ...base, ...pick(extra, ANNOTATIONS) });
      }
    }
    if ((nullable === true || xNullable === true) && typeof result !== 'boolean') {
      if (typeof result.$ref === 'string') markNullableRef(result);
      result = makeNullable(result);
    }
    return result;
  }

  private keywords(raw: Record<string, unknown>, dir: Direction, where: string): JsonSchema {
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(raw)) {
      const check = Object.hasOwn(PLAIN, key) ? PLAIN[key] : undefined;
      if (check) {
        if (check(value)) out[key] = value;
        else this.warn(where, `dropped invalid "${key}"`);
      } else if (SUBSCHEMA.includes(key)) {
        out[key] = this.node(value, dir, `${where}/${key}`);
      } else if (SUBSCHEMA_LIST.includes(key)) {
        if (Array.isArray(value) && value.length > 0) {
          out[key] = value.map((v, i) => this.node(v, dir, `${where}/${key}/${i}`));
        }
      } else if (SUBSCHEMA_MAP.includes(key)) {
        if (isObject(value)) out[key] = this.map(value, dir, `${where}/${key}`, key === 'patternProperties');
      } else {
        this.special(key, value, raw, out, dir, where);
      }
    }
    this.normalizeBounds(raw, out);
    if (raw.nullable === true || raw['x-nullable'] === true) return makeNullable(out);
    return out;
  }

  private special(
    key: string,
    value: unknown,
    raw: Record<string, unknown>,
    out: JsonSchema,
    dir: Direction,
    where: string,
  ): void {
    switch (key) {
      case 'type':
        this.type(value, out, where);
        return;
      case 'properties':
        if (isObject(value)) this.properties(value, raw, out, dir, where);
        return;
      case 'required':
        // Handled with `properties`, which may drop readOnly/writeOnly members.
        if (!isObject(raw.properties) && Array.isArray(value)) out.required = uniqueStrings(value);
        return;
      case 'items':
        if (Array.isArray(value)) {
          // Draft-4 style tuple validation.
          out.prefixItems = value.map((v, i) => this.node(v, dir, `${where}/items/${i}`));
        } else {
          out.items = this.node(value, dir, `${where}/items`);
        }
        return;
      case 'enum':
        if (Array.isArray(value) && value.length > 0) out.enum = value;
        else this.warn(where, 'dropped empty or invalid "enum"');
        return;
      case 'pattern':
        if (typeof value === 'string' && validPattern(value)) {
          out.pattern = value;
          // Kept, so agents see the API's rule; the upstream applies it (util/linear-regexp.ts).
          const refusal = linearRefusal(value);
          if (refusal !== undefined)
            this.warn(
              where,
              `"pattern" ${JSON.stringify(value)} is not checked by the proxy: RE2, which matches in linear time, cannot run it (${refusal})`,
            );
        } else
          this.warn(
            where,
            `dropped "pattern" ${JSON.stringify(value)}: not a valid ECMAScript (unicode) regular expression`,
          );
        return;
      case 'format':
        this.format(value, out);
        return;
      case 'example':
      case 'examples': {
        // OpenAPI 3.0's single `example` counts only where there is no `examples` list.
        if (key === 'example' && Array.isArray(raw.examples)) return;
        const values = key === 'example' ? [value] : value;
        const kept = Array.isArray(values) ? this.examples(values, `${where}/${key}`) : undefined;
        if (kept) out.examples = kept;
        else if (Array.isArray(values)) markLeftOutExamples(out, values);
        return;
      }
      case 'dependentRequired':
        if (isObject(value)) out.dependentRequired = { ...(out.dependentRequired as object), ...value };
        return;
      case 'dependencies':
        // Draft 4–7's keyword, as Swagger 2.0 and OpenAPI 3.0 documents write it: lists of names
        // are 2020-12's dependentRequired, schemas its dependentSchemas (dropped before, so the
        // rule constrained nothing the validator saw).
        if (isObject(value)) this.dependencies(value, out, dir, where);
        return;
      default:
        // Dropped: OpenAPI-only keywords (nullable, discriminator, xml, externalDocs), vendor
        // extensions (x-*), and identifiers ($id, $anchor, $schema) that would change how the
        // capability's own `$ref`s resolve.
        return;
    }
  }

  private dependencies(value: Record<string, unknown>, out: JsonSchema, dir: Direction, where: string): void {
    const names = Object.entries(value).filter(([, v]) => Array.isArray(v));
    const schemas = Object.entries(value).filter(([, v]) => !Array.isArray(v));
    if (names.length > 0) {
      out.dependentRequired = { ...Object.fromEntries(names), ...(out.dependentRequired as object) };
    }
    if (schemas.length > 0) {
      const converted = this.map(Object.fromEntries(schemas), dir, `${where}/dependencies`, false);
      out.dependentSchemas = { ...converted, ...(out.dependentSchemas as object) };
    }
  }

  private type(value: unknown, out: JsonSchema, where: string): void {
    const list = Array.isArray(value) ? value : [value];
    const types: string[] = [];
    for (const t of list) {
      if (t === 'file') {
        // Swagger 2.0 file upload: agents send the bytes as base64.
        types.push('string');
        out.contentEncoding = 'base64';
      } else if (typeof t === 'string' && JSON_TYPES.has(t)) {
        types.push(t);
      } else {
        this.warn(where, `dropped unknown type ${JSON.stringify(t)}`);
      }
    }
    const unique = [...new Set(types)];
    if (unique.length === 1) out.type = unique[0];
    else if (unique.length > 1) out.type = unique;
  }

  private format(value: unknown, out: JsonSchema): void {
    if (typeof value !== 'string') return;
    if (value === 'binary') {
      // OpenAPI 3.0's raw bytes: carried as base64 in JSON arguments.
      out.contentEncoding = 'base64';
      return;
    }
    this.formats.add(value);
    out.format = value;
  }

  private properties(
    value: Record<string, unknown>,
    raw: Record<string, unknown>,
    out: JsonSchema,
    dir: Direction,
    where: string,
  ): void {
    const hidden = dir === 'input' ? 'readOnly' : 'writeOnly';
    const props: Record<string, SchemaNode> = {};
    for (const [name, sub] of Object.entries(value)) {
      if (this.hasFlag(sub, hidden)) continue;
      putOwn(props, name, this.node(sub, dir, `${where}/properties/${name}`));
    }
    out.properties = props;
    if (Array.isArray(raw.required)) {
      const required = uniqueStrings(raw.required).filter(
        (r) => Object.hasOwn(props, r) || !Object.hasOwn(value, r),
      );
      if (required.length > 0) out.required = required;
    }
  }

  private map(value: Record<string, unknown>, dir: Direction, where: string, patterns: boolean): JsonSchema {
    const out: JsonSchema = {};
    for (const [k, v] of Object.entries(value)) {
      if (patterns && !validPattern(k)) {
        this.warn(
          where,
          `dropped pattern property ${JSON.stringify(k)}: not a valid ECMAScript regular expression`,
        );
        continue;
      }
      // An unchecked pattern accepts every name, which would put every property under this one.
      const refusal = patterns ? linearRefusal(k) : undefined;
      if (refusal !== undefined) {
        this.warn(
          where,
          `dropped pattern property ${JSON.stringify(k)}: RE2, which matches in linear time, cannot run it (${refusal})`,
        );
        continue;
      }
      putOwn(out, k, this.node(v, dir, `${where}/${k}`));
    }
    return out;
  }

  /** True when the schema (following `$ref`s and their siblings) is marked readOnly/writeOnly. */
  private hasFlag(node: unknown, flag: 'readOnly' | 'writeOnly'): boolean {
    let current = node;
    for (let hops = 0; hops < 32 && isObject(current); hops++) {
      if (current[flag] === true) return true;
      if (typeof current.$ref !== 'string') return false;
      current = resolvePointer(this.doc, current.$ref);
    }
    return false;
  }

  /** Swagger 2.0 / OpenAPI 3.0 boolean exclusiveMinimum/Maximum → 2020-12 numeric form. */
  private normalizeBounds(raw: Record<string, unknown>, out: JsonSchema): void {
    if (raw.exclusiveMinimum === true && isNumber(out.minimum)) {
      out.exclusiveMinimum = out.minimum;
      delete out.minimum;
    } else if (isNumber(raw.exclusiveMinimum)) {
      out.exclusiveMinimum = raw.exclusiveMinimum;
    }
    if (raw.exclusiveMaximum === true && isNumber(out.maximum)) {
      out.exclusiveMaximum = out.maximum;
      delete out.maximum;
    } else if (isNumber(raw.exclusiveMaximum)) {
      out.exclusiveMaximum = raw.exclusiveMaximum;
    }
  }
}

/** Adds `null` to a schema's accepted values (OpenAPI 3.0 `nullable`, Swagger `x-nullable`). */
export function makeNullable(schema: JsonSchema): JsonSchema {
  const out: JsonSchema = { ...schema };
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...(out.enum as unknown[]), null];
  if (typeof out.type === 'string') {
    out.type = out.type === 'null' ? 'null' : [out.type, 'null'];
    return out;
  }
  if (Array.isArray(out.type)) {
    if (!out.type.includes('null')) out.type = [...(out.type as string[]), 'null'];
    return out;
  }
  return { anyOf: [schema, { type: 'null' }] };
}

/** A `$defs` name for a document `$ref` before collisions: its last token, made safe. */
function baseDefName(ref: string): string {
  const tokens = ref.split('/').map((t) => t.replace(/~1/g, '_').replace(/~0/g, '_'));
  const last = tokens[tokens.length - 1] ?? 'def';
  return (last.replace(/[^A-Za-z0-9_.-]/g, '_') || 'def').slice(0, 60);
}

/**
 * The names the converter gave before issue #14, when only the `$ref`s on a cycle were `$defs`
 * (so collisions were counted among those alone): the §2.12 version still writes them.
 */
function legacyDefNames(recursive: ReadonlySet<string>): Map<string, string> {
  const names = new Map<string, string>();
  const used = new Set<string>();
  for (const ref of [...recursive].sort()) {
    const base = baseDefName(ref);
    let name = base;
    for (let n = 2; used.has(name); n++) name = `${base}_${n}`;
    used.add(name);
    names.set(ref, name);
  }
  return names;
}

function validPattern(pattern: string): boolean {
  try {
    new RegExp(pattern, 'u');
    return true;
  } catch {
    return false;
  }
}

function uniqueStrings(values: readonly unknown[]): string[] {
  return [...new Set(values.filter((v): v is string => typeof v === 'string'))];
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((name, i) => name === b[i]);
}

function pick(obj: JsonSchema, keys: readonly string[]): JsonSchema {
  return Object.fromEntries(Object.entries(obj).filter(([k]) => keys.includes(k)));
}

/**
 * Freezes the schema objects a shared definition is made of, so no consumer can change it for the
 * other capabilities. Instance values (`enum`, `default`, …) belong to the document and are left be.
 */
function freezeSchema<T>(node: T): T {
  for (const part of schemaParts(node)) Object.freeze(part);
  return node;
}
