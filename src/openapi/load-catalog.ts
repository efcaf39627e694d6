/** Loads every API's document (in parallel) and derives one catalog from them. */
import type { Catalog } from './catalog.js';
import {
  deriveCatalogInSlices,
  KeptApiMoved,
  nestedTooDeeply,
  type ApiDocument,
  type DerivedApi,
  type KeptApi,
} from './derive.js';
import { collectGarbage, collectingWhenGrown } from '../util/collect-garbage.js';
import { fetchLimitsOf, loadDocument, type LoadedDocument, type LoadOptions } from './load.js';
import type { FetchLimits } from './fetch.js';
import { SourceReads, unchangedSources, type SourceRead } from './source-reads.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

export type ApiSource = Omit<ApiDocument, 'doc' | 'source'> & { readonly spec: string };

export type LoadedCatalog = Catalog & { readonly formats: ReadonlySet<string> };

/** One API of a load: what shapes it, what it was read from, and what deriving it gave. */
export interface ApiLoad {
  /** Its settings that deriving uses, its place in the list and the load options, as JSON. */
  readonly inputs: string;
  readonly reads: readonly SourceRead[];
  readonly part: DerivedApi;
}

/** A catalog with what it was loaded from, API by API. */
export interface CatalogLoad {
  readonly catalog: LoadedCatalog;
  readonly apis: readonly ApiLoad[];
  /** Whether this is the previous load, kept whole because nothing it was loaded from changed. */
  readonly reused: boolean;
  /** How many APIs were taken from the previous load rather than loaded and derived again. */
  readonly keptApis: number;
}

/**
 * Every field of an API that deriving reads: listing them here (the type fails to compile when
 * ApiDocument gains one) keeps credentials and other execution settings out of `inputs`, so a
 * reload that only rotates a credential keeps the catalog.
 */
const DERIVATION_FIELDS = {
  id: true,
  upstream: true,
  prefix: true,
  include: true,
  exclude: true,
} as const satisfies Record<keyof Omit<ApiDocument, 'doc' | 'source'>, true>;

function inputsOf(api: ApiSource, index: number, options: LoadOptions): string {
  const fields = [...Object.keys(DERIVATION_FIELDS), 'spec'] as const;
  return JSON.stringify({
    api: fields.map((field) => (api as Record<string, unknown>)[field] ?? null),
    // Its place: ids and names of APIs are made unique in list order.
    index,
    options: [
      options.allowRemoteRefs,
      options.allowLocalRefsAnywhere === true,
      options.allowHttp,
      fetchLimitsOf(options),
    ],
  });
}

/**
 * The catalog of `apis`, keeping what `previous` derived of each API whose settings are the same
 * and whose every file and URL reads the same now. A reload that changes no document (policy,
 * credentials, upstream timeouts) keeps the previous catalog whole: no parsing, no deriving, no
 * second catalog; one that changes one API's document loads and derives that API alone, unless
 * the ids of the APIs after it move (then all are loaded again).
 */
export async function loadCatalogReusing(
  apis: readonly ApiSource[],
  options: LoadOptions,
  previous?: CatalogLoad,
): Promise<CatalogLoad> {
  const inputs = apis.map((api, i) => inputsOf(api, i, options));
  const kept = await keptParts(inputs, fetchLimitsOf(options), previous);
  if (previous && apis.length === previous.apis.length && kept.every((k) => k !== undefined)) {
    return { ...previous, reused: true, keptApis: apis.length };
  }
  try {
    return await loadKeeping(apis, options, inputs, kept);
  } catch (err) {
    if (!(err instanceof KeptApiMoved)) throw err;
    return loadKeeping(apis, options, inputs, []);
  }
}

/** For each API, its part of `previous` when its inputs are the same and its reads unchanged. */
async function keptParts(
  inputs: readonly string[],
  limits: Partial<FetchLimits>,
  previous: CatalogLoad | undefined,
): Promise<(ApiLoad | undefined)[]> {
  const byInputs = new Map((previous?.apis ?? []).map((api) => [api.inputs, api]));
  const kept: (ApiLoad | undefined)[] = [];
  for (const input of inputs) {
    const before = byInputs.get(input);
    kept.push(before && (await unchangedSources(before.reads, limits)) ? before : undefined);
  }
  return kept;
}

async function loadKeeping(
  apis: readonly ApiSource[],
  options: LoadOptions,
  inputs: readonly string[],
  kept: readonly (ApiLoad | undefined)[],
): Promise<CatalogLoad> {
  const reads = apis.map(() => new SourceReads());
  const loaded = await Promise.all(
    apis.map((api, i) =>
      kept[i] === undefined ? loadNested(api.spec, options, reads[i]) : Promise.resolve(undefined),
    ),
  );
  const { catalog, parts } = await deriveLoaded(apis, loaded, kept);
  return {
    catalog,
    apis: parts.map((part, i) => ({
      inputs: inputs[i] as string,
      reads: kept[i]?.reads ?? (reads[i] as SourceReads).list(),
      part,
    })),
    reused: false,
    keptApis: kept.filter((k) => k !== undefined).length,
  };
}

/**
 * The catalog of `apis`, loaded once (the CLI's commands): with nothing to compare with later,
 * nothing read is hashed (hashing GitHub's 13 MB takes about 11 ms).
 */
export async function loadCatalog(apis: readonly ApiSource[], options: LoadOptions): Promise<LoadedCatalog> {
  const loaded = await Promise.all(apis.map((api) => loadNested(api.spec, options)));
  return (await deriveLoaded(apis, loaded, [])).catalog;
}

/** loadDocument, with a document nested past the stack reported as the document's fault. */
function loadNested(spec: string, options: LoadOptions, reads?: SourceReads): Promise<LoadedDocument> {
  return loadDocument(spec, options, reads).catch((err: unknown) => {
    throw nestedTooDeeply(err, spec);
  });
}

async function deriveLoaded(
  apis: readonly ApiSource[],
  loaded: readonly (LoadedDocument | undefined)[],
  kept: readonly (ApiLoad | undefined)[],
): Promise<{ readonly catalog: LoadedCatalog; readonly parts: readonly DerivedApi[] }> {
  // What parsing left behind goes before deriving adds to the heap: it bounds the peak. A turn of
  // the event loop on either side, so that a reload's requests wait for one step at a time.
  await nextTurn();
  collectGarbage();
  await nextTurn();
  return deriveCatalogInSlices(
    apis.map(({ spec: _spec, ...api }, i): ApiDocument | KeptApi => {
      const before = kept[i];
      if (before !== undefined) return { ...api, source: before.part.info.source, kept: before.part };
      const document = loaded[i] as LoadedDocument;
      return { ...api, source: document.source, doc: document.doc };
    }),
    // Each document was parsed for this catalog alone (one parse per API, even of one file).
    { betweenSlices: collectingWhenGrown(COLLECT_AFTER_GROWTH_BYTES), consumeDocuments: true },
  );
}

/**
 * Heap growth while deriving after which a full collection runs (between two slices). Deriving
 * leaves garbage as fast as it builds the catalog, and V8 grows the heap to hold it rather than
 * collect it: Microsoft Graph beta's 22,361 operations (47 MB of JSON) peaked at 379 MiB, over
 * issue 14's 300, at 297 MiB with a collection per 64 MiB of growth, and at 284-289 MiB per 32
 * once derived path items left the document (64 MiB then: 303-308). Microsoft Graph's start-up
 * takes about 0.15 s longer for it. Counting growth instead of time (a collection per second of
 * deriving did as well there) leaves a document of ordinary size (GitHub's) uncollected, and its
 * start-up as it was.
 */
export const COLLECT_AFTER_GROWTH_BYTES = 32 * 1024 * 1024;
