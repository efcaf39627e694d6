/**
 * Which parameter names stand for a credential of the API. A server may read a name in more than
 * one spelling: case-insensitively (many frameworks do for query strings), percent-decoded once or
 * twice, form-decoded (`+` as a space), with stray whitespace trimmed, PHP/qs bracket notation
 * (`api_key[]` is the `api_key` array), and for headers CGI's `_` for `-` (PHP, WSGI, Rack read
 * `X_Api_Key` as `X-Api-Key`). Every such spelling of a credential name is the credential.
 */
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
  key = key.trim().toLowerCase().replace(BRACKETS, '').trim();
  return location === 'header' ? key.replaceAll('_', '-') : key;
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
