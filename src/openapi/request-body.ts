/**
 * Request body → input properties. An object body is flattened into the top-level input unless a
 * field name collides with a parameter; anything else goes under one `body` argument.
 */
import { followLocalRefs, type DefLookup } from './local-ref.js';
import { isObject, stringList } from './pointer.js';
import { deref, type DocumentView, type RawOperation } from './document.js';
import { essence, isJsonLike, isTextual, sortByPreference } from './media.js';
import { serialization, type RawParameter } from './parameters.js';
import type { SchemaConverter, SchemaNode } from './schema-convert.js';
import type { BodyBinding, JsonSchema } from './types.js';
import { putOwn } from '../util/own-keys.js';

export interface RawBody {
  readonly mediaTypes: string[];
  readonly required: boolean;
  /** Raw schema per media type, in the document's dialect. */
  readonly schemas: ReadonlyMap<string, unknown>;
  readonly encodings: ReadonlyMap<string, unknown>;
  readonly pointer: string;
}

export function readBody(
  view: DocumentView,
  op: RawOperation,
  params: readonly RawParameter[],
): RawBody | undefined {
  return view.flavour === 'swagger-2.0' ? readSwaggerBody(view, op, params) : readOpenApiBody(view, op);
}

function readOpenApiBody(view: DocumentView, op: RawOperation): RawBody | undefined {
  if (op.operation.requestBody === undefined) return undefined;
  const pointer = `${op.pointer}/requestBody`;
  const body = deref(view, op.operation.requestBody, pointer);
  if (!isObject(body) || !isObject(body.content)) return undefined;
  const schemas = new Map<string, unknown>();
  const encodings = new Map<string, unknown>();
  for (const [mediaType, media] of Object.entries(body.content)) {
    schemas.set(mediaType, isObject(media) ? media.schema : undefined);
    if (isObject(media) && isObject(media.encoding)) encodings.set(mediaType, media.encoding);
  }
  if (schemas.size === 0) return undefined;
  return { mediaTypes: [...schemas.keys()], required: body.required === true, schemas, encodings, pointer };
}

function readSwaggerBody(
  view: DocumentView,
  op: RawOperation,
  params: readonly RawParameter[],
): RawBody | undefined {
  const consumes = stringList(op.operation.consumes) ?? stringList(view.doc.consumes);
  const bodyParam = params.find((p) => p.in === 'body');
  if (bodyParam) {
    const mediaTypes = consumes?.length ? consumes : ['application/json'];
    const schemas = new Map(mediaTypes.map((m) => [m, bodyParam.raw.schema]));
    return {
      mediaTypes,
      required: bodyParam.raw.required === true,
      schemas,
      encodings: new Map(),
      pointer: bodyParam.pointer,
    };
  }
  const form = params.filter((p) => p.in === 'formData');
  if (form.length === 0) return undefined;
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const p of form) {
    const { in: _in, name: _name, required: req, description, ...schema } = p.raw;
    putOwn(properties, p.name, typeof description === 'string' ? { ...schema, description } : schema);
    if (req === true) required.push(p.name);
  }
  const hasFile = form.some((p) => p.raw.type === 'file');
  const declared = consumes?.filter((m) => {
    const e = essence(m);
    return e === 'multipart/form-data' || e === 'application/x-www-form-urlencoded';
  });
  const mediaTypes = declared?.length
    ? declared
    : [hasFile ? 'multipart/form-data' : 'application/x-www-form-urlencoded'];
  const schema = { type: 'object', properties, ...(required.length ? { required } : {}) };
  // An array field goes out as its `collectionFormat` says (csv by default: `ids=a,b`), as a
  // query parameter would; only `multi` repeats the name. Multipart parts stay one per value.
  const arrays = Object.fromEntries(
    form
      .filter((p) => p.raw.type === 'array')
      .map((p) => [p.name, serialization(view, { ...p, in: 'query' })]),
  );
  return {
    mediaTypes,
    required: required.length > 0,
    schemas: new Map(mediaTypes.map((m) => [m, schema])),
    encodings: new Map(
      mediaTypes.filter((m) => essence(m) === 'application/x-www-form-urlencoded').map((m) => [m, arrays]),
    ),
    pointer: form[0]?.pointer ?? op.pointer,
  };
}

export interface DerivedBody {
  readonly binding: BodyBinding;
  /** Input properties contributed by the body, in order. */
  readonly properties: ReadonlyArray<readonly [string, SchemaNode]>;
  readonly required: readonly string[];
  /**
   * A flattened body's `dependentRequired` (and Swagger/3.0 `dependencies` of names): its field
   * names are argument names, so it holds on the input schema as it is.
   */
  readonly dependentRequired?: Readonly<Record<string, readonly string[]>>;
}

export function deriveBody(
  raw: RawBody,
  converter: SchemaConverter,
  takenArguments: ReadonlySet<string>,
): DerivedBody {
  const mediaTypes = sortByPreference(raw.mediaTypes);
  const mediaType = mediaTypes[0] as string;
  const rawSchema = raw.schemas.get(mediaType);
  const schema = converter.convert(rawSchema ?? defaultBodySchema(mediaType), 'input', raw.pointer);
  // Components are `$defs` references now; the body is flattened exactly when it was while they
  // were inlined, which is when no cycle stands in the way (argument names are a stable contract).
  const defs = converter.acyclicDefinitions('input');
  const target = followLocalRefs(schema, defs);
  const encoding = readEncoding(raw.encodings.get(mediaType));
  const base = { mediaTypes, mediaType, required: raw.required, encoding };

  if (isFlattenable(target) && !Object.keys(target.properties).some((f) => takenArguments.has(f))) {
    const properties = Object.entries(target.properties);
    const fields = properties.map(([name]) => name);
    const required = Array.isArray(target.required) ? (target.required as string[]) : [];
    const fieldCount = countOf(target);
    const dependentRequired = dependentNames(target);
    return {
      binding: {
        ...base,
        mode: 'flattened',
        fields,
        binaryFields: fields.filter((f) => isBinary(target.properties[f], defs)),
        ...(fieldCount ? { fieldCount } : {}),
      },
      properties,
      required,
      ...(dependentRequired ? { dependentRequired } : {}),
    };
  }

  const argument = ['body', 'request_body', 'body_'].find((a) => !takenArguments.has(a)) ?? 'request_body_';
  const binaryFields = isBinary(schema, defs) ? [argument] : [];
  return {
    binding: { ...base, mode: 'wrapped', argument, fields: [argument], binaryFields },
    properties: [[argument, schema]],
    required: raw.required ? [argument] : [],
  };
}

/** A body the document gives no schema for: JSON accepts anything, text is a string, the rest bytes. */
function defaultBodySchema(mediaType: string): unknown {
  if (isJsonLike(mediaType)) return {};
  if (isTextual(mediaType)) return { type: 'string' };
  return { type: 'string', format: 'binary' };
}

type FlatObject = JsonSchema & { properties: Record<string, SchemaNode> };

/**
 * Only a plain object schema is flattened: no composition, no open-ended extra keys, not
 * nullable, and nothing about the object as a whole that its fields, spread among the parameters,
 * could no longer be held to (`propertyNames`, `const`, `enum`, `dependentSchemas`).
 * `minProperties`/`maxProperties` and `dependentRequired` are kept (countOf, dependentNames).
 */
function isFlattenable(schema: unknown): schema is FlatObject {
  if (!isObject(schema) || !isObject(schema.properties)) return false;
  if (schema.type !== undefined && schema.type !== 'object') return false;
  const blocking = [
    '$ref',
    'allOf',
    'anyOf',
    'oneOf',
    'not',
    'if',
    'patternProperties',
    'unevaluatedProperties',
    'dependentSchemas',
    'propertyNames',
    'const',
    'enum',
  ];
  if (blocking.some((k) => schema[k] !== undefined)) return false;
  return schema.additionalProperties === undefined || schema.additionalProperties === false;
}

/** A flattened body's bounds on how many of its fields are sent. */
function countOf(schema: FlatObject): BodyBinding['fieldCount'] | undefined {
  const min = typeof schema.minProperties === 'number' ? schema.minProperties : undefined;
  const max = typeof schema.maxProperties === 'number' ? schema.maxProperties : undefined;
  if (min === undefined && max === undefined) return undefined;
  return { ...(min !== undefined ? { min } : {}), ...(max !== undefined ? { max } : {}) };
}

/** `dependentRequired` (the converter has folded Swagger/3.0 `dependencies` of names into it). */
function dependentNames(schema: FlatObject): Record<string, string[]> | undefined {
  if (!isObject(schema.dependentRequired)) return undefined;
  const out: Record<string, string[]> = {};
  for (const [field, names] of Object.entries(schema.dependentRequired)) {
    if (Array.isArray(names)) out[field] = names.filter((n): n is string => typeof n === 'string');
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function isBinary(node: SchemaNode | undefined, defs: DefLookup): boolean {
  const schema = followLocalRefs(node, defs);
  if (!isObject(schema)) return false;
  if (schema.contentEncoding === 'base64') return true;
  const items = followLocalRefs(schema.items, defs);
  return isObject(items) && items.contentEncoding === 'base64';
}

function readEncoding(value: unknown): BodyBinding['encoding'] {
  if (!isObject(value)) return {};
  const out: Record<string, { contentType?: string; style?: string; explode?: boolean }> = {};
  for (const [field, enc] of Object.entries(value)) {
    if (!isObject(enc)) continue;
    putOwn(out, field, {
      ...(typeof enc.contentType === 'string' ? { contentType: enc.contentType } : {}),
      ...(typeof enc.style === 'string' ? { style: enc.style } : {}),
      ...(typeof enc.explode === 'boolean' ? { explode: enc.explode } : {}),
    });
  }
  return out;
}
