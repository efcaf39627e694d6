/**
 * §8.10 display-text safety: what an approval page may show of text an agent chose (its name,
 * its host's name, a reason, a binding message, constraint values). Servers MUST strip HTML,
 * limit length and escape; the escaping is the HTML layer's (src/http/html.ts), this module
 * makes the text plain first. Pure.
 *
 * plainText(text, max), in this order:
 *  1. Markup removed: every HTML tag, comment, doctype or processing instruction (`<b>`, `</a>`,
 *     `<img src=x onerror=…>`, `<!-- … -->`), repeatedly, so `<<b>script>` leaves nothing that
 *     reads as a tag. A `<` that opens no tag (`a < b`) stays: it is text.
 *  2. Invisible and direction-changing characters removed: controls (Cc), formats (Cf: bidi
 *     embeddings, overrides and isolates, zero-width spaces and joiners, BOM) and every other
 *     Default_Ignorable_Code_Point (variation selectors, tag characters, Hangul fillers): a name
 *     must not read differently from how it compares, nor reorder the sentence around it.
 *  3. Runs of white space (line breaks included) become one space; ends trimmed.
 *  4. At most `max` characters (code points, never half a surrogate pair), then `…`.
 *
 * It says what it changed, so the page can warn that the agent's text carried markup or hidden
 * characters: both are signs of an attempt to mislead.
 */

export interface PlainText {
  readonly text: string;
  /** HTML markup was removed. */
  readonly markup: boolean;
  /** Invisible, control or bidi characters were removed. */
  readonly hidden: boolean;
  /** Longer than `max`: cut, with `…` appended. */
  readonly truncated: boolean;
}

/** Display caps, in characters (§8.10 "limit length"): longer text is cut with `…`. */
export const DISPLAY_LIMITS = {
  name: 80,
  reason: 500,
  bindingMessage: 256,
  description: 200,
  constraintValue: 80,
} as const;

// A tag (`<a …>`, `</a>`), a comment, a doctype or a processing instruction.
const MARKUP = /<(?:!--[\s\S]*?(?:-->|$)|[!?][^<>]*>|\/?[A-Za-z][^<>]*>)/g;
const HIDDEN = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;
const SPACES = /\s+/gu;
/** Longer inputs are cut before any regex runs: the stored fields are bounded, this is a backstop. */
const MAX_INPUT = 4096;

export function plainText(input: string, max: number): PlainText {
  const capped = input.length > MAX_INPUT ? input.slice(0, MAX_INPUT) : input;
  // Hidden characters go first: removed after the markup, they could join "<\u202Ea>" into a tag.
  const visible = capped.replace(HIDDEN, (c) => (/\s/u.test(c) ? ' ' : ''));
  // White space that is a control character (tab, line feed) is spacing, not hiding.
  const hidden = visible.replace(SPACES, ' ') !== capped.replace(SPACES, ' ');
  let text = visible;
  let markup = false;
  for (let previous = ''; previous !== text;) {
    previous = text;
    text = text.replace(MARKUP, '');
    if (text !== previous) markup = true;
  }
  text = text.replace(SPACES, ' ').trim();
  const chars = Array.from(text);
  const truncated = chars.length > max || input.length > MAX_INPUT;
  if (chars.length > max) text = `${chars.slice(0, Math.max(0, max - 1)).join('')}…`;
  return { text, markup, hidden, truncated };
}
