/** Media-type classification shared by input (request body) and output (responses) derivation. */

// Every upstream answer's Content-Type is classified several times over (stream? JSON? text?), and
// an API sends few distinct ones: the essences are remembered, up to a bound, then started afresh.
const ESSENCES = new Map<string, string>();
const MAX_ESSENCES = 256;

/** `application/json; charset=utf-8` → `application/json` */
export function essence(mediaType: string): string {
  let found = ESSENCES.get(mediaType);
  if (found === undefined) {
    found = (mediaType.split(';')[0] ?? '').trim().toLowerCase();
    if (ESSENCES.size >= MAX_ESSENCES) ESSENCES.clear();
    // Only short ones: a header is attacker-sized, and a key is kept as long as the entry.
    if (mediaType.length <= 200) ESSENCES.set(mediaType, found);
  }
  return found;
}

export function isJsonLike(mediaType: string): boolean {
  const m = essence(mediaType);
  return m === 'application/json' || m.endsWith('+json') || m === '*/*';
}

export function isTextual(mediaType: string): boolean {
  const m = essence(mediaType);
  return m.startsWith('text/') || m === 'application/xml' || m.endsWith('+xml');
}

/** Order in which the proxy prefers to send a request body when an operation accepts several. */
export function bodyPreference(mediaType: string): number {
  const m = essence(mediaType);
  if (m === '*/*') return 5;
  if (isJsonLike(m)) return 0;
  if (m === 'multipart/form-data') return 1;
  if (m === 'application/x-www-form-urlencoded') return 2;
  if (isTextual(m)) return 3;
  return 4;
}

export function sortByPreference(mediaTypes: readonly string[]): string[] {
  return mediaTypes
    .map((m, i) => ({ m, i }))
    .sort((a, b) => bodyPreference(a.m) - bodyPreference(b.m) || a.i - b.i)
    .map(({ m }) => m);
}
