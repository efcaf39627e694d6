/**
 * Whether a parsed document can skip swagger-parser's bundler: every `$ref` in it is a plain
 * document-local pointer that resolves as written. Bundling such a document returns it unchanged
 * (checked on the shared and the large-API corpus) but costs a second on a large one (GitHub's
 * 13 MB: 1.9 s), as it crawls and re-resolves every `$ref`. A `$ref` to another file or URL, one
 * that points nowhere (the bundler names it in its error), or one with percent-encoding (the
 * bundler rewrites it decoded) keeps the bundler.
 */
import { resolvePointer } from './pointer.js';

export function hasOnlyPlainLocalRefs(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      for (const item of node) if (typeof item === 'object' && item !== null) stack.push(item);
      continue;
    }
    if (typeof node !== 'object' || node === null) continue;
    const record = node as Record<string, unknown>;
    // A non-string `$ref` is no reference (a property named "$ref"): the bundler ignores it too.
    const ref = record.$ref;
    if (typeof ref === 'string') {
      if (!ref.startsWith('#') || ref.includes('%') || resolvePointer(root, ref) === undefined) return false;
    }
    for (const key in record) {
      const value = record[key];
      if (typeof value === 'object' && value !== null) stack.push(value);
    }
  }
  return true;
}
