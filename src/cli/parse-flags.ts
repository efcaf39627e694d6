/**
 * The one argv parser of the three command lines (serve and its siblings, admin, agent): node:util
 * parseArgs, strict, with option values that start with '-' kept (dash-values.ts), and a flag that
 * is not `multiple` refused when it is given twice. parseArgs itself keeps the last value silently,
 * so `check --policy bad.yaml --policy good.yaml` would check good.yaml alone and report success,
 * and `--user-id a --user-id b` would act for b without a word.
 */
import { parseArgs } from 'node:util';
import { attachDashValues } from './dash-values.js';

/** What parseArgs reads of an option; the CLIs' tables carry more (help text, argument name). */
interface OptionShape {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
}

/** The option tokens parseArgs reports (`tokens: true`): the long name whatever was typed. */
interface OptionToken {
  readonly kind: string;
  readonly name?: string;
}

/**
 * `argv` parsed against `options`: values and positionals as parseArgs gives them. Throws (a plain
 * Error, as parseArgs does, for the caller to word as a usage mistake) on an unknown option, a
 * missing value, or a single-valued option given more than once.
 */
export function parseFlags<const O extends Readonly<Record<string, OptionShape>>>(
  argv: readonly string[],
  options: O,
) {
  const parsed = parseArgs({
    args: attachDashValues(argv, options),
    options,
    allowPositionals: true,
    strict: true,
    tokens: true,
  });
  refuseRepeats(parsed.tokens, options);
  return parsed;
}

/**
 * Throws naming the first option that is not `multiple` and appears twice, by long name, so `-v`
 * and `--version` count as one. Tokens after `--` are positionals, never options: they are not
 * counted. Values are not shown: a repeated --token or --admin-token is a secret.
 */
function refuseRepeats(tokens: readonly OptionToken[], options: Readonly<Record<string, OptionShape>>): void {
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === undefined) continue;
    if (options[token.name]?.multiple === true) continue;
    if (seen.has(token.name))
      throw new Error(`Option '--${token.name}' is given more than once; give it once`);
    seen.add(token.name);
  }
}

/**
 * The part of `argv` before a `--`: what a scan for a flag such as --version may look at. After
 * `--` every word is an argument, so `serve -- --version` does not ask for the version.
 */
export function beforeTerminator(argv: readonly string[]): readonly string[] {
  const end = argv.indexOf('--');
  return end === -1 ? argv : argv.slice(0, end);
}
