/**
 * Bundled OpenAPI documents → the capability catalog. Pure: no I/O. Names are assigned over all
 * APIs at once so collisions get deterministic suffixes (README "Capability names").
 */
import { UserError } from '../errors.js';
import { createCatalog, type Catalog } from './catalog.js';
import {
  documentServers,
  inspectDocument,
  listOperations,
  securitySchemes,
  type DocumentView,
  type RawOperation,
} from './document.js';
import { baseName, NAME_PATTERN, suffixed, toSnakeCase, withPrefix } from './names.js';
import { deriveOperation, type ApiContext, type DerivedOperation } from './operation.js';
import { isObject, scalarText, unescapeToken } from './pointer.js';
import { SchemaConverter } from './schema-convert.js';
import { isSelected, type OperationSelector } from './selectors.js';
import type { ApiInfo, Capability } from './types.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

export interface ApiDocument {
  /** Where the document came from, for messages. */
  readonly source: string;
  /** The document after `$ref` bundling: only document-local `$ref`s remain. */
  readonly doc: unknown;
  readonly id?: string;
  readonly upstream?: string;
  readonly prefix?: string;
  readonly include?: readonly OperationSelector[];
  readonly exclude?: readonly OperationSelector[];
}

interface Candidate {
  readonly derived: DerivedOperation;
  readonly base: string;
  readonly explicit: boolean;
  /** Sort key that does not depend on document order. */
  readonly order: string;
}

type DerivedCatalog = Catalog & { readonly formats: ReadonlySet<string> };

/**
 * What deriving one API's document gives before names are assigned over all APIs: what a reload
 * keeps of an API whose document and settings did not change (load-catalog.ts).
 */
export interface DerivedApi {
  /** The id it asked for (its configured id, or its title's) before ids were made unique. */
  readonly wantedId: string;
  readonly info: ApiInfo;
  readonly candidates: readonly Candidate[];
  readonly formats: readonly string[];
  readonly warnings: readonly string[];
}

/** An API derived before, taken as it was instead of its document. */
export type KeptApi = Omit<ApiDocument, 'doc'> & { readonly kept: DerivedApi };

/** A kept API would now get another id (an API before it changed): it must be derived again. */
export class KeptApiMoved extends Error {}

/** Longest stretch of deriving between two turns of the event loop. */
const DERIVE_SLICE_MS = 10;

/** The catalog of `apis`, derived in one go, for callers that want it at once (the tests). */
export function deriveCatalog(apis: readonly ApiDocument[]): DerivedCatalog {
  const steps = deriveSteps(apis);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value.catalog;
  }
}

/** How deriving in slices goes (deriveCatalogInSlices). */
export interface SliceOptions {
  readonly sliceMs?: number;
  readonly betweenSlices?: () => void;
  /**
   * The documents are the caller's to give up: each path item leaves its document once its
   * operations are derived, unless a `$ref` points into it, so that the document shrinks as the
   * catalog grows (paths are most of a large document: 56 of Microsoft Graph beta's 69 MiB).
   */
  readonly consumeDocuments?: boolean;
}

/**
 * The same catalog, derived in slices of about `sliceMs` of work with a turn of the event loop
 * between them, with each API's part. Deriving is most of loading a large document (Microsoft
 * Graph's 11,422 operations: 1.7 s), and a reload does it while the proxy serves: in one piece,
 * every request in flight would wait for all of it. A kept API's part is taken as it was (a
 * reload of documents of which some did not change); KeptApiMoved when it would get another id.
 */
export async function deriveCatalogInSlices(
  apis: readonly (ApiDocument | KeptApi)[],
  options: SliceOptions = {},
): Promise<{ readonly catalog: DerivedCatalog; readonly parts: readonly DerivedApi[] }> {
  const sliceMs = options.sliceMs ?? DERIVE_SLICE_MS;
  const steps = deriveSteps(apis, options.consumeDocuments === true);
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      options.betweenSlices?.();
      await nextTurn();
      sliceStart = performance.now();
    }
  }
}

/**
 * Derives the catalog, yielding after each operation (where a slice may end), returning it with
 * each API's part. A kept API is taken as it was, when it gets the same id as before.
 */
function* deriveSteps(
  apis: readonly (ApiDocument | KeptApi)[],
  consumeDocuments = false,
): Generator<void, { catalog: DerivedCatalog; parts: DerivedApi[] }, void> {
  const parts: DerivedApi[] = [];
  const usedIds = new Set<string>();
  for (const [apiIndex, api] of apis.entries()) {
    if ('kept' in api) {
      if (uniqueId(api.kept.wantedId, usedIds) !== api.kept.info.id) throw new KeptApiMoved(api.source);
      parts.push(api.kept);
      continue;
    }
    try {
      parts.push(yield* deriveApi(api, apiIndex, usedIds, consumeDocuments));
    } catch (err) {
      throw nestedTooDeeply(err, api.source);
    }
  }

  const warnings = parts.flatMap((part) => part.warnings);
  const warn = (m: string): void => void warnings.push(m);
  const candidates = parts.flatMap((part) => part.candidates);
  const names = assignNames(candidates, warn, apis);
  const capabilities: Capability[] = candidates.map((c, i) => ({
    name: names[i] as string,
    description: c.derived.description,
    ...(c.derived.input ? { input: c.derived.input } : {}),
    ...(c.derived.output ? { output: c.derived.output } : {}),
    argumentsSchema: c.derived.argumentsSchema,
    operation: c.derived.operation,
  }));
  const infos = parts.map((part) => part.info);
  const formats = new Set(parts.flatMap((part) => part.formats));
  return { catalog: Object.freeze({ ...createCatalog(infos, capabilities, warnings), formats }), parts };
}

/**
 * A document nested deeper than the stack allows (thousands of levels: no real API comes near)
 * is the document's fault: a UserError naming it, not a crash. Anything else is passed on.
 */
export function nestedTooDeeply(err: unknown, source: string): unknown {
  if (!(err instanceof RangeError) || !/call stack/i.test(err.message)) return err;
  return new UserError(`${source}: nested too deeply to load (thousands of levels of schemas or values)`);
}

/** One API's document derived: its info and candidate capabilities, yielding after each operation. */
function* deriveApi(
  api: ApiDocument,
  apiIndex: number,
  usedIds: Set<string>,
  consumeDocument: boolean,
): Generator<void, DerivedApi, void> {
  const warnings: string[] = [];
  const warn = (m: string): void => void warnings.push(m);
  const candidates: Candidate[] = [];
  const view = inspectDocument(api.source, api.doc);
  const info = isObject(view.doc.info) ? view.doc.info : {};
  const wantedId = api.id ?? (toSnakeCase(scalarText(info.title)) || 'api');
  const id = uniqueId(wantedId, usedIds);
  const converter = new SchemaConverter(view.doc, view.flavour, (m) => warn(`${api.source}: ${m}`));
  const servers = documentServers(view);
  const schemes = securitySchemes(view);
  const apiInfo: ApiInfo = {
    id,
    title: typeof info.title === 'string' ? info.title : id,
    ...(typeof info.description === 'string' ? { description: info.description } : {}),
    version: typeof info.version === 'string' ? info.version : scalarText(info.version),
    source: api.source,
    flavour: view.flavour,
    ...(api.upstream !== undefined ? { upstream: api.upstream } : {}),
    servers,
    securitySchemes: schemes,
  };
  const ctx = { view, converter, apiId: id, servers, schemes, warn };
  yield; // reading the document's references (the converter) was a step of its own
  const operations: (RawOperation | undefined)[] = listOperations(view);
  const release = consumeDocument ? pathRelease(view, converter.refs) : undefined;
  for (let index = 0; index < operations.length; index++) {
    const op = operations[index] as RawOperation;
    const candidate = candidateFor(ctx, api, apiIndex, op);
    if (candidate !== undefined) candidates.push(candidate);
    if (release !== undefined) {
      operations[index] = undefined;
      if (operations[index + 1]?.path !== op.path) release(op.path);
    }
    yield;
  }
  return Object.freeze({
    wantedId,
    info: apiInfo,
    candidates: Object.freeze(candidates),
    formats: Object.freeze([...converter.formats]),
    warnings: Object.freeze(warnings),
  });
}

/** The operation as a candidate capability, or undefined when the API's selectors leave it out. */
function candidateFor(
  ctx: ApiContext,
  api: ApiDocument,
  apiIndex: number,
  op: RawOperation,
): Candidate | undefined {
  const operationId = typeof op.operation.operationId === 'string' ? op.operation.operationId : undefined;
  const tags = Array.isArray(op.operation.tags)
    ? op.operation.tags.filter((t): t is string => typeof t === 'string')
    : [];
  if (
    !isSelected(
      { method: op.method, path: op.path, ...(operationId ? { operationId } : {}), tags },
      api.include,
      api.exclude,
    )
  )
    return undefined;
  const override = op.operation['x-agent-auth-name'];
  if (override !== undefined && (typeof override !== 'string' || !NAME_PATTERN.test(override))) {
    throw new UserError(
      `${api.source}: ${op.pointer}/x-agent-auth-name: ${JSON.stringify(override)} is not a valid capability name (expected [a-z0-9_], 1 to 64 characters)`,
    );
  }
  return {
    derived: deriveOperation(ctx, op),
    base: withPrefix(
      api.prefix,
      typeof override === 'string' ? override : baseName(operationId, op.method, op.path),
    ),
    explicit: typeof override === 'string',
    order: `${String(apiIndex).padStart(6, '0')} ${op.path} ${op.method}`,
  };
}

/**
 * Removes a path item from the document, once derived, unless one of the document's `$ref`s
 * (`refs`) points into it: a `$ref` of a schema, a parameter or another path item may.
 */
function pathRelease(view: DocumentView, refs: ReadonlySet<string>): (path: string) => void {
  const referenced = new Set<string>();
  for (const ref of refs) {
    const [, top, token] = ref.split('/', 3);
    if (top !== 'paths' || token === undefined) continue;
    try {
      referenced.add(unescapeToken(decodeURIComponent(token)));
    } catch {
      return () => undefined; // a pointer that does not decode: keep every path item
    }
  }
  const paths = view.doc.paths as Record<string, unknown>;
  return (path) => {
    if (!referenced.has(path)) Reflect.deleteProperty(paths, path);
  };
}

/**
 * Explicit names (`x-agent-auth-name`) are reserved first and must be unique. Then every other
 * wanted name goes to the first operation (in API/path/method order) that wants it. Then the rest
 * of each colliding group get `_2`, `_3`, … (skipping names already taken).
 */
function assignNames(
  candidates: readonly Candidate[],
  warn: (m: string) => void,
  apis: readonly { readonly source: string }[],
): string[] {
  const names: (string | undefined)[] = new Array<string | undefined>(candidates.length);
  const taken = new Map<string, number>();
  const label = (i: number): string => {
    const c = candidates[i] as Candidate;
    const api = apis[Number(c.order.slice(0, 6))];
    return `${c.derived.operation.method.toUpperCase()} ${c.derived.operation.path} (${api?.source ?? ''})`;
  };

  candidates.forEach((c, i) => {
    if (!c.explicit) return;
    const other = taken.get(c.base);
    if (other !== undefined) {
      throw new UserError(
        `x-agent-auth-name "${c.base}" is used by both ${label(other)} and ${label(i)}; names must be unique`,
      );
    }
    taken.set(c.base, i);
    names[i] = c.base;
  });

  const groups = new Map<string, number[]>();
  candidates.forEach((c, i) => {
    if (c.explicit) return;
    groups.set(c.base, [...(groups.get(c.base) ?? []), i]);
  });
  const order = (i: number): string => (candidates[i] as Candidate).order;
  // Reserve every wanted name before any suffix is made, so a generated `x_2` never takes the
  // name from operations that want `x_2` themselves.
  for (const [base, members] of groups) {
    if (taken.has(base)) continue;
    const first = members.reduce((a, b) => (order(b) < order(a) ? b : a));
    taken.set(base, first);
    names[first] = base;
  }
  for (const [base, members] of [...groups].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (members.every((i) => names[i] !== undefined)) continue;
    const sorted = [...members].sort((a, b) => (order(a) < order(b) ? -1 : 1));
    let n = 2;
    for (const i of sorted) {
      if (names[i] !== undefined) continue;
      let name = base;
      if (taken.has(name)) {
        do name = suffixed(base, n++);
        while (taken.has(name));
        warn(
          `capability name "${base}" is wanted by ${label(taken.get(base) as number)} and ${label(i)}; the latter is named "${name}"`,
        );
      }
      taken.set(name, i);
      names[i] = name;
    }
  }
  return names as string[];
}

function uniqueId(base: string, used: Set<string>): string {
  let id = base;
  for (let n = 2; used.has(id); n++) id = `${base}_${n}`;
  used.add(id);
  return id;
}
