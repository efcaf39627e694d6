/**
 * Lookalike folding: two texts that fold to the same string are read as the same value by `not_in`
 * (§2.13), and two names that fold alike are read as the same name when the proxy looks for values
 * sent under a constrained name. Pure; shared by protocol/constraint-checks.ts and
 * upstream/sent-values.ts.
 *
 * fold(text), in this order:
 *  1. Unicode NFKC: compatibility forms become their plain letters (fullwidth `ａ` → `a`, the
 *     ligature `ﬁ` → `fi`, `𝐚` → `a`, `①` → `1`, no-break space → space) and combining sequences
 *     are composed (`e` + U+0301 → `é`).
 *  2. Invisible characters removed: every Default_Ignorable_Code_Point (zero-width space, joiner and
 *     non-joiner, word joiner, soft hyphen, bidi marks, embeddings, overrides and isolates, variation
 *     selectors, tag characters, Hangul fillers, combining grapheme joiner, BOM), every other format
 *     character (General_Category Cf) and every control character (Cc, including tab, CR, LF, NUL).
 *  3. Case folded: lower, upper, then lower case again, so `ẞ`, `ß`, `SS` and `ss` are one, as are
 *     the Kelvin sign `K` and `k`, the long `ſ` and `s`, and the two Greek sigmas.
 *  4. NFKC again (case mapping can leave decomposed sequences), then leading and trailing
 *     White_Space trimmed.
 *
 * Not folded, on purpose: accents (`é` ≠ `e`) and letters of other scripts that merely look alike
 * (Cyrillic `а` ≠ Latin `a`): those are different text to an upstream, not different spellings.
 */

const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/gu;
const EDGE_SPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;

/** A number as text: optional sign, digits with an optional fraction, optional exponent. */
const NUMBER_LITERAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/;

/** Printable ASCII: NFKC and the invisible set leave it alone, so folding is lower case + trim. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

export function fold(text: string): string {
  if (PRINTABLE_ASCII.test(text)) return text.toLowerCase().trim();
  const plain = text.normalize('NFKC').replace(INVISIBLE, '');
  return plain.toLowerCase().toUpperCase().toLowerCase().normalize('NFKC').replace(EDGE_SPACE, '');
}

// Values deeper than this fold to a key no constraint value can have (those are depth-limited),
// so folding a hostile, deeply nested argument stays bounded.
const MAX_DEPTH = 32;
const TOO_DEEP = '\u0000too-deep';

/**
 * The key two JSON values share exactly when they are lookalikes: strings compared after fold();
 * a string that folds to a number literal equals that number (`"05"`, `"５"` and `"5.0"` equal 5,
 * as an upstream that reads numbers from text sees them); booleans and null equal their text
 * (`"TRUE"` equals true); arrays element by element; objects by folded keys, in any order.
 */
export function lookalikeKey(value: unknown, depth = 0): string {
  if (typeof value === 'number') return `n:${String(value)}`;
  if (typeof value === 'string') {
    const folded = fold(value);
    return NUMBER_LITERAL.test(folded) ? `n:${String(Number(folded))}` : `s:${folded}`;
  }
  if (typeof value === 'boolean' || value === null) return `s:${String(value)}`;
  if (depth >= MAX_DEPTH) return TOO_DEEP;
  if (Array.isArray(value)) return `[${value.map((item) => lookalikeKey(item, depth + 1)).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .map(([key, item]) => `${JSON.stringify(fold(key))}:${lookalikeKey(item, depth + 1)}`)
      .sort();
    return `{${entries.join(',')}}`;
  }
  return TOO_DEEP;
}
