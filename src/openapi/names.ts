/**
 * Capability naming (documented in README "Capability names"): operationId → snake_case, else
 * method + path; `[a-z0-9_]`, at most 64 characters (§2.14).
 */
import { createHash } from 'node:crypto';

export const MAX_NAME_LENGTH = 64;
export const NAME_PATTERN = /^[a-z0-9_]{1,64}$/;

/** `listPets` → `list_pets`, `get-pet-by-id` → `get_pet_by_id`, `Pets.List` → `pets_list`, `getHTTPStatus` → `get_http_status`. */
export function toSnakeCase(input: string): string {
  return (
    input
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      // One capital at a time, looking ahead: `([A-Z]+)([A-Z][a-z])` backtracked over every run of
      // capitals from each of its letters (60,000 of them in an operationId took 3.5 s).
      .replace(/([A-Z])(?=[A-Z][a-z])/g, '$1_')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
  );
}

/** `GET /pets/{petId}` → `get_pets_by_pet_id`; `GET /` → `get_root`. */
export function nameFromMethodAndPath(method: string, path: string): string {
  const parts = path
    .split('/')
    .filter(Boolean)
    .map((segment) => segment.replace(/\{([^}]*)\}/g, (_m, param: string) => `_by_${toSnakeCase(param)}_`))
    .map(toSnakeCase)
    .filter(Boolean);
  return toSnakeCase([method, ...(parts.length ? parts : ['root'])].join('_'));
}

/**
 * Names over the limit keep a readable head and gain a hash of the whole name, so two long names
 * that share their first 55 characters still differ, and the result is the same on every run.
 */
export function limitLength(name: string, max = MAX_NAME_LENGTH): string {
  if (name.length <= max) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${name.slice(0, max - hash.length - 1).replace(/_+$/, '')}_${hash}`;
}

/** Base name of an operation: its operationId when that yields anything, else method and path. */
export function baseName(operationId: string | undefined, method: string, path: string): string {
  const fromId = operationId === undefined ? '' : toSnakeCase(operationId);
  return fromId || nameFromMethodAndPath(method, path);
}

export function withPrefix(prefix: string | undefined, name: string): string {
  const p = prefix === undefined ? '' : toSnakeCase(prefix);
  return limitLength(p ? `${p}_${name}` : name);
}

/** The `n`-th variant of a colliding name (`n` ≥ 2), still within the length limit. */
export function suffixed(name: string, n: number): string {
  const suffix = `_${n}`;
  return `${limitLength(name, MAX_NAME_LENGTH - suffix.length)}${suffix}`;
}
