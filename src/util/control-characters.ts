/**
 * The C0 controls and DEL. No identifier this server issues or accepts holds one, and
 * PostgreSQL's `text` cannot hold a NUL: a value from a request that names a stored row is checked
 * with `hasControlCharacter` before any lookup, and a label kept from one is made `printable`.
 */
// eslint-disable-next-line no-control-regex -- these are the characters meant
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
// eslint-disable-next-line no-control-regex -- the same, every occurrence
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}

/** `text` with each control character replaced by U+FFFD. */
export function printable(text: string): string {
  return text.replace(CONTROL_CHARACTERS, '\ufffd');
}

/**
 * A UTF-16 surrogate that is not half of a pair (with the `u` flag, `\p{Cs}` matches only those):
 * no text, with no UTF-8 form. Buffer and PostgreSQL's driver write it as U+FFFD, so two values
 * differing only there would be one once stored or sent.
 */
const LONE_SURROGATE = /\p{Cs}/u;

export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}
