/**
 * §8.10: "Servers SHOULD warn users when display names resemble well-known brands or services
 * (e.g. homoglyph detection)." Two checks on a name an agent chose (its own or its host's); pure.
 *
 * Mixed scripts (after NFKC and removal of invisible characters, src/lookalike.ts): a word whose
 * letters come from more than one script, like `Pаypal` with a Cyrillic `а`. Letters of the
 * Common and Inherited scripts (digits, marks) do not count. The mixes UTS #39 "highly
 * restrictive" allows stay quiet: Latin with Han, Hiragana and Katakana (Japanese), Latin with
 * Han and Bopomofo, Latin with Han and Hangul. Scripts not in SCRIPTS all count as one, "other".
 *
 * Brands: the name is reduced to a skeleton and its words compared with each brand's skeleton.
 *  1. NFKC, invisible characters removed; camelCase split into words (`PayPal` → `Pay Pal`).
 *  2. Letters that look like Latin letters become them (CONFUSABLES: Cyrillic `а`, Greek `ο`,
 *     Cherokee `Ꮪ`, dotless `ı` …), then `0`→o, `1`→l, `3`→e, `5`→s, `$`→s, `@`→a, `|`→l.
 *  3. Case folded (src/lookalike.ts fold), `rn`→m and `vv`→w, split into words of letters and
 *     digits.
 *  4. A brand matches when one word, or up to four adjacent words joined (`Pay Pal`, `git-hub`),
 *     equals its skeleton; or starts with it, for brands of 5 letters or more (`appleid`); or is
 *     one edit (insert, delete, replace, swap) from it, for brands of 6 letters or more
 *     (`Gooogle`, `Micorsoft`).
 * A match is a `mention` when the plain folded name already spells the brand (step 4 without
 * steps 2 and the edit rule); otherwise the name `resembles` it (a disguise).
 */
import { fold } from '../lookalike.js';

/** Well-known names agents may borrow to look trustworthy; the service's own name is added. */
export const WELL_KNOWN_BRANDS: readonly string[] = [
  'Amazon',
  'Anthropic',
  'Apple',
  'AWS',
  'Dropbox',
  'Facebook',
  'GitHub',
  'Google',
  'Mastercard',
  'Meta',
  'Microsoft',
  'Netflix',
  'Okta',
  'OpenAI',
  'PayPal',
  'Slack',
  'Stripe',
  'Visa',
  'WhatsApp',
];

const SCRIPTS = [
  'Latin',
  'Greek',
  'Cyrillic',
  'Armenian',
  'Georgian',
  'Cherokee',
  'Hebrew',
  'Arabic',
  'Thai',
  'Devanagari',
  'Han',
  'Hiragana',
  'Katakana',
  'Hangul',
  'Bopomofo',
] as const;
const SCRIPT_TESTS = SCRIPTS.map((name) => [name, new RegExp(`^\\p{Script=${name}}$`, 'u')] as const);
const NEUTRAL = /^[\p{Script=Common}\p{Script=Inherited}]$/u;

/** UTS #39 highly restrictive: the only mixes of scripts one word may have. */
const ALLOWED_MIXES: readonly ReadonlySet<string>[] = [
  new Set(['Latin', 'Han', 'Hiragana', 'Katakana']),
  new Set(['Latin', 'Han', 'Bopomofo']),
  new Set(['Latin', 'Han', 'Hangul']),
];

const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/gu;
const WORD_SEPARATORS = /[^\p{L}\p{M}\p{N}]+/u;

function visible(text: string): string {
  return text.normalize('NFKC').replace(INVISIBLE, '');
}

/** The scripts of a word's letters, in order of first appearance. */
export function scriptsOf(word: string): string[] {
  const found = new Set<string>();
  for (const char of word) {
    if (!/\p{L}/u.test(char) || NEUTRAL.test(char)) continue;
    found.add(SCRIPT_TESTS.find(([, test]) => test.test(char))?.[0] ?? 'other');
  }
  return [...found];
}

export interface MixedWord {
  readonly word: string;
  readonly scripts: readonly string[];
}

/** The words of `text` that mix scripts beyond what UTS #39 "highly restrictive" allows. */
export function mixedScriptWords(text: string): MixedWord[] {
  const out: MixedWord[] = [];
  for (const word of visible(text).split(WORD_SEPARATORS)) {
    const scripts = scriptsOf(word);
    if (scripts.length < 2) continue;
    if (ALLOWED_MIXES.some((allowed) => scripts.every((s) => allowed.has(s)))) continue;
    out.push({ word, scripts });
  }
  return out;
}

/**
 * Letters of other scripts (and Latin variants) that read as a Latin letter, as pairs "look-alike,
 * letter" (a small, hand-picked subset of Unicode's confusables.txt), then digits and symbols
 * people read as letters.
 */
const CONFUSABLE_PAIRS = [
  // Cyrillic
  'АA ВB ЕE КK МM НH ОO РP СC ТT ХX УY ЅS ІI ЈJ ԚQ ԜW ҮY Ӏl',
  'аa еe ёe оo рp сc уy хx ѕs іi їi јj ԁd һh ӏl ԛq ԝw кk үy',
  // Greek
  'ΑA ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX αa ιi κk νv οo ρp τt υu χx ωw εe',
  // Armenian
  'օo սu ցg հh ոn ՕO ՍU',
  // Cherokee capitals
  'ᎪA ᏴB ᏟC ᎠD ᎬE ᏀG ᎻH Ꭵi ᏦK ᏞL ᎷM ᏢP ᏚS ᎢT ᏙV ᎳW ᏃZ',
  // Latin variants, digits and symbols
  'ıi ɩi ɪi ʟl ᴏo ɡg 0o 1l 3e 5s $s @a |l',
];
const CONFUSABLES: ReadonlyMap<string, string> = new Map(
  CONFUSABLE_PAIRS.join(' ')
    .split(' ')
    .map((pair) => [pair.slice(0, -1), pair.slice(-1)] as const),
);

/** The words of a name, each reduced to its skeleton (steps 1–3 above). */
export function skeletonWords(
  text: string,
  options: { confusables: boolean } = { confusables: true },
): string[] {
  let t = visible(text).replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2');
  if (options.confusables) t = Array.from(t, (c) => CONFUSABLES.get(c) ?? c).join('');
  t = fold(t);
  if (options.confusables) t = t.replace(/rn/g, 'm').replace(/vv/g, 'w');
  return t.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
}

/** A brand's skeleton: its words joined. */
function brandKey(brand: string): string {
  return skeletonWords(brand).join('');
}

/** Every run of one to four adjacent words, joined. */
function candidates(words: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    for (let n = 1; n <= 4 && i + n <= words.length; n++) out.push(words.slice(i, i + n).join(''));
  }
  return out;
}

/** Optimal string alignment distance, stopped early once above 1 (all this module needs). */
function withinOneEdit(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  const x = Array.from(a);
  const y = Array.from(b);
  let i = 0;
  while (i < x.length && i < y.length && x[i] === y[i]) i++;
  const rest = (p: string[], q: string[]): boolean => p.join('') === q.join('');
  return (
    rest(x.slice(i + 1), y.slice(i + 1)) || // replace (or equal)
    rest(x.slice(i + 1), y.slice(i)) || // delete from a
    rest(x.slice(i), y.slice(i + 1)) || // insert into a
    (x[i] === y[i + 1] && x[i + 1] === y[i] && rest(x.slice(i + 2), y.slice(i + 2))) // swap
  );
}

function matches(candidate: string, key: string, fuzzy: boolean): boolean {
  if (candidate === key) return true;
  if (key.length >= 5 && candidate.startsWith(key)) return true;
  return fuzzy && key.length >= 6 && withinOneEdit(candidate, key);
}

export interface BrandMatch {
  readonly brand: string;
  /** `mention`: the name spells the brand; `resembles`: only after lookalikes are folded. */
  readonly how: 'mention' | 'resembles';
}

/** The brands `name` mentions or resembles, each once, in the order of `brands`. */
export function brandMatches(name: string, brands: readonly string[]): BrandMatch[] {
  const plain = candidates(skeletonWords(name, { confusables: false }));
  const disguised = candidates(skeletonWords(name));
  const out: BrandMatch[] = [];
  const seen = new Set<string>();
  for (const brand of brands) {
    const key = brandKey(brand);
    // One warning per name however often it is listed (an operator's name may be a built-in one).
    if (key.length < 3 || seen.has(key)) continue;
    seen.add(key);
    if (plain.some((c) => matches(c, key, false))) out.push({ brand, how: 'mention' });
    else if (disguised.some((c) => matches(c, key, true))) out.push({ brand, how: 'resembles' });
  }
  return out;
}
