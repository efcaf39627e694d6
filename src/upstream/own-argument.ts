/**
 * An argument by name, only if the agent sent it. Arguments come from `JSON.parse`, so a plain
 * object's prototype answers `constructor`, `toString`, `valueOf`…: an operation whose parameter
 * or field has such a name would send the inherited function's text for an argument never given.
 */
export function ownArgument(args: Readonly<Record<string, unknown>>, name: string): unknown {
  return Object.hasOwn(args, name) ? args[name] : undefined;
}
