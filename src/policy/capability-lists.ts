/**
 * Capability lists (names, globs over names, selectors over operations) → sets of concrete
 * capability names, and the capability classes built from them. Precedence is applied here so
 * that consumers never have to: `blocked` and `high_risk` win over every "granted without
 * asking" list, and a blocked capability is never public.
 */
import type { Catalog } from '../openapi/catalog.js';
import { globToRegExp, matchesSelector } from '../openapi/selectors.js';
import type { Capability } from '../openapi/types.js';
import { parseConstraints, type Constraints } from '../protocol/constraints.js';
import type { Policy } from '../protocol/resolved-policy.js';
import type { Problems } from './problems.js';
import type { CapabilityListItem, PolicyFile } from './types.js';

/** The policy's capability classes, resolved; and how the other sections resolve a list of their own. */
export interface CapabilityClasses extends Pick<
  Policy,
  'defaults' | 'highRisk' | 'blocked' | 'perCall' | 'dpop' | 'public' | 'constraints' | 'autonomousGrants'
> {
  /** A list of "granted without asking" capabilities, less the high-risk and blocked ones. */
  readonly grantable: (items: readonly CapabilityListItem[], path: string) => Set<string>;
}

export function resolveCapabilityClasses(
  raw: PolicyFile,
  catalog: Catalog,
  problems: Problems,
): CapabilityClasses {
  const list = (items: readonly CapabilityListItem[], path: string): Set<string> =>
    resolveCapabilityList(items, path, catalog, problems);
  const caps = raw.capabilities;
  const listedDefaults = list(caps.defaults, 'capabilities.defaults');
  const highRisk = list(caps.high_risk, 'capabilities.high_risk');
  const blocked = list(caps.blocked, 'capabilities.blocked');
  const neverByDefault = (names: Set<string>): Set<string> =>
    new Set([...names].filter((n) => !highRisk.has(n) && !blocked.has(n)));
  const defaults = neverByDefault(listedDefaults);
  const perCall = new Set([...list(caps.per_call, 'capabilities.per_call')].filter((n) => !blocked.has(n)));
  const dpop = new Set([...list(caps.dpop, 'capabilities.dpop')].filter((n) => !blocked.has(n)));
  // §5.2: listing without authentication hides nothing a self-signed host key could not list, so
  // an omitted list means every capability (the documented default, as without a policy file).
  const listedPublic = caps.public
    ? list(caps.public, 'capabilities.public')
    : new Set(catalog.capabilities.map((c) => c.name));
  const publicNames = new Set([...listedPublic].filter((n) => !blocked.has(n)));
  const constraints = resolveConstraints(caps.constraints, catalog, problems);
  const autonomousGrants = neverByDefault(list(raw.autonomous.grants, 'autonomous.grants'));
  return {
    defaults,
    highRisk,
    blocked,
    perCall,
    dpop,
    public: publicNames,
    constraints,
    autonomousGrants,
    grantable: (items, path) => neverByDefault(list(items, path)),
  };
}

/** Server-imposed constraints (§2.13) per exact capability name, checked against its input fields. */
function resolveConstraints(
  raw: Record<string, unknown>,
  catalog: Catalog,
  problems: Problems,
): Map<string, Constraints> {
  const constraints = new Map<string, Constraints>();
  for (const [name, value] of Object.entries(raw)) {
    const path = `capabilities.constraints.${name}`;
    const capability = catalog.get(name);
    if (!capability) {
      problems.add(
        path,
        `${JSON.stringify(name)} is not a capability name (constraints take exact names, not globs)`,
      );
      continue;
    }
    const parsed = parseConstraints(value, inputFields(capability));
    if (!parsed.ok) {
      problems.add(path, parsed.problem.message);
      continue;
    }
    if (Object.keys(parsed.constraints).length > 0) constraints.set(name, Object.freeze(parsed.constraints));
  }
  return constraints;
}

/**
 * The names a capability list stands for, in catalog (name) order. Every entry must match at
 * least one capability: a typo would otherwise silently grant, block or expose nothing.
 */
export function resolveCapabilityList(
  items: readonly CapabilityListItem[],
  path: string,
  catalog: Catalog,
  problems: Problems,
): Set<string> {
  const matched = new Set<string>();
  items.forEach((item, i) => {
    const where = `${path}[${i}]`;
    let hits: Capability[];
    if (typeof item === 'string') {
      if (!/[*?]/.test(item)) {
        const capability = catalog.get(item);
        if (!capability) {
          problems.add(where, `${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
          return;
        }
        hits = [capability];
      } else {
        const re = globToRegExp(item, false);
        hits = catalog.capabilities.filter((c) => re.test(c.name));
        if (hits.length === 0)
          problems.add(where, `glob ${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
      }
    } else {
      hits = catalog.capabilities.filter((c) =>
        matchesSelector(item, {
          method: c.operation.method,
          path: c.operation.path,
          tags: c.operation.tags,
          ...(c.operation.operationId !== undefined ? { operationId: c.operation.operationId } : {}),
        }),
      );
      if (hits.length === 0) {
        problems.add(where, `selector ${JSON.stringify(item)} matches no capability ${seeCatalog(catalog)}`);
      }
    }
    for (const c of hits) matched.add(c.name);
  });
  return new Set(catalog.capabilities.map((c) => c.name).filter((n) => matched.has(n)));
}

function seeCatalog(catalog: Catalog): string {
  const names = catalog.capabilities.map((c) => c.name);
  if (names.length === 0) return '(the catalog is empty)';
  if (names.length <= 10) return `(capabilities: ${names.join(', ')})`;
  return '(list them with `agent-auth-proxy capabilities`)';
}

/** A capability's top-level input field names: the keys constraints may use (§2.13). */
function inputFields(capability: Capability): ReadonlySet<string> {
  const properties = capability.input?.properties;
  return new Set(
    typeof properties === 'object' && properties !== null && !Array.isArray(properties)
      ? Object.keys(properties)
      : [],
  );
}
