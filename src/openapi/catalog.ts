/**
 * The capability catalog: every capability of every API, in name order, with lookup, search and
 * keyset pagination. Built once at start-up and frozen.
 */
import type { ApiInfo, Capability } from './types.js';

export interface Catalog {
  readonly apis: readonly ApiInfo[];
  /** Sorted by name, so listings are stable whatever the documents' order. */
  readonly capabilities: readonly Capability[];
  readonly warnings: readonly string[];
  get(name: string): Capability | undefined;
  api(id: string): ApiInfo | undefined;
}

export function createCatalog(
  apis: readonly ApiInfo[],
  capabilities: readonly Capability[],
  warnings: readonly string[],
): Catalog {
  const sorted = [...capabilities].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const byName = new Map(sorted.map((c) => [c.name, c]));
  const apiById = new Map(apis.map((a) => [a.id, a]));
  return Object.freeze({
    apis: Object.freeze([...apis]),
    capabilities: Object.freeze(sorted),
    warnings: Object.freeze([...warnings]),
    get: (name: string) => byName.get(name),
    api: (id: string) => apiById.get(id),
  });
}

/**
 * Case-insensitive search: every word of the query must occur in the name (underscores read as
 * spaces) or the description, in any order.
 */
export function matchesQuery(capability: Capability, query: string): boolean {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return true;
  const haystack =
    `${capability.name} ${capability.name.replace(/_/g, ' ')} ${capability.description}`.toLowerCase();
  return words.every((w) => haystack.includes(w));
}

export interface Page<T> {
  readonly items: readonly T[];
  /** Name of the last item when more follow; the HTTP layer turns it into an opaque cursor. */
  readonly after: string | null;
}

/**
 * Keyset pagination over name-ordered capabilities: a page starts after the name the cursor
 * carries, so a catalog reload between pages neither repeats nor skips entries that survived it.
 */
export function paginate(
  capabilities: readonly Capability[],
  after: string | undefined,
  limit: number,
): Page<Capability> {
  let start = 0;
  if (after !== undefined) {
    // Binary search: the first capability whose name sorts after `after`.
    let lo = 0;
    let hi = capabilities.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((capabilities[mid] as Capability).name <= after) lo = mid + 1;
      else hi = mid;
    }
    start = lo;
  }
  const items = capabilities.slice(start, start + limit);
  const more = start + limit < capabilities.length;
  return { items, after: more && items.length > 0 ? (items[items.length - 1] as Capability).name : null };
}
