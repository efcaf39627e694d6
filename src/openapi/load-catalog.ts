/** Loads every API's document (in parallel) and derives one catalog from them. */
import type { Catalog } from './catalog.js';
import { deriveCatalogInSlices, type ApiDocument } from './derive.js';
import { collectGarbage, collectingWhenGrown } from '../util/collect-garbage.js';
import { fetchLimitsOf, loadDocument, type LoadedDocument, type LoadOptions } from './load.js';
import { SourceReads, unchangedSources, type SourceRead } from './source-reads.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

export type ApiSource = Omit<ApiDocument, 'doc' | 'source'> & { readonly spec: string };

export type LoadedCatalog = Catalog & { readonly formats: ReadonlySet<string> };

/** A catalog with what it was loaded from: the settings that shape it and every read. */
export interface CatalogLoad {
  readonly catalog: LoadedCatalog;
  /** The API list's fields that deriving uses, and the load options, as JSON. */
  readonly inputs: string;
  readonly reads: readonly SourceRead[];
  /** Whether this is the previous load, kept because nothing it was loaded from changed. */
  readonly reused: boolean;
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

function inputsOf(apis: readonly ApiSource[], options: LoadOptions): string {
  const fields = [...Object.keys(DERIVATION_FIELDS), 'spec'] as const;
  return JSON.stringify({
    apis: apis.map((api) => fields.map((field) => (api as Record<string, unknown>)[field] ?? null)),
    options: [options.allowRemoteRefs, options.allowHttp, fetchLimitsOf(options)],
  });
}

/**
 * The catalog of `apis`, or `previous`'s when the settings that shape it are the same and every
 * file and URL it was read from reads the same now: a reload that changes no document (policy,
 * credentials, upstream timeouts) neither parses nor derives, nor holds a second catalog.
 */
export async function loadCatalogReusing(
  apis: readonly ApiSource[],
  options: LoadOptions,
  previous?: CatalogLoad,
): Promise<CatalogLoad> {
  const inputs = inputsOf(apis, options);
  if (previous?.inputs === inputs && (await unchangedSources(previous.reads, fetchLimitsOf(options)))) {
    return { ...previous, reused: true };
  }
  const reads = new SourceReads();
  const loaded = await Promise.all(apis.map((api) => loadDocument(api.spec, options, reads)));
  return { catalog: await deriveLoaded(apis, loaded), inputs, reads: reads.list(), reused: false };
}

/**
 * The catalog of `apis`, loaded once (the CLI's commands): with nothing to compare with later,
 * nothing read is hashed (hashing GitHub's 13 MB takes about 11 ms).
 */
export async function loadCatalog(apis: readonly ApiSource[], options: LoadOptions): Promise<LoadedCatalog> {
  return deriveLoaded(apis, await Promise.all(apis.map((api) => loadDocument(api.spec, options))));
}

async function deriveLoaded(
  apis: readonly ApiSource[],
  loaded: readonly LoadedDocument[],
): Promise<LoadedCatalog> {
  // What parsing left behind goes before deriving adds to the heap: it bounds the peak. A turn of
  // the event loop on either side, so that a reload's requests wait for one step at a time.
  await nextTurn();
  collectGarbage();
  await nextTurn();
  return deriveCatalogInSlices(
    apis.map(({ spec: _spec, ...api }, i) => ({
      ...api,
      source: (loaded[i] as { source: string }).source,
      doc: loaded[i]?.doc,
    })),
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
