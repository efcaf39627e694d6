/**
 * Operation selectors, used by the config's include/exclude filters: a selector matches when every
 * key it sets matches (AND); within a key, any listed value may match (OR). A list of selectors
 * matches when any of them does.
 */
export interface OperationSelector {
  readonly tags?: readonly string[];
  readonly methods?: readonly string[];
  /** Globs over operationIds (`*` matches anything). */
  readonly operation_ids?: readonly string[];
  /** Globs over path templates (`*` within one segment, `**` across segments). */
  readonly paths?: readonly string[];
}

export interface SelectableOperation {
  readonly method: string;
  readonly path: string;
  readonly operationId?: string;
  readonly tags: readonly string[];
}

export function matchesSelector(selector: OperationSelector, op: SelectableOperation): boolean {
  if (selector.tags && !selector.tags.some((t) => op.tags.includes(t))) return false;
  if (selector.methods && !selector.methods.some((m) => m.toLowerCase() === op.method.toLowerCase()))
    return false;
  if (selector.operation_ids) {
    const id = op.operationId;
    if (id === undefined || !selector.operation_ids.some((g) => globToRegExp(g, false).test(id)))
      return false;
  }
  if (selector.paths && !selector.paths.some((g) => globToRegExp(g, true).test(op.path))) return false;
  return true;
}

export function isSelected(
  op: SelectableOperation,
  include: readonly OperationSelector[] | undefined,
  exclude: readonly OperationSelector[] | undefined,
): boolean {
  if (include && include.length > 0 && !include.some((s) => matchesSelector(s, op))) return false;
  return !(exclude ?? []).some((s) => matchesSelector(s, op));
}

const cache = new Map<string, RegExp>();

export function globToRegExp(glob: string, pathAware: boolean): RegExp {
  const key = `${pathAware ? 'p' : 'n'}${glob}`;
  let re = cache.get(key);
  if (!re) {
    let source = '';
    for (let i = 0; i < glob.length; i++) {
      const ch = glob[i] as string;
      if (ch === '*' && glob[i + 1] === '*') {
        source += '.*';
        i++;
      } else if (ch === '*') {
        source += pathAware ? '[^/]*' : '.*';
      } else if (ch === '?') {
        source += pathAware ? '[^/]' : '.';
      } else {
        source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      }
    }
    re = new RegExp(`^${source}$`);
    cache.set(key, re);
  }
  return re;
}
