/** Walks a JSON Schema and reports every `$ref` with where it stands. */
export function collectRefs(
  node: unknown,
  path = '#',
  out: { path: string; ref: string }[] = [],
): { path: string; ref: string }[] {
  if (Array.isArray(node)) node.forEach((item, i) => collectRefs(item, `${path}/${i}`, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push({ path, ref: v });
      else collectRefs(v, `${path}/${k}`, out);
    }
  }
  return out;
}
