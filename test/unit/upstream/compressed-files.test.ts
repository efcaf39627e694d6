/**
 * Compressed files among binary answers (compressed-files.ts). Regression: an
 * `application/gzip` answer holding the key was handed over in base64 unchecked, and the agent
 * inflated it.
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { checkFile, fileCoding } from '../../../src/upstream/compressed-files.js';

const KEY = Buffer.from('sk-live-9f8e7d6c5b4a3210zyxw');
const holdsKey = (bytes: Buffer): boolean => bytes.includes(KEY);
const file = (inside: Buffer): Buffer =>
  Buffer.concat([Buffer.from('{"headers":{"x-api-key":"'), inside, Buffer.from('"}}')]);

describe('fileCoding', () => {
  it.each([
    ['application/gzip', 'gzip'],
    ['application/x-gzip', 'gzip'],
    ['application/zlib', 'deflate'],
    ['application/x-brotli', 'br'],
  ])('%s → %s', (type, coding) => {
    expect(fileCoding(type, Buffer.from('anything'))).toBe(coding);
  });

  it('gzip by its first bytes, whatever the type says; other binary bodies are no file', () => {
    expect(fileCoding('application/octet-stream', gzipSync(Buffer.from('x')))).toBe('gzip');
    expect(fileCoding('image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47]))).toBeUndefined();
    expect(fileCoding('application/zip', Buffer.from('PK\x03\x04'))).toBeUndefined();
  });
});

describe('checkFile', () => {
  it.each([
    ['gzip', gzipSync] as const,
    ['deflate', deflateSync] as const,
    ['br', brotliCompressSync] as const,
  ])('%s holding the key → secret; without it → clean', async (coding, compress) => {
    expect(await checkFile(compress(file(KEY)), coding, 1 << 20, holdsKey)).toBe('secret');
    expect(await checkFile(compress(file(Buffer.from('other'))), coding, 1 << 20, holdsKey)).toBe('clean');
  });

  it('gzip inside gzip is undone layer by layer; past four layers it is unchecked', async () => {
    let packed = gzipSync(file(KEY));
    for (let i = 0; i < 3; i++) packed = gzipSync(packed);
    expect(await checkFile(packed, 'gzip', 1 << 20, holdsKey)).toBe('secret');
    expect(await checkFile(gzipSync(packed), 'gzip', 1 << 20, holdsKey)).toBe('unchecked');
  });

  it('more than the cap once decoded → unchecked; a cut file is checked as far as it decodes', async () => {
    expect(await checkFile(gzipSync(Buffer.alloc(4096)), 'gzip', 1024, holdsKey)).toBe('unchecked');
    const whole = gzipSync(Buffer.concat([file(KEY), Buffer.alloc(2048, 'x')]), { level: 0 });
    expect(await checkFile(whole.subarray(0, 200), 'gzip', 1 << 20, holdsKey)).toBe('secret');
  });
});
