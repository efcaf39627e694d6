/**
 * Compressed files among binary answers (issue 10, class 12). A gzip, zlib or brotli file that is
 * the answer itself (not a Content-Encoding, which answers.ts undoes before anything is read)
 * reaches the agent in the base64 envelope, and the agent inflates it: its compressed bytes say
 * nothing of what it holds. So it is decoded here, within max_response_bytes, and its bytes are
 * checked as every other binary answer is. Formats that compress inside a container (zip and those
 * built on it, 7z, xz, bzip2, zstd, PDF streams) are not opened: the README says so.
 */
import { type Coding, decodeBody } from './content-coding.js';

const FILE_CODINGS: Readonly<Record<string, Coding>> = {
  'application/gzip': 'gzip',
  'application/x-gzip': 'gzip',
  'application/zlib': 'deflate',
  'application/x-deflate': 'deflate',
  'application/x-brotli': 'br',
  'application/brotli': 'br',
};

// A gzip file inside a gzip file is inflated by the agent as readily: a few layers are undone,
// and anything still compressed past them is not checked, so it is withheld.
const MAX_LAYERS = 4;

/** What checking a compressed file found. */
export type FileCheck = 'clean' | 'secret' | 'unchecked';

/**
 * The coding a binary answer is a compressed file in: by its media type (essence), or by a gzip
 * member's first bytes whatever the type says (`application/octet-stream` is inflated as
 * readily). Undefined for anything else: the common binary answer costs three byte reads.
 */
export function fileCoding(type: string, body: Buffer): Coding | undefined {
  return FILE_CODINGS[type] ?? (isGzip(body) ? 'gzip' : undefined);
}

/**
 * Decodes a compressed file (layer after layer, while it is still gzip) and looks for a secret in
 * what it holds with `holdsSecret`. `unchecked`: more than `maxBytes` once decoded, or compressed
 * more deeply than MAX_LAYERS, so not all of it could be looked at. A corrupt or cut file is
 * checked as far as it decodes, which is as far as the agent could decode it too.
 */
export async function checkFile(
  body: Buffer,
  coding: Coding,
  maxBytes: number,
  holdsSecret: (bytes: Buffer) => boolean,
): Promise<FileCheck> {
  let bytes = body;
  let next: Coding | undefined = coding;
  for (let layer = 0; next !== undefined; layer++) {
    if (layer === MAX_LAYERS) return 'unchecked';
    bytes = await decodeBody(bytes, [next], maxBytes + 1, true);
    if (bytes.length > maxBytes) return 'unchecked';
    if (holdsSecret(bytes)) return 'secret';
    next = isGzip(bytes) ? 'gzip' : undefined;
  }
  return 'clean';
}

/** RFC 1952 §2.3.1: ID1, ID2, and CM 8 (deflate), the only method there is. */
function isGzip(bytes: Buffer): boolean {
  return bytes.length >= 3 && bytes[0] === 0x1f && bytes[1] === 0x8b && bytes[2] === 8;
}
