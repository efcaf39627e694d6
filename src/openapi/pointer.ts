/** JSON Pointer (RFC 6901) helpers for the bundled document. */

export function escapeToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function unescapeToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** `['paths', '/pets', 'get']` → `#/paths/~1pets/get` */
export function toPointer(tokens: readonly string[]): string {
  return `#${tokens.map((t) => `/${escapeToken(t)}`).join('')}`;
}

/** Resolves a document-local `$ref` (`#/…`); undefined when it points nowhere. */
export function resolvePointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  const body = ref.slice(1);
  if (body === '') return root;
  if (!body.startsWith('/')) return undefined;
  let node: unknown = root;
  for (const raw of body.slice(1).split('/')) {
    const token = unescapeToken(decodeURIComponent(raw));
    if (Array.isArray(node)) {
      if (!/^(0|[1-9]\d*)$/.test(token)) return undefined;
      node = node[Number(token)];
    } else if (isObject(node)) {
      if (!Object.hasOwn(node, token)) return undefined;
      node = node[token];
    } else {
      return undefined;
    }
  }
  return node;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;
}

/** A scalar as text; objects and arrays (never meaningful where a string is expected) as ''. */
export function scalarText(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : '';
}
