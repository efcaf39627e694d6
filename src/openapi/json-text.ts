/**
 * A local JSON document's text for JSON.parse, held one byte a character, and the digest of its
 * bytes. V8 stores a string with two bytes a character as soon as one of its characters lies past
 * Latin-1, and almost every real API document has a few (GitHub's 13 MB has 36 curly quotes and
 * dashes, Microsoft Graph beta's 47 MB has 131), so its text took twice its size while it was
 * parsed, beside the document being built; and that parse is the peak of loading a document.
 * Such characters may stand only inside JSON strings, where a `\uXXXX` escape means exactly the
 * same character (JSON.parse joins two escaped halves of a surrogate pair as it joins the pair),
 * so each goes in as its escape: the parsed document is the same, its text half the size.
 */
import { createHash } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';

export interface JsonText {
  readonly text: string;
  /** SHA-256 of the file's bytes, base64, when asked for: what a reload compares (source-reads.ts). */
  readonly sha256?: string;
}

/**
 * Bytes read at a time, so that no buffer of the whole file stands beside the text. Small enough
 * that each piece of text is an ordinary young object, collected in the heap V8 already holds: in
 * pieces of 1 MiB (large objects, each mapped apart) a reload of Microsoft Graph peaked at
 * 290 MiB, in pieces of 64 KiB at 263-267 MiB (295 MiB before this module).
 */
const CHUNK_BYTES = 64 * 1024;

/** Runs of bytes past ASCII: every byte of a UTF-8 sequence is one, so a run holds whole characters. */
const NON_ASCII_RUNS = /[\x80-\xff]+/g;

/**
 * The file at `path` as JSON text (see oneByteJsonText), without a byte order mark, read
 * `chunkBytes` at a time, and with `digest` the SHA-256 of its bytes. A chunk is cut after its
 * last ASCII byte, so that no run of bytes past ASCII is split; the rest goes to the front of the
 * next one.
 */
export function readJsonText(
  path: string,
  {
    digest = false,
    chunkBytes = CHUNK_BYTES,
  }: { readonly digest?: boolean; readonly chunkBytes?: number } = {},
): JsonText {
  const fd = openSync(path, 'r');
  try {
    const hash = digest ? createHash('sha256') : undefined;
    const pieces: string[] = [];
    let buffer = Buffer.allocUnsafe(chunkBytes);
    let kept = 0;
    let start = -1;
    for (;;) {
      // A run past ASCII longer than the buffer: room for more of it.
      if (kept === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)]);
      const read = readSync(fd, buffer, kept, buffer.length - kept, null);
      hash?.update(buffer.subarray(kept, kept + read));
      const filled = kept + read;
      if (start < 0 && filled < 3 && read > 0) {
        // Too few bytes yet to tell a byte order mark.
        kept = filled;
        continue;
      }
      if (start < 0) start = startsWithBom(buffer, filled) ? 3 : 0;
      const end = read === 0 ? filled : afterLastAscii(buffer, filled);
      if (end > start) pieces.push(oneByteJsonText(buffer.subarray(start, end)));
      if (read === 0) break;
      buffer.copy(buffer, 0, Math.max(end, start), filled);
      kept = filled - Math.max(end, start);
      start = 0;
    }
    const text = pieces.join('');
    return hash ? { text, sha256: hash.digest('base64') } : { text };
  } finally {
    closeSync(fd);
  }
}

/**
 * `bytes` as JSON text (see oneByteJsonText) without a byte order mark, when the first of them
 * past JSON's white space is `{`; else undefined (YAML, or not a document at all).
 */
export function jsonTextOf(bytes: Buffer): string | undefined {
  const start = startsWithBom(bytes, bytes.length) ? 3 : 0;
  let first = start;
  while (first < bytes.length && JSON_WHITE_SPACE.has(bytes[first] as number)) first += 1;
  return bytes[first] === 0x7b ? oneByteJsonText(bytes.subarray(start)) : undefined;
}

/** Space, tab, line feed and carriage return: JSON's white space. */
const JSON_WHITE_SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * The text JSON.parse gives the same value for as for `bytes` decoded as UTF-8 (bytes that are not
 * UTF-8 read as U+FFFD, as decoding does), held one byte a character. Latin-1 read byte for byte
 * is one byte a character, and so is each run's replacement; a run is decoded on its own, which
 * gives what decoding the whole gives, since an ASCII byte ends whatever sequence came before it.
 */
function oneByteJsonText(bytes: Buffer): string {
  return bytes.toString('latin1').replace(NON_ASCII_RUNS, (run) => escaped(Buffer.from(run, 'latin1')));
}

/** Characters past Latin-1 as `\uXXXX` escapes, each UTF-16 unit apart; Latin-1 ones as they are. */
function escaped(run: Buffer): string {
  const text = run.toString('utf8');
  let out = '';
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    out += unit <= 0xff ? text.charAt(i) : `\\u${unit.toString(16).padStart(4, '0')}`;
  }
  return out;
}

function startsWithBom(buffer: Buffer, filled: number): boolean {
  return filled >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf;
}

/** The index after the last ASCII byte of the first `filled` (0 when there is none). */
function afterLastAscii(buffer: Buffer, filled: number): number {
  let end = filled;
  while (end > 0 && (buffer[end - 1] as number) >= 0x80) end -= 1;
  return end;
}
