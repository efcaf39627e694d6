/**
 * Device-flow user codes (§7.1, RFC 8628 §6.1): eight characters from a 20-letter alphabet with no
 * vowels (so no words form) and no look-alikes, shown as "XXXX-XXXX". 20^8 ≈ 2^34.6 codes; brute
 * force is bounded by the approval expiry and rate limits, as RFC 8628 §5.1 asks.
 */
import { randomInt } from 'node:crypto';

const ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const LENGTH = 8;
const ALPHABET_SET: ReadonlySet<string> = new Set(ALPHABET);

/**
 * A fresh code like "WDJB-MJHT", each character drawn uniformly with a CSPRNG. `draw` (an index
 * below its argument) is node:crypto's randomInt; a test passes its own to see every draw.
 */
export function generateUserCode(draw: (below: number) => number = randomInt): string {
  let code = '';
  for (let i = 0; i < LENGTH; i++) code += ALPHABET.charAt(draw(ALPHABET.length));
  return display(code);
}

/**
 * What a user typed → the canonical "XXXX-XXXX", or undefined if it cannot be a code. Case,
 * spaces and dashes are ignored (RFC 8628 §6.1); nothing else is, so "0" is not read as "O".
 */
export function normalizeUserCode(input: string): string | undefined {
  // A bound before any work: the input comes straight from a web form.
  if (input.length > 64) return undefined;
  const compact = input.replace(/[\s-]/g, '');
  // ASCII letters only before uppercasing: "ß".toUpperCase() is "SS", which must not count.
  if (!/^[A-Za-z]{8}$/.test(compact)) return undefined;
  const upper = compact.toUpperCase();
  for (const char of upper) if (!ALPHABET_SET.has(char)) return undefined;
  return display(upper);
}

function display(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}
