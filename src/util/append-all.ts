/**
 * Pushes every item of `items` onto `target`. `target.push(...items)` passes each item as an
 * argument, and an argument from an agent holding 125,000 items overflows the call stack.
 */
export function appendAll<T>(target: T[], items: Iterable<T>): void {
  for (const item of items) target.push(item);
}
