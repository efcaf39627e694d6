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
  /** The stream came in more than `maxChunks` pieces: stopped there, as for `over`. */
  readonly fragmented?: true;
}

export interface ReadOptions {
  /** Pause, rather than destroy, a stream that is stopped early (a request's body: see onData). */
  readonly keepOpen?: boolean;
  /** The length the stream declared (Content-Length), if any: the buffer is made that size at once. */
  readonly expected?: number;
  /** Pieces to take at most; a stream that sends more is stopped, `fragmented`. */
  readonly maxChunks?: number;
}

/** Rejects with the stream's error, or ERR_STREAM_PREMATURE_CLOSE if it closed before its end. */
export function readStream(
  stream: Readable,
  maxBytes: number,
  options: ReadOptions = {},
): Promise<ReadBytes> {
  return new Promise((resolve, reject) => {
    const bytes = new GrowingBytes(maxBytes, options.expected);
    const maxChunks = options.maxChunks ?? Infinity;
    let chunks = 0;
    const settle = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const stop = (read: ReadBytes): void => {
      settle();
      // The rest is not read. A request's body is only paused: destroying it would take the
      // socket, and with it the answer (413, 400), with it; that answer closes the connection.
      if (options.keepOpen) stream.pause();
      // Some streams (undici's bodies) report being destroyed unread as an error: expected here.
      else stream.on('error', ignore).destroy();
      resolve(read);
    };
    const onData = (chunk: Buffer): void => {
      if (++chunks > maxChunks) {
        stop({ bytes: bytes.take(), over: false, fragmented: true });
        return;
      }
      if (bytes.size + chunk.length > maxBytes) {
        bytes.add(chunk.subarray(0, maxBytes - bytes.size));
        stop({ bytes: bytes.take(), over: true });
        return;
      }
      bytes.add(chunk);
    };
    const onEnd = (): void => {
      settle();
      resolve({ bytes: bytes.take(), over: false });
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

/** The least room made for a body of unknown length; it is then doubled as it grows, within the cap. */
const MIN_CAPACITY = 1024;

/**
 * Bytes appended into one buffer. Each piece is copied as it comes, so none is kept: a body sent
 * in 1-byte pieces (`transfer-encoding: chunked`, `1\r\nX\r\n`) held one Buffer object per byte
 * while it was kept as a list, 195 MB of heap for one unfinished 1 MiB body. A body in one piece,
 * the usual case, is kept as it is, with no copy.
 */
class GrowingBytes {
  #first: Buffer | undefined;
  #buffer: Buffer | undefined;
  #size = 0;

  constructor(
    private readonly maxBytes: number,
    /** A declared length within the cap sizes the buffer once; any other is ignored. */
    private readonly expected = NaN,
  ) {}

  /** Bytes added so far. */
  get size(): number {
    return this.#size;
  }

  add(chunk: Buffer): void {
    if (this.#size === 0 && this.#buffer === undefined) {
      this.#first = chunk;
      this.#size = chunk.length;
      return;
    }
    const needed = this.#size + chunk.length;
    const buffer = this.#roomFor(needed);
    chunk.copy(buffer, this.#size);
    this.#size = needed;
  }

  /** Everything added: the one piece itself, or the part of the buffer in use. */
  take(): Buffer {
    if (this.#buffer !== undefined) return this.#buffer.subarray(0, this.#size);
    return this.#first ?? Buffer.alloc(0);
  }

  /** The buffer, holding what was added and with room for `needed` bytes (at most the cap). */
  #roomFor(needed: number): Buffer {
    const current = this.#buffer;
    if (current !== undefined && current.length >= needed) return current;
    const grown = Buffer.allocUnsafe(this.#capacityFor(needed, current?.length ?? 0));
    (current ?? this.#first)?.copy(grown, 0, 0, this.#size);
    this.#buffer = grown;
    this.#first = undefined;
    return grown;
  }

  #capacityFor(needed: number, current: number): number {
    const { expected, maxBytes } = this;
    if (current === 0 && Number.isSafeInteger(expected) && expected >= needed && expected <= maxBytes)
      return expected;
    // Twice what is needed: copies stay linear in the body's size (each byte is moved about twice).
    return Math.min(maxBytes, Math.max(2 * needed, MIN_CAPACITY));
  }
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
