/**
 * Undoing an upstream's `Content-Encoding` (RFC 9110 §8.4) before anything of its answer is read,
 * redacted or relayed: a compressed echo of a credential would otherwise pass every check and be
 * inflated by the agent (issue 10, class 12). gzip, deflate and br (zlib is built in); several
 * codings are undone last-applied first; a coding the proxy cannot undo is refused, never passed
 * through. Decoded output is capped, so a small compressed answer cannot expand without bound.
 */
import { Readable, type Transform } from 'node:stream';
import { constants, createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from 'node:zlib';
import { ProtocolError } from '../errors.js';

export type Coding = 'gzip' | 'deflate' | 'br';
/** `deflate` as some servers send it: raw, without the zlib wrapper RFC 9110 §8.4.1.2 asks for. */
type Decoder = Coding | 'deflate-raw';

const CODINGS: Readonly<Record<string, Coding>> = {
  gzip: 'gzip',
  'x-gzip': 'gzip',
  deflate: 'deflate',
  br: 'br',
};

/** The codings to undo, in the order to undo them; throws for one the proxy cannot undo. */
export function contentCodings(header: string | string[] | undefined): Coding[] {
  const value = Array.isArray(header) ? header.join(',') : (header ?? '');
  const out: Coding[] = [];
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name === '' || name === 'identity') continue;
    const coding = CODINGS[name];
    if (coding === undefined) {
      throw new ProtocolError(
        'upstream_error',
        `The upstream answered in a content coding the proxy cannot decode (${name.slice(0, 32)}), so it withheld the answer.`,
      );
    }
    out.push(coding);
  }
  return out.reverse();
}

/**
 * `truncated`: the body was cut short on purpose (an error body read up to its cap), so decoding
 * what arrived is enough; otherwise a corrupt or cut stream is an upstream error. The decoded
 * bytes are cut at `maxBytes` when `truncated`, else more than `maxBytes` is an error.
 */
export async function decodeBody(
  body: Buffer,
  codings: readonly Coding[],
  maxBytes: number,
  truncated: boolean,
): Promise<Buffer> {
  let bytes = body;
  for (const coding of codings) {
    if (bytes.length === 0) break;
    try {
      bytes = await decodeOne(bytes, coding, maxBytes, truncated);
    } catch (err) {
      if (coding !== 'deflate' || !(err instanceof DecodeError)) throw err;
      bytes = await decodeOne(bytes, 'deflate-raw', maxBytes, truncated);
    }
  }
  return bytes;
}

class DecodeError extends ProtocolError {}

async function decodeOne(
  input: Buffer,
  coding: Decoder,
  maxBytes: number,
  truncated: boolean,
): Promise<Buffer> {
  const decoder = decoderFor(coding, truncated);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    Readable.from([input]).pipe(decoder);
    for await (const chunk of decoder) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > maxBytes) {
        decoder.destroy();
        if (!truncated) throw tooLarge(maxBytes);
        chunks.push(buf.subarray(0, buf.length - (size - maxBytes)));
        size = maxBytes;
        break;
      }
      chunks.push(buf);
    }
  } catch (err) {
    if (err instanceof ProtocolError) throw err;
    // A cut-short error body may end mid-stream: keep what decoded.
    if (!truncated) {
      throw new DecodeError(
        'upstream_error',
        `The upstream's ${coding.replace('-raw', '')} answer could not be decoded.`,
      );
    }
  }
  return Buffer.concat(chunks, size);
}

/** A decoding stream for a relayed body (event streams); bounded by its consumer's pace. */
export function decodingStream(codings: readonly Coding[]): Transform[] {
  return codings.map((c) => decoderFor(c, false));
}

function decoderFor(coding: Decoder, lenient: boolean): Transform {
  if (coding === 'br') {
    return createBrotliDecompress(lenient ? { finishFlush: constants.BROTLI_OPERATION_FLUSH } : {});
  }
  const options = lenient ? { finishFlush: constants.Z_SYNC_FLUSH } : {};
  if (coding === 'gzip') return createGunzip(options);
  return coding === 'deflate' ? createInflate(options) : createInflateRaw(options);
}

function tooLarge(maxBytes: number): ProtocolError {
  return new ProtocolError('upstream_error', `The upstream response exceeds ${maxBytes} bytes once decoded.`);
}
