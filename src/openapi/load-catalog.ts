/** Loads every API's document (in parallel) and derives one catalog from them. */
import type { Catalog } from './catalog.js';
import { deriveCatalogInSlices, type ApiDocument } from './derive.js';
import { collectGarbage, collectingWhenGrown } from '../util/collect-garbage.js';
import { loadDocument, type LoadOptions } from './load.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

export type ApiSource = Omit<ApiDocument, 'doc' | 'source'> & { readonly spec: string };

export async function loadCatalog(
  apis: readonly ApiSource[],
  options: LoadOptions,
): Promise<Catalog & { readonly formats: ReadonlySet<string> }> {
  const loaded = await Promise.all(apis.map((api) => loadDocument(api.spec, options)));
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
