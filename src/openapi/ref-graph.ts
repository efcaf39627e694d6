/**
 * The `$ref` graph of a bundled document: every local `$ref` it uses (each becomes one `$defs`
 * entry of the capability schemas that reach it) and those that take part in a cycle (request
 * bodies behind those are never flattened into arguments, see request-body.ts).
 */
import { isObject, resolvePointer } from './pointer.js';

/** Local `$ref` values directly inside `node`, not following them. */
export function directRefs(node: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(node)) {
    for (const item of node) directRefs(item, out);
  } else if (isObject(node)) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#')) out.add(value);
      else directRefs(value, out);
    }
  }
  return out;
}

export interface RefGraph {
  /** Every local `$ref` reachable from the document. */
  readonly refs: ReadonlySet<string>;
  /** The `$ref`s on a cycle (including one that refers to itself). */
  readonly recursive: ReadonlySet<string>;
}

export function analyzeRefs(doc: unknown): RefGraph {
  const edges = new Map<string, string[]>();
  const pending = [...directRefs(doc)];
  while (pending.length > 0) {
    const ref = pending.pop() as string;
    if (edges.has(ref)) continue;
    const targets = [...directRefs(resolvePointer(doc, ref))];
    edges.set(ref, targets);
    for (const t of targets) if (!edges.has(t)) pending.push(t);
  }
  return { refs: new Set(edges.keys()), recursive: stronglyConnected(edges) };
}

/** Tarjan's algorithm, iterative so deep reference chains cannot overflow the stack. */
export function stronglyConnected(edges: ReadonlyMap<string, readonly string[]>): Set<string> {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const recursive = new Set<string>();
  let counter = 0;

  for (const root of edges.keys()) {
    if (index.has(root)) continue;
    const work: { node: string; next: number }[] = [{ node: root, next: 0 }];
    index.set(root, counter);
    low.set(root, counter++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1] as { node: string; next: number };
      const successors = edges.get(frame.node) ?? [];
      if (frame.next < successors.length) {
        const succ = successors[frame.next++] as string;
        if (!index.has(succ)) {
          index.set(succ, counter);
          low.set(succ, counter++);
          stack.push(succ);
          onStack.add(succ);
          work.push({ node: succ, next: 0 });
        } else if (onStack.has(succ)) {
          low.set(frame.node, Math.min(low.get(frame.node) as number, index.get(succ) as number));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent)
        low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(frame.node) as number));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop() as string;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        const selfLoop = (edges.get(frame.node) ?? []).includes(frame.node);
        if (component.length > 1 || selfLoop) for (const m of component) recursive.add(m);
      }
    }
  }
  return recursive;
}
