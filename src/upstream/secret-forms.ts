/**
 * The spellings a service credential may come back in from an upstream (issue 10, class 12), and
 * finding them in text. Two kinds of spelling:
 * - literal forms, searched as they are: as sent; percent-, form- and JSON-escaped (PHP's `\/`,
 *   Python's `\uXXXX`, JSON inside JSON); base64 and base64url at each of the three byte
 *   alignments it can sit at inside a longer encoded blob; hex in either case;
 * - any mix of per-character escapes (`%XX`, `\uXXXX`, `\xXX`, `\"`…), found by decoding the
 *   text into a byte view (twice, for an escape inside an escape) and searching the secret's bytes
 *   there, each view byte remembering which characters of the text it came from.
 * Pure: no I/O, no configuration.
 */

/** One secret's forms, computed once. */
export interface SecretForms {
  /** Searched in text as they are; also what a binary body is checked for. */
  readonly literal: readonly string[];
  /** Searched in the decoded byte view (latin1 strings: one character per byte). */
  readonly bytes: readonly string[];
}

export function secretForms(secret: string): SecretForms {
  const utf8 = Buffer.from(secret, 'utf8');
  const json = JSON.stringify(secret).slice(1, -1);
  const base64 = base64Cores(utf8);
  const hex = utf8.toString('hex');
  const encoded = [...base64, hex, hex.toUpperCase()];
  return {
    literal: unique([
      secret,
      encodeURIComponent(secret),
      new URLSearchParams({ s: secret }).toString().slice(2),
      json,
      json.replaceAll('/', '\\/'),
      json.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
      JSON.stringify(json).slice(1, -1),
      ...encoded,
    ]),
    bytes: unique([
      utf8.toString('latin1'),
      Buffer.from(json, 'utf8').toString('latin1'),
      Buffer.from(json.replaceAll('/', '\\/'), 'utf8').toString('latin1'),
      ...encoded,
    ]),
  };
}

/**
 * The base64 characters that depend on the secret's bytes alone, at each alignment (0, 1 or 2
 * bytes before it inside a longer blob), in the standard and URL-safe alphabets. A character that
 * mixes in a neighbouring byte is left out, so each core matches wherever the secret sits.
 */
function base64Cores(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let k = 0; k < 3; k++) {
    const text = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64');
    const core = text.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6));
    out.push(core, core.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return out;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values.filter((v) => v !== ''))];
}

/** `[start, end)` ranges of `text` that hold a secret in some form. */
export function secretRanges(text: string, forms: readonly SecretForms[]): [number, number][] {
  // No secret (an API without credentials): no escape views of the text to build.
  if (forms.length === 0) return [];
  const ranges: [number, number][] = [];
  for (const f of forms) {
    for (const form of f.literal) {
      for (let i = text.indexOf(form); i !== -1; i = text.indexOf(form, i + 1)) {
        ranges.push([i, i + form.length]);
      }
    }
  }
  if (!MAY_ESCAPE.test(text)) return ranges;
  // Escapes inside escapes (JSON in JSON, a percent-encoded JSON string) take a second round.
  // Most answers hold no secret: a quick decoding (native replace) finds that out, and only a hit
  // pays for the view that maps each byte back to the text.
  const quick: string[] = [];
  let last = text;
  for (let round = 0; round < VIEW_ROUNDS; round++) {
    last = quickView(last, round > 0);
    quick.push(last);
    if (!MAY_ESCAPE.test(last)) break;
  }
  if (!quick.some((q) => forms.some((f) => f.bytes.some((form) => q.includes(form))))) return ranges;
  let view = decodeView(text, false);
  for (let round = 0; round < quick.length; round++) {
    if (round > 0) view = compose(view, decodeView(view.text, true));
    for (const f of forms) {
      for (const form of f.bytes) {
        for (let i = view.text.indexOf(form); i !== -1; i = view.text.indexOf(form, i + 1)) {
          ranges.push([view.starts[i] as number, view.ends[i + form.length - 1] as number]);
        }
      }
    }
  }
  return ranges;
}

const ESCAPE =
  /%([0-9A-Fa-f]{2})|\\u([dD][89abAB][0-9A-Fa-f]{2})\\u([dD][c-fC-F][0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})|\\(["'\\/bfnrt])/g;

/** decodeView's text alone, the same escapes decoded left to right (no positions kept). */
function quickView(text: string, bytesIn: boolean): string {
  const base = bytesIn ? text : Buffer.from(text, 'utf8').toString('latin1');
  return base.replace(
    ESCAPE,
    (_m, pct?: string, high?: string, low?: string, unit?: string, byte?: string, simple?: string) => {
      if (pct !== undefined) return String.fromCharCode(parseInt(pct, 16));
      if (byte !== undefined) return String.fromCharCode(parseInt(byte, 16));
      if (simple !== undefined) return String.fromCharCode(SIMPLE_ESCAPES[simple] as number);
      const cp =
        high !== undefined && low !== undefined
          ? 0x10000 + ((parseInt(high, 16) - 0xd800) << 10) + (parseInt(low, 16) - 0xdc00)
          : parseInt(unit as string, 16);
      return Buffer.from(String.fromCodePoint(cp), 'utf8').toString('latin1');
    },
  );
}

/** `text` with every range replaced by `replacement` (overlapping and touching ranges merged). */
export function replaceRanges(text: string, ranges: [number, number][], replacement: string): string {
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  let [start, end] = ranges[0] as [number, number];
  for (const [s, e] of ranges) {
    if (s <= end) {
      end = Math.max(end, e);
      continue;
    }
    out += text.slice(at, start) + replacement;
    at = end;
    [start, end] = [s, e];
  }
  return out + text.slice(at, start) + replacement + text.slice(end);
}

/**
 * The byte views of `text` with its per-character escapes decoded, one per round (an escape
 * inside an escape takes the second), each byte mapped back to the characters it came from; none
 * when the text holds no escape. For text searched piece by piece (event-redaction.ts), where
 * secretRanges' quick check would not say where a secret's first bytes sit.
 */
export function escapeViews(text: string): View[] {
  if (!MAY_ESCAPE.test(text)) return [];
  const views = [decodeView(text, false)];
  for (let round = 1; round < VIEW_ROUNDS; round++) {
    const last = views[views.length - 1] as View;
    if (!MAY_ESCAPE.test(last.text)) break;
    views.push(compose(last, decodeView(last.text, true)));
  }
  return views;
}

const VIEW_ROUNDS = 2;
/**
 * A per-character escape that could hide part of a secret from the literal forms. `\n`, `\"` and
 * the like alone cannot: a secret JSON-escaped as a whole is a literal form.
 */
const MAY_ESCAPE = /%[0-9A-Fa-f]{2}|\\[ux][0-9A-Fa-f]{2}/;

/** The bytes a text stands for once its escapes are decoded; byte i came from text[starts[i], ends[i]). */
export interface View {
  readonly text: string;
  readonly starts: Uint32Array;
  readonly ends: Uint32Array;
}

const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  '"': 0x22,
  "'": 0x27,
  '\\': 0x5c,
  '/': 0x2f,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
};

/**
 * `bytesIn`: the text is already a byte view (each character one byte); otherwise literal
 * characters are taken as UTF-8, as a secret is sent.
 */
function decodeView(text: string, bytesIn: boolean): View {
  // At most four bytes per UTF-16 unit (a lone surrogate's three, a pair's four for two units).
  const capacity = bytesIn ? text.length : text.length * 3;
  const bytes = new Uint8Array(capacity);
  const starts = new Uint32Array(capacity);
  const ends = new Uint32Array(capacity);
  let n = 0;
  const push = (byte: number, start: number, end: number): void => {
    bytes[n] = byte;
    starts[n] = start;
    ends[n] = end;
    n++;
  };
  const pushCodePoint = (cp: number, start: number, end: number): void => {
    if (cp < 0x80) push(cp, start, end);
    else if (cp < 0x800) {
      push(0xc0 | (cp >> 6), start, end);
      push(0x80 | (cp & 0x3f), start, end);
    } else if (cp < 0x10000) {
      push(0xe0 | (cp >> 12), start, end);
      push(0x80 | ((cp >> 6) & 0x3f), start, end);
      push(0x80 | (cp & 0x3f), start, end);
    } else {
      push(0xf0 | (cp >> 18), start, end);
      push(0x80 | ((cp >> 12) & 0x3f), start, end);
      push(0x80 | ((cp >> 6) & 0x3f), start, end);
      push(0x80 | (cp & 0x3f), start, end);
    }
  };
  for (let i = 0; i < text.length;) {
    const c = text.charCodeAt(i);
    if (c === 0x25 && isHex(text, i + 1, 2)) {
      push(parseInt(text.slice(i + 1, i + 3), 16), i, i + 3);
      i += 3;
      continue;
    }
    if (c === 0x5c && i + 1 < text.length) {
      const next = text[i + 1] as string;
      if (next === 'u' && isHex(text, i + 2, 4)) {
        let cp = parseInt(text.slice(i + 2, i + 6), 16);
        let end = i + 6;
        if (cp >= 0xd800 && cp < 0xdc00 && text.startsWith('\\u', end) && isHex(text, end + 2, 4)) {
          const low = parseInt(text.slice(end + 2, end + 6), 16);
          if (low >= 0xdc00 && low < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            end += 6;
          }
        }
        pushCodePoint(cp, i, end);
        i = end;
        continue;
      }
      if (next === 'x' && isHex(text, i + 2, 2)) {
        push(parseInt(text.slice(i + 2, i + 4), 16), i, i + 4);
        i += 4;
        continue;
      }
      const simple = SIMPLE_ESCAPES[next];
      if (simple !== undefined) {
        push(simple, i, i + 2);
        i += 2;
        continue;
      }
    }
    if (bytesIn || c < 0x80) {
      push(c & 0xff, i, i + 1);
      i += 1;
      continue;
    }
    const cp = text.codePointAt(i) as number;
    const width = cp > 0xffff ? 2 : 1;
    pushCodePoint(cp, i, i + width);
    i += width;
  }
  return {
    text: Buffer.from(bytes.buffer, 0, n).toString('latin1'),
    starts: starts.subarray(0, n),
    ends: ends.subarray(0, n),
  };
}

/** A view of a view, mapped back to the original text. */
function compose(outer: View, inner: View): View {
  const starts = new Uint32Array(inner.starts.length);
  const ends = new Uint32Array(inner.ends.length);
  for (let i = 0; i < starts.length; i++) {
    starts[i] = outer.starts[inner.starts[i] as number] as number;
    ends[i] = outer.ends[(inner.ends[i] as number) - 1] as number;
  }
  return { text: inner.text, starts, ends };
}

function isHex(text: string, at: number, count: number): boolean {
  if (at + count > text.length) return false;
  for (let i = at; i < at + count; i++) {
    const c = text.charCodeAt(i);
    const letter = c | 0x20;
    if (!((c >= 0x30 && c <= 0x39) || (letter >= 0x61 && letter <= 0x66))) return false;
  }
  return true;
}
