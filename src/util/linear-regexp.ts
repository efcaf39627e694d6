/**
 * Regular expressions that come from an OpenAPI document and run on strings an agent or an
 * upstream chose. ECMAScript's engine backtracks: `^(a+)+$` takes seconds on 28 characters and
 * `^(.+)-(.+)-(.+)$` cubic time, all of it on the event loop. RE2 matches in time linear in the
 * input, so these run on RE2 (the engine ajv documents for exactly this, `code.regExp`).
 *
 * RE2 has no lookaround and no backreferences, and refuses repetition counts over 1,000
 * (`{0,4096}`). A document pattern it cannot run is not checked at all (`unchecked` accepts
 * every string) and the catalog says so when it loads, with RE2's reason (schema-convert.ts).
 * The upstream, whose own rule it is, still applies it.
 */
import RE2 from 're2';

/** What ajv needs of a compiled pattern (its RegExpLike). */
export interface LinearRegExp {
  test(text: string): boolean;
  /** ajv tells the patterns it compiled apart by this, as `/source/flags` for a RegExp. */
  toString(): string;
}

/** Accepts every string: `source` is a pattern RE2 cannot run (see the module comment). */
function unchecked(source: string, flags: string): LinearRegExp {
  return { test: () => true, toString: () => `/${source}/${flags}` };
}

/**
 * Why RE2 cannot run `source` (with ajv's `u` flag, as document patterns are compiled), in its
 * own words (`invalid perl operator: (?=`, `invalid repetition size: {0,4096}`); undefined when
 * it can.
 */
export function linearRefusal(source: string): string | undefined {
  try {
    new RE2(source, 'u');
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** `source` on RE2; throws when RE2 cannot run it. */
export function linearRegExp(source: string, flags = ''): RegExp {
  return new RE2(source, flags);
}

/** The module name by which generated code asks for documentPatternEngine. */
export const DOCUMENT_PATTERN_MODULE = 'agent-auth-proxy:document-pattern';

/**
 * ajv's regular-expression engine (`code.regExp`) for document patterns. Code ajv generates off
 * the event loop asks for it by `code`'s module name (off-thread-compiler.ts resolves it).
 */
export const documentPatternEngine = Object.assign(
  (source: string, flags: string): LinearRegExp => {
    try {
      return new RE2(source, flags);
    } catch {
      return unchecked(source, flags);
    }
  },
  { code: `require(${JSON.stringify(DOCUMENT_PATTERN_MODULE)})` },
);
