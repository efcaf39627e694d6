/**
 * JSON with object keys sorted at every depth (and undefined members left out, as JSON.stringify
 * does): one spelling per JSON value, whatever key order it arrived in. What hashes of shown
 * content (per-call approvals), capability versions (§2.12) and constraint comparisons rest on.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Readonly<Record<string, unknown>>;
    const entries = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
