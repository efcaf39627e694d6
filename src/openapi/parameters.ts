/**
 * Operation parameters → input properties and their wire bindings. Headers the proxy owns and
 * parameters that carry the API's own credentials are never inputs: agents must not set them.
 */
import { credentialKeys, nameKey } from './credential-names.js';
import { leftOutExamples, markFallbackExamples, markLeftOutExamples } from './inlined-marks.js';
import { isObject, toPointer } from './pointer.js';
import { deref, isLocation, type DocumentView, type RawOperation } from './document.js';
import type { SchemaConverter, SchemaNode } from './schema-convert.js';
import type { ParameterBinding, ParameterLocation, SecuritySchemeInfo } from './types.js';

/** Set by the proxy or the HTTP stack, never by an agent (RFC 9110 §7.6.1 hop-by-hop included). */
const OWNED_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'content-type',
  'content-length',
  'accept',
  'cookie',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // Method override headers: Rack::MethodOverride, Symfony/Laravel, Express method-override and
  // ASP.NET read them to route a POST as another method (a blocked DELETE, say).
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
]);

export interface RawParameter {
  readonly raw: Record<string, unknown>;
  readonly in: ParameterLocation | 'body' | 'formData';
  readonly name: string;
  readonly pointer: string;
}

export interface DerivedParameter {
  readonly binding: ParameterBinding;
  readonly schema: SchemaNode;
}

/** Path-level and operation-level parameters merged (operation wins on `in` + `name`), in order. */
export function collectParameters(view: DocumentView, op: RawOperation): RawParameter[] {
  const merged = new Map<string, RawParameter>();
  const add = (list: unknown, base: string): void => {
    if (!Array.isArray(list)) return;
    list.forEach((entry, i) => {
      const pointer = `${base}/parameters/${i}`;
      const raw = deref(view, entry, pointer);
      if (!isObject(raw) || typeof raw.name !== 'string') return;
      const location = raw.in;
      if (!isLocation(location) && location !== 'body' && location !== 'formData') return;
      const key = `${location}:${location === 'header' ? raw.name.toLowerCase() : raw.name}`;
      merged.set(key, { raw, in: location, name: raw.name, pointer });
    });
  };
  add(op.pathItem.parameters, toPointer(['paths', op.path]));
  add(op.operation.parameters, op.pointer);
  return [...merged.values()];
}

export function isCredentialOrOwned(
  p: { in: ParameterLocation; name: string },
  schemes: Readonly<Record<string, SecuritySchemeInfo>>,
): boolean {
  if (p.in === 'header' && OWNED_HEADERS.has(nameKey('header', p.name))) return true;
  // Any spelling a server may read as the credential's name (credential-names.ts).
  return credentialKeys(p.in, schemes).has(nameKey(p.in, p.name));
}

/** The schema of a parameter, in its document's dialect, before conversion. */
export function parameterSchema(
  view: DocumentView,
  p: RawParameter,
): { schema: unknown; contentType?: string } {
  if (view.flavour === 'swagger-2.0') return { schema: swaggerParameterSchema(p.raw) };
  if (p.raw.schema !== undefined) return { schema: p.raw.schema };
  if (isObject(p.raw.content)) {
    const [mediaType, media] = Object.entries(p.raw.content)[0] ?? [];
    if (mediaType !== undefined)
      return { schema: isObject(media) ? media.schema : undefined, contentType: mediaType };
  }
  return { schema: {} };
}

const SWAGGER_PARAM_KEYWORDS = [
  'type',
  'format',
  'items',
  'default',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'enum',
  'multipleOf',
  'x-nullable',
];

/** Swagger 2.0 non-body parameters carry their schema keywords inline. */
function swaggerParameterSchema(raw: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    SWAGGER_PARAM_KEYWORDS.filter((k) => raw[k] !== undefined).map((k) => [k, raw[k]]),
  );
}

const DEFAULT_STYLE: Record<ParameterLocation, string> = {
  path: 'simple',
  query: 'form',
  header: 'simple',
  cookie: 'form',
};

/** OpenAPI 3 `style`/`explode`, with Swagger 2.0 `collectionFormat` mapped onto them. */
export function serialization(
  view: DocumentView,
  p: RawParameter & { in: ParameterLocation },
): { style: string; explode: boolean } {
  if (view.flavour === 'swagger-2.0') {
    const format = typeof p.raw.collectionFormat === 'string' ? p.raw.collectionFormat : 'csv';
    switch (format) {
      case 'multi':
        return { style: 'form', explode: true };
      case 'ssv':
        return { style: 'spaceDelimited', explode: false };
      case 'pipes':
        return { style: 'pipeDelimited', explode: false };
      case 'tsv':
        return { style: 'tabDelimited', explode: false };
      default:
        return { style: DEFAULT_STYLE[p.in], explode: false };
    }
  }
  const style = typeof p.raw.style === 'string' ? p.raw.style : DEFAULT_STYLE[p.in];
  const explode = typeof p.raw.explode === 'boolean' ? p.raw.explode : style === 'form';
  return { style, explode };
}

/** Adds the parameter's own description/deprecation/example to its schema, as agents see it. */
export function annotate(
  schema: SchemaNode,
  raw: Record<string, unknown>,
  converter: SchemaConverter,
  where: string,
): SchemaNode {
  if (typeof schema === 'boolean') return schema;
  const out = { ...schema };
  if (typeof raw.description === 'string' && raw.description) out.description = raw.description;
  if (raw.deprecated === true) out.deprecated = true;
  if (raw.example !== undefined && out.examples === undefined && leftOutExamples(out) === undefined) {
    const kept = converter.examples([raw.example], `${where}/example`);
    if (kept) out.examples = kept;
    else markLeftOutExamples(out, [raw.example]);
    markFallbackExamples(out);
  }
  return out;
}

export function convertParameter(
  view: DocumentView,
  converter: SchemaConverter,
  p: RawParameter & { in: ParameterLocation },
  argument: string,
): DerivedParameter {
  const { schema, contentType } = parameterSchema(view, p);
  const converted = converter.convert(schema ?? {}, 'input', `${p.pointer}/schema`);
  const { style, explode } = serialization(view, p);
  const binding: ParameterBinding = {
    argument,
    in: p.in,
    name: p.name,
    // OpenAPI: path parameters are always required, whatever the document says.
    required: p.in === 'path' || p.raw.required === true,
    style,
    explode,
    allowReserved: p.raw.allowReserved === true,
    ...(contentType ? { contentType } : {}),
  };
  return { binding, schema: annotate(converted, p.raw, converter, p.pointer) };
}
