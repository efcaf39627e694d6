/**
 * One OpenAPI operation → the parts of a capability: description, flattened input schema, output
 * schema and the binding execution needs.
 */
import { readServers, type DocumentView, type RawOperation } from './document.js';
import { isObject } from './pointer.js';
import { collectParameters, convertParameter, isCredentialOrOwned, type RawParameter } from './parameters.js';
import { deriveBody, readBody } from './request-body.js';
import { deriveOutput } from './responses.js';
import type { SchemaConverter, SchemaNode } from './schema-convert.js';
import type {
  JsonSchema,
  OperationBinding,
  ParameterBinding,
  ParameterLocation,
  SecurityRequirement,
  SecuritySchemeInfo,
  ServerTemplate,
} from './types.js';
import { putOwn } from '../util/own-keys.js';

const LOCATION_ORDER: readonly string[] = ['path', 'query', 'header', 'cookie'];

export interface ApiContext {
  readonly view: DocumentView;
  readonly converter: SchemaConverter;
  readonly apiId: string;
  readonly servers: readonly ServerTemplate[];
  readonly schemes: Readonly<Record<string, SecuritySchemeInfo>>;
  readonly warn: (message: string) => void;
}

export interface DerivedOperation {
  readonly description: string;
  readonly input?: JsonSchema;
  readonly argumentsSchema: JsonSchema;
  readonly output?: JsonSchema;
  readonly operation: OperationBinding;
}

export function deriveOperation(ctx: ApiContext, op: RawOperation): DerivedOperation {
  const { view, converter } = ctx;
  const properties: Record<string, SchemaNode> = {};
  const required: string[] = [];
  const parameters: ParameterBinding[] = [];

  const rawParams = withTemplateParameters(ctx, op, collectParameters(view, op));
  // A name used in two locations stays with the first in path, query, header, cookie order.
  const byLocation = [...rawParams].sort(
    (a, b) => LOCATION_ORDER.indexOf(a.in) - LOCATION_ORDER.indexOf(b.in),
  );
  for (const p of byLocation) {
    if (p.in === 'body' || p.in === 'formData') continue;
    const located = p as RawParameter & { in: ParameterLocation };
    if (isCredentialOrOwned(located, ctx.schemes)) continue;
    let argument = p.name;
    if (Object.hasOwn(properties, argument)) {
      argument = `${p.in}_${p.name}`;
      for (let n = 2; Object.hasOwn(properties, argument); n++) argument = `${p.in}_${p.name}_${n}`;
    }
    if (argument !== p.name) {
      ctx.warn(
        `${view.source}: ${p.pointer}: ${p.in} parameter "${p.name}" clashes with another argument; agents pass it as "${argument}"`,
      );
    }
    const derived = convertParameter(view, converter, located, argument);
    putOwn(properties, argument, derived.schema);
    parameters.push(derived.binding);
    if (derived.binding.required) required.push(argument);
  }

  const rawBody = readBody(view, op, rawParams);
  const body = rawBody ? deriveBody(rawBody, converter, new Set(Object.keys(properties))) : undefined;
  for (const [name, schema] of body?.properties ?? []) putOwn(properties, name, schema);
  for (const name of body?.required ?? []) if (!required.includes(name)) required.push(name);

  const argumentsSchema = converter.finish(
    {
      type: 'object',
      properties,
      ...(required.length ? { required } : {}),
      ...(body?.dependentRequired ? { dependentRequired: body.dependentRequired } : {}),
      additionalProperties: false,
    },
    'input',
  );
  const output = deriveOutput(view, op, converter);
  const operationId = typeof op.operation.operationId === 'string' ? op.operation.operationId : undefined;

  return {
    description: describe(op),
    ...(Object.keys(properties).length > 0 ? { input: argumentsSchema } : {}),
    argumentsSchema,
    ...(output.output ? { output: output.output } : {}),
    operation: {
      apiId: ctx.apiId,
      method: op.method,
      path: op.path,
      ...(operationId !== undefined ? { operationId } : {}),
      parameters,
      ...(body ? { body: body.binding } : {}),
      servers: readServers(op.operation.servers) ?? readServers(op.pathItem.servers) ?? ctx.servers,
      security: readSecurity(op.operation.security) ?? readSecurity(view.doc.security) ?? [],
      tags: Array.isArray(op.operation.tags)
        ? op.operation.tags.filter((t): t is string => typeof t === 'string')
        : [],
      deprecated: op.operation.deprecated === true,
      responseMediaTypes: output.mediaTypes,
      success: output.success,
      pointer: op.pointer,
    },
  };
}

/**
 * Every `{name}` of the path template must be an argument, or execution could not build the URL.
 * Sloppy documents omit some; they are added as required strings. Declared path parameters the
 * template lacks are dropped.
 */
function withTemplateParameters(ctx: ApiContext, op: RawOperation, params: RawParameter[]): RawParameter[] {
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string);
  const out = params.filter((p) => {
    if (p.in !== 'path' || names.includes(p.name)) return true;
    ctx.warn(
      `${ctx.view.source}: ${p.pointer}: path parameter "${p.name}" is not in the path template; ignored`,
    );
    return false;
  });
  for (const name of names) {
    if (out.some((p) => p.in === 'path' && p.name === name)) continue;
    ctx.warn(
      `${ctx.view.source}: ${op.pointer}: path parameter "${name}" is not declared; added as a required string`,
    );
    const raw =
      ctx.view.flavour === 'swagger-2.0'
        ? { name, in: 'path', required: true, type: 'string' }
        : { name, in: 'path', required: true, schema: { type: 'string' } };
    out.push({ raw, in: 'path', name, pointer: op.pointer });
  }
  return out;
}

function describe(op: RawOperation): string {
  const summary = typeof op.operation.summary === 'string' ? op.operation.summary.trim() : '';
  const description = typeof op.operation.description === 'string' ? op.operation.description.trim() : '';
  const text =
    summary && description && summary !== description
      ? `${summary}\n\n${description}`
      : summary || description || `Calls ${op.method.toUpperCase()} ${op.path}.`;
  return op.operation.deprecated === true ? `[deprecated] ${text}` : text;
}

function readSecurity(value: unknown): SecurityRequirement[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value
    .filter(isObject)
    .map((req) =>
      Object.fromEntries(
        Object.entries(req).map(([scheme, scopes]) => [
          scheme,
          Array.isArray(scopes) ? scopes.filter((s): s is string => typeof s === 'string') : [],
        ]),
      ),
    );
}
