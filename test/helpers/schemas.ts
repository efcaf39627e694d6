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

/**
 * A capability schema with its `#/$defs/…` references replaced by what they refer to (the shape
 * schemas had when components were inlined), for tests about meaning rather than layout. A
 * reference's sibling annotations override the target's. Throws on a cycle, which cannot be inlined.
 */
export function inlineLocalRefs(root: Record<string, unknown>): Record<string, unknown> {
  const defs = (root.$defs ?? {}) as Record<string, unknown>;
  const walk = (node: unknown, stack: readonly string[]): unknown => {
    if (Array.isArray(node)) return node.map((item) => walk(item, stack));
    if (!node || typeof node !== 'object') return node;
    const { $ref: ref, $defs: _defs, ...rest } = node as Record<string, unknown>;
    const own = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, walk(v, stack)]));
    if (typeof ref !== 'string' || !ref.startsWith('#/$defs/'))
      return ref === undefined ? own : { $ref: ref, ...own };
    const name = ref.slice('#/$defs/'.length);
    if (stack.includes(name)) throw new Error(`cannot inline the cycle through ${name}`);
    const target = walk(defs[name], [...stack, name]);
    return Object.keys(own).length > 0 ? { ...(target as object), ...own } : target;
  };
  return walk(root, []) as Record<string, unknown>;
}
