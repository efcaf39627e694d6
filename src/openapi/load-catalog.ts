/** Loads every API's document (in parallel) and derives one catalog from them. */
import type { Catalog } from './catalog.js';
import { deriveCatalogInSlices, type ApiDocument } from './derive.js';
import { collectGarbage } from '../util/collect-garbage.js';
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
  );
}
