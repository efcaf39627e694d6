/**
 * Reads a byte stream to its end, keeping at most `maxBytes`. Listeners rather than `for await`:
 * the async iterator allocates promises per chunk and showed in the execute benchmark's profile,
 * where every execution reads two bodies (the agent's request and the upstream's answer).
 */
import type { Readable } from 'node:stream';

export interface ReadBytes {
  readonly bytes: Buffer;
  /**
   * The stream held more than `maxBytes`: `bytes` is its first `maxBytes`, and the stream was
   * destroyed (or, with `keepOpen`, paused).
   */
  readonly over: boolean;
}

/** Rejects with the stream's error, or ERR_STREAM_PREMATURE_CLOSE if it closed before its end. */
export function readStream(
  stream: Readable,
  maxBytes: number,
  options: { keepOpen?: boolean } = {},
): Promise<ReadBytes> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > maxBytes) {
        chunks.push(chunk.subarray(0, maxBytes - size));
        size = maxBytes;
        settle();
        // The rest is not read. A request's body is only paused: destroying it would take the
        // socket, and with it the answer (413), with it; that answer closes the connection.
        if (options.keepOpen) stream.pause();
        // Some streams (undici's bodies) report being destroyed unread as an error: expected here.
        else stream.on('error', ignore).destroy();
        resolve({ bytes: Buffer.concat(chunks, size), over: true });
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      settle();
      resolve({
        bytes: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size),
        over: false,
      });
    };
    const onError = (err: Error): void => {
      settle();
      reject(err);
    };
    const onClose = (): void => {
      settle();
      reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    if (stream.readableEnded) {
      resolve({ bytes: Buffer.alloc(0), over: false });
      return;
    }
    if (stream.destroyed) {
      onClose();
      return;
    }
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

function ignore(): void {}

/**
 * The whole of `stream` when all of it is buffered already: the `length` bytes a Content-Length
 * declared, or everything once `ended` (the message is through the parser). A small body mostly
 * arrives with its head, and is then taken at once, with no listeners, promise or turn of the
 * event loop. The stream is set flowing afterwards, so it still ends and closes even if its end
 * was not pushed yet. Undefined while some of it is still to come.
 */
export function takeBuffered(stream: Readable, length: number, ended = false): Buffer | undefined {
  if (stream.readableFlowing === true) return undefined;
  if (!ended && !(Number.isSafeInteger(length) && stream.readableLength === length)) return undefined;
  const chunks: Buffer[] = [];
  for (let chunk: unknown = stream.read(); chunk !== null; chunk = stream.read())
    chunks.push(chunk as Buffer);
  stream.resume();
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}

/** A Content-Length header's value as a number; NaN when absent or not one value. */
export function declaredLength(header: string | string[] | undefined): number {
  return typeof header === 'string' ? Number(header) : NaN;
}
