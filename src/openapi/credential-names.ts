/**
 * Which parameter names stand for a credential of the API. A server may read a name in more than
 * one spelling: case-insensitively (many frameworks do for query strings), percent-decoded once or
 * twice, form-decoded (`+` as a space), with stray whitespace trimmed, and for headers CGI's `_`
 * for `-` (PHP, WSGI, Rack read `X_Api_Key` as `X-Api-Key`). Query and cookie names are read as
 * parameterAlias reads them (PHP's `.`/space as `_`, a NUL ending the name, Rack's brackets), so
 * that `Cookie: session.id=…` cannot stand in for the credential cookie `session_id`. Every such
 * spelling of a credential name is the credential.
 */
import { fold } from '../lookalike.js';
import type { ParameterLocation, SecuritySchemeInfo } from './types.js';

// Enough rounds for a name encoded twice over (`%255F`); bounded so a hostile name costs nothing.
const DECODE_ROUNDS = 3;
const BRACKETS = /(?:\[[^\]]*\])+$/;

/** The spelling-independent key of a parameter name in one location. */
export function nameKey(location: ParameterLocation, name: string): string {
  let key = name;
  for (let i = 0; i < DECODE_ROUNDS; i++) {
    const decoded = formDecode(key);
    if (decoded === key) break;
    key = decoded;
  }
  if (location !== 'header') return parameterAlias(key);
  return key.trim().toLowerCase().replace(BRACKETS, '').trim().replaceAll('_', '-');
}

const LEADING_BRACKETS = /^[[\]]+/;
const BRACKET = /[[\]]/;

/**
 * The name a server may read a (decoded) query, body or cookie name as, matched after lookalike
 * folding (src/lookalike.ts) with `.` or white space read as `_`, and read up to what servers stop
 * at. Each rule is a framework's:
 * - PHP turns `.` and spaces in a request variable's name into `_` and skips leading spaces
 *   (`session.id` is `$_COOKIE['session_id']`, `_method` may be spelt `.method`);
 * - PHP reads the decoded name as a C string: a NUL ends it (`amount%00x` is `amount`);
 * - brackets: leading ones skipped, then the name up to the first `[` or `]` (Rack's
 *   `\A[\[\]]*([^\[\]]+)`: `]amount`, `[amount]`, `amount[x]` and `amount[]` are all `amount`; PHP
 *   and qs read the suffixed ones so too).
 */
export function parameterAlias(name: string): string {
  const nul = name.indexOf('\u0000');
  const unbracketed = (nul >= 0 ? name.slice(0, nul) : name).trimStart().replace(LEADING_BRACKETS, '');
  const bracket = unbracketed.search(BRACKET);
  const base = bracket >= 0 ? unbracketed.slice(0, bracket) : unbracketed;
  return fold(base).replace(/[.\s]/g, '_');
}

/** The keys of the API's apiKey credential names in `location`. */
export function credentialKeys(
  location: ParameterLocation,
  schemes: Readonly<Record<string, SecuritySchemeInfo>>,
): ReadonlySet<string> {
  const keys = new Set<string>();
  for (const s of Object.values(schemes)) {
    if (s.type === 'apiKey' && s.in === location && s.name) keys.add(nameKey(location, s.name));
  }
  return keys;
}

function formDecode(text: string): string {
  const spaced = text.replaceAll('+', ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    // A stray `%`: decode what can be decoded, keep the rest.
    return spaced.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run;
      }
    });
  }
}
