/**
 * `JSON.stringify(value, null, 2)` handed out as many small pieces instead of one string, for text
 * too large to make at once (`capabilities --json`). V8 keeps a string over 128 KiB (64 Ki
 * characters past Latin-1) among its large objects, which only a full collection frees: writing
 * Microsoft Graph beta's 2.4 GB of capabilities one string each left hundreds of MiB of them
 * waiting for one. Pieces this small die young, in collections that cost next to nothing.
 *
 * Containers (arrays, and objects of Object's or no prototype) are split down to SPLIT_LEVELS
 * levels; anything deeper, and any other object (a Date, a class instance, what a `toJSON` gave),
 * is one `JSON.stringify`, its lines indented to where it stands. The text is byte for byte
 * `JSON.stringify`'s, but for a `toJSON` that returns an object with a `toJSON` of its own, which
 * is called too.
 *
 * Not @discoveryjs/json-ext's `stringifyChunked`, which gives the same text in chunks: it walks
 * every value in JavaScript, where this hands all below SPLIT_LEVELS to the native
 * `JSON.stringify`; for Microsoft Graph's 780 MB listing, 5.0 s against 3.9 s (one process each,
 * same catalog, text hashed rather than written).
 */

/** Levels of nesting split into pieces; deeper values are stringified whole. */
const SPLIT_LEVELS = 6;

/** Emits `value` as JSON indented by two spaces a level, starting `level` levels deep. */
export function emitJson(value: unknown, emit: (piece: string) => void, level = 0): void {
  const text = wholeText(value, level);
  if (text === null) emitContainer(value as Container, emit, level);
  else emit(text ?? 'null');
}

type Container = Record<string, unknown> | unknown[];

/**
 * The text of a value stringified whole where it stands (undefined when JSON has none: undefined,
 * a function, a symbol), or null for a container to split.
 */
function wholeText(value: unknown, level: number): string | undefined | null {
  // Most values are strings, numbers and booleans, whose text has no line to indent.
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  if (level < SPLIT_LEVELS && isPlainContainer(value)) return null;
  return indented(JSON.stringify(value, null, 2), level);
}

function emitContainer(value: Container, emit: (piece: string) => void, level: number): void {
  const inner = `\n${'  '.repeat(level + 1)}`;
  let first = true;
  const each = (raw: unknown, key: string | undefined, index: number): void => {
    // As JSON.stringify does, `toJSON` is given the member's key (an array item's index).
    const member = hasToJson(raw) ? raw.toJSON(key ?? String(index)) : raw;
    const text = wholeText(member, level + 1);
    if (text === undefined && key !== undefined) return; // an object leaves such a member out
    const lead = first ? (key === undefined ? '[' : '{') : ',';
    emit(key === undefined ? `${lead}${inner}` : `${lead}${inner}${JSON.stringify(key)}: `);
    first = false;
    if (text === null) emitContainer(member as Container, emit, level + 1);
    else emit(text ?? 'null'); // an array writes it as null
  };
  if (Array.isArray(value)) value.forEach((item, i) => each(item, undefined, i));
  else Object.keys(value).forEach((key, i) => each(value[key], key, i));
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  emit(first ? `${open}${close}` : `\n${'  '.repeat(level)}${close}`);
}

/** An array, or an object of Object's (or no) prototype without `toJSON`. */
function isPlainContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  if (Array.isArray(value)) return true;
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && !('toJSON' in value);
}

function hasToJson(value: unknown): value is { toJSON: (key: string) => unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  );
}

/** `text` (JSON.stringify's, indented from level 0) as it reads `level` levels deep. */
function indented(text: string | undefined, level: number): string | undefined {
  if (text === undefined || level === 0) return text;
  return text.replaceAll('\n', `\n${'  '.repeat(level)}`);
}
