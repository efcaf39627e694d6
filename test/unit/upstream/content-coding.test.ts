import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../../src/errors.js';
import { contentCodings, decodeBody } from '../../../src/upstream/content-coding.js';

const text = Buffer.from('{"key":"sk-live-0123456789"}'.repeat(50));

describe('content codings (issue 10, class 12)', () => {
  it('lists codings to undo, last applied first; identity and blanks are skipped', () => {
    expect(contentCodings('gzip, br')).toEqual(['br', 'gzip']);
    expect(contentCodings(['x-gzip', 'identity'])).toEqual(['gzip']);
    expect(contentCodings(undefined)).toEqual([]);
    expect(contentCodings(' , IDENTITY')).toEqual([]);
  });

  it('refuses a coding it cannot undo', () => {
    for (const c of ['zstd', 'compress', 'gzip, weird'])
      expect(() => contentCodings(c)).toThrow(ProtocolError);
  });

  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['deflate', deflateRawSync],
    ['br', brotliCompressSync],
  ] as const)('decodes %s', async (coding, compress) => {
    expect((await decodeBody(compress(text), contentCodings(coding), 1 << 20, false)).equals(text)).toBe(
      true,
    );
  });

  it('more decoded bytes than the cap: an error, or the first bytes of a body read truncated', async () => {
    const bomb = gzipSync(Buffer.alloc(10 << 20));
    await expect(decodeBody(bomb, ['gzip'], 4096, false)).rejects.toThrow(/exceeds 4096 bytes once decoded/);
    expect((await decodeBody(bomb, ['gzip'], 4096, true)).length).toBe(4096);
  });

  it('a body cut short decodes what arrived when it was cut on purpose, and is an error otherwise', async () => {
    const cut = gzipSync(text).subarray(0, 60);
    const partial = await decodeBody(cut, ['gzip'], 1 << 20, true);
    expect(partial.length).toBeGreaterThan(0);
    expect(text.subarray(0, partial.length).equals(partial)).toBe(true);
    await expect(decodeBody(cut, ['gzip'], 1 << 20, false)).rejects.toThrow(/could not be decoded/);
  });
});
