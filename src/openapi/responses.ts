/**
 * Success responses → the capability's output schema and the operation's success description.
 * Output covers the 2xx responses with a JSON-like body; several different schemas become `anyOf`.
 */
import { isObject, stringList } from './pointer.js';
import { deref, type DocumentView, type RawOperation } from './document.js';
import { isJsonLike } from './media.js';
import type { SchemaConverter, SchemaNode } from './schema-convert.js';
import type { JsonSchema, SuccessResponse } from './types.js';

interface RawResponse {
  readonly status: number;
  /** media type → raw schema (undefined when the media type declares none) */
  readonly content: ReadonlyMap<string, unknown>;
  readonly examples: ReadonlyMap<string, unknown>;
  readonly pointer: string;
}

export interface DerivedOutput {
  readonly output?: JsonSchema;
  readonly success: SuccessResponse;
  readonly mediaTypes: readonly string[];
}

export function deriveOutput(
  view: DocumentView,
  op: RawOperation,
  converter: SchemaConverter,
): DerivedOutput {
  const responses = successResponses(view, op);
  const schemas: SchemaNode[] = [];
  const seen = new Set<string>();
  for (const response of responses) {
    for (const [mediaType, raw] of response.content) {
      if (raw === undefined || !isJsonLike(mediaType)) continue;
      const converted = converter.convert(raw, 'output', response.pointer);
      // Cheap now that components are references: only the response's own keywords are written.
      const key = JSON.stringify(converted);
      if (seen.has(key)) continue;
      seen.add(key);
      schemas.push(converted);
    }
  }
  const combined: SchemaNode | undefined =
    schemas.length === 0 ? undefined : schemas.length === 1 ? schemas[0] : { anyOf: schemas };
  const output = combined === undefined ? undefined : converter.finish(combined, 'output');
  const mediaTypes = [...new Set(responses.flatMap((r) => [...r.content.keys()]))];
  return { ...(output ? { output } : {}), success: describeSuccess(responses[0], converter), mediaTypes };
}

function describeSuccess(first: RawResponse | undefined, converter: SchemaConverter): SuccessResponse {
  if (!first) return { status: 200 };
  const entries = [...first.content.keys()];
  const mediaType = entries.find(isJsonLike) ?? entries[0];
  if (mediaType === undefined) return { status: first.status };
  const raw = first.content.get(mediaType);
  const example = first.examples.get(mediaType);
  const converted = raw === undefined ? undefined : converter.convert(raw, 'output', first.pointer);
  return {
    status: first.status,
    mediaType,
    ...(example !== undefined ? { example } : {}),
    ...(converted !== undefined ? { schema: converter.finish(converted, 'output') } : {}),
  };
}

function successResponses(view: DocumentView, op: RawOperation): RawResponse[] {
  const responses = op.operation.responses;
  if (!isObject(responses)) return [];
  const out: RawResponse[] = [];
  for (const [code, value] of Object.entries(responses)) {
    if (!/^2(\d\d|XX)$/i.test(code)) continue;
    const pointer = `${op.pointer}/responses/${code}`;
    const response = deref(view, value, pointer);
    if (!isObject(response)) continue;
    const status = /^2XX$/i.test(code) ? 200 : Number(code);
    out.push(
      view.flavour === 'swagger-2.0'
        ? readSwaggerResponse(view, op, response, status, pointer)
        : readOpenApiResponse(view, response, status, pointer),
    );
  }
  return out.sort((a, b) => a.status - b.status);
}

function readOpenApiResponse(
  view: DocumentView,
  response: Record<string, unknown>,
  status: number,
  pointer: string,
): RawResponse {
  const content = new Map<string, unknown>();
  const examples = new Map<string, unknown>();
  if (isObject(response.content)) {
    for (const [mediaType, media] of Object.entries(response.content)) {
      if (!isObject(media)) {
        content.set(mediaType, undefined);
        continue;
      }
      content.set(mediaType, media.schema);
      const example =
        media.example !== undefined ? media.example : firstExampleValue(view, media.examples, pointer);
      if (example !== undefined) examples.set(mediaType, example);
    }
  }
  return { status, content, examples, pointer };
}

function readSwaggerResponse(
  view: DocumentView,
  op: RawOperation,
  response: Record<string, unknown>,
  status: number,
  pointer: string,
): RawResponse {
  const content = new Map<string, unknown>();
  const examples = new Map<string, unknown>();
  if (response.schema !== undefined) {
    const produces = stringList(op.operation.produces) ?? stringList(view.doc.produces);
    const mediaTypes = produces?.length ? produces : ['application/json'];
    for (const m of mediaTypes) content.set(m, response.schema);
  }
  if (isObject(response.examples)) {
    for (const [m, ex] of Object.entries(response.examples)) examples.set(m, ex);
  }
  return { status, content, examples, pointer };
}

function firstExampleValue(view: DocumentView, examples: unknown, pointer: string): unknown {
  if (!isObject(examples)) return undefined;
  const first = Object.values(examples)[0];
  const example = deref(view, first, `${pointer}/examples`);
  return isObject(example) ? example.value : undefined;
}
