/**
 * readJsonText (src/openapi/json-text.ts): a JSON file's text held one byte a character, with its
 * characters past Latin-1 escaped, parses to exactly what its bytes decoded as UTF-8 parse to,
 * wherever the pieces it is read in are cut.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serialize } from 'node:v8';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonText } from '../../../src/openapi/json-text.js';

const dir = mkdtempSync(join(tmpdir(), 'aap-json-text-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'doc.json');
const BOM = Buffer.of(0xef, 0xbb, 0xbf);

/** JSON.parse's value or its failure, as something toEqual compares. */
function parsed(text: string): unknown {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return 'not JSON';
  }
}

/** V8's serializer tags a string held one byte a character with `"` (0x22), else with `c`. */
function isOneByte(text: string): boolean {
  return serialize(text)[2] === 0x22;
}

/** What JSON.parse made of the file before: its bytes decoded as UTF-8, without a byte order mark. */
function decoded(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function read(bytes: Buffer, chunkBytes?: number): ReturnType<typeof readJsonText> {
  writeFileSync(file, bytes);
  return readJsonText(file, { digest: true, ...(chunkBytes === undefined ? {} : { chunkBytes }) });
}

describe('readJsonText', () => {
  it('parses to the same document as the decoded text, in a string of one byte a character', () => {
    const doc = { info: { title: 'Notes — “quoted”', description: 'café, 東京, 😀, naïve' }, paths: {} };
    const bytes = Buffer.from(JSON.stringify(doc, null, 2), 'utf8');
    expect(isOneByte(decoded(bytes))).toBe(false);
    const { text, sha256 } = read(bytes);
    expect(isOneByte(text)).toBe(true);
    expect(JSON.parse(text)).toEqual(doc);
    expect(sha256).toBe(createHash('sha256').update(bytes).digest('base64'));
    // Without being asked for, no digest (the CLI's one-shot loads hash nothing).
    expect(readJsonText(file).sha256).toBeUndefined();
  });

  it('drops a byte order mark, and only a leading one', () => {
    const bytes = Buffer.from('{"a":"\u00e9"}', 'utf8');
    expect(JSON.parse(read(Buffer.concat([BOM, bytes])).text)).toEqual({ a: 'é' });
    // Inside the document it is a character like another: there it makes the JSON invalid.
    expect(parsed(read(Buffer.concat([Buffer.from(' '), BOM, bytes])).text)).toBe('not JSON');
    // The six characters `\ufeff` are no byte order mark.
    expect(parsed(read(Buffer.from(`\\ufeff${bytes.toString('utf8')}`)).text)).toBe('not JSON');
  });

  it('for any JSON document and any cut of its pieces, parses to what its decoded text does', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 3 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 17 }),
        (value, bom, chunkBytes) => {
          const bytes = Buffer.from(JSON.stringify(value), 'utf8');
          const whole = bom ? Buffer.concat([BOM, bytes]) : bytes;
          const { text } = read(whole, chunkBytes);
          expect(isOneByte(text)).toBe(true);
          expect(parsed(text)).toEqual(parsed(decoded(whole)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('for any bytes in a string, bad UTF-8 among them, parses to the same U+FFFD replacements', () => {
    // Control characters, quotes and backslashes would end or escape the string; anything else goes.
    const stringByte = fc.integer({ min: 0x20, max: 0xff }).filter((b) => b !== 0x22 && b !== 0x5c);
    fc.assert(
      fc.property(
        fc.array(stringByte, { maxLength: 40 }),
        fc.integer({ min: 1, max: 9 }),
        (inner, chunkBytes) => {
          const bytes = Buffer.concat([Buffer.from('{"s":"'), Buffer.from(inner), Buffer.from('"}')]);
          const { text, sha256 } = read(bytes, chunkBytes);
          expect(parsed(text)).toEqual(parsed(decoded(bytes)));
          expect(sha256).toBe(createHash('sha256').update(bytes).digest('base64'));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reads a run of bytes past ASCII longer than its pieces whole', () => {
    const long = '東'.repeat(50);
    const { text } = read(Buffer.from(JSON.stringify({ long }), 'utf8'), 4);
    expect(JSON.parse(text)).toEqual({ long });
  });
});
