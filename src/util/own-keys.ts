/**
 * Keys a stranger chose (an agent's argument names, a document's property, parameter and
 * component names), read and written as own properties only. A plain object answers
 * `constructor`, `toString`, `valueOf`… from its prototype, and assigning `__proto__` sets the
 * prototype instead of adding a key.
 */

/** `record[key]` only if the record itself has it (not its prototype). */
export function ownValue(record: Readonly<Record<string, unknown>>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** `target[key] = value` as an own property, whatever `key` is (`__proto__` included). */
export function putOwn<T>(target: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
