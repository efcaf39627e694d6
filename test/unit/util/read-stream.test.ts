import { once } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../../src/util/collect-garbage.js';
import { readStream, takeBuffered } from '../../../src/util/read-stream.js';

/** Heap and Buffers' memory in use after a full collection. */
function retained(): number {
  collectGarbage();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

describe('readStream', () => {
  it('joins every chunk up to the end', async () => {
    const read = await readStream(Readable.from([Buffer.from('ab'), Buffer.from('cd')]), 10);
    expect(read).toEqual({ bytes: Buffer.from('abcd'), over: false });
  });

  it('an empty stream reads as no bytes', async () => {
    const read = await readStream(Readable.from([]), 10);
    expect(read.bytes.length).toBe(0);
    expect(read.over).toBe(false);
  });

  it('a stream over the cap: its first maxBytes, flagged, and destroyed', async () => {
    const stream = Readable.from([Buffer.from('abc'), Buffer.from('defg'), Buffer.from('hij')]);
    const read = await readStream(stream, 5);
    expect(read).toEqual({ bytes: Buffer.from('abcde'), over: true });
    expect(stream.destroyed).toBe(true);
  });

  it('exactly maxBytes is not over', async () => {
    const read = await readStream(Readable.from([Buffer.from('abcde')]), 5);
    expect(read).toEqual({ bytes: Buffer.from('abcde'), over: false });
  });

  it('keepOpen pauses rather than destroys a stream over the cap', async () => {
    const stream = new PassThrough();
    const reading = readStream(stream, 3, { keepOpen: true });
    stream.write(Buffer.from('abcd'));
    const read = await reading;
    expect(read.over).toBe(true);
    expect(stream.destroyed).toBe(false);
    expect(stream.isPaused()).toBe(true);
  });

  it('destroying a stream that reports it as an error does not leave the error unhandled', async () => {
    const stream = new PassThrough();
    // As undici's bodies do: destroyed before its end, the stream emits an error.
    stream._destroy = (_err, cb) => cb(new Error('aborted'));
    const reading = readStream(stream, 1);
    stream.write(Buffer.from('ab'));
    expect((await reading).over).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(stream.listenerCount('error')).toBe(1);
  });

  it('a body of many pieces is joined in order, with or without a declared length', async () => {
    const pieces = Array.from({ length: 300 }, (_, i) => Buffer.from(`${i},`));
    const whole = Buffer.concat(pieces);
    for (const expected of [undefined, whole.length, whole.length + 5, NaN]) {
      const read = await readStream(
        Readable.from(pieces),
        10_000,
        expected === undefined ? {} : { expected },
      );
      expect(read.bytes.equals(whole), String(expected)).toBe(true);
    }
  });

  it('a body in one piece is that piece, not a copy', async () => {
    const piece = Buffer.from('{"a":1}');
    expect((await readStream(Readable.from([piece]), 10)).bytes).toBe(piece);
  });

  // Regression: every piece was kept in a list until the end. A 1 MiB body sent chunked in 1-byte
  // chunks (`1\r\nX\r\n`, each a slice of the socket's buffer) held 195 MB of heap while unfinished.
  it('an unfinished 1 MiB body in 1-byte pieces holds about 1 MiB, not one object per byte', async () => {
    const source = Buffer.alloc(1024 * 1024, 'x');
    const stream = new Readable({ read() {} });
    const before = retained();
    const reading = readStream(stream, 2 * source.length, { keepOpen: true });
    for (let at = 0; at < source.length; at += 64 * 1024) {
      for (let i = at; i < at + 64 * 1024; i++) stream.push(source.subarray(i, i + 1));
      await nextTurn();
    }
    const held = retained() - before;
    expect(held).toBeLessThan(20 * 1024 * 1024);
    stream.push(null);
    expect((await reading).bytes.equals(source)).toBe(true);
  });

  it('past maxChunks pieces the stream is stopped, flagged fragmented, and (keepOpen) paused', async () => {
    const stream = new PassThrough();
    const reading = readStream(stream, 1000, { keepOpen: true, maxChunks: 3 });
    for (const c of ['a', 'b', 'c', 'd']) {
      stream.write(c);
      await nextTurn();
    }
    const read = await reading;
    expect(read).toEqual({ bytes: Buffer.from('abc'), over: false, fragmented: true });
    expect(stream.isPaused()).toBe(true);
  });

  it("rejects with the stream's error", async () => {
    const stream = new PassThrough();
    const reading = readStream(stream, 10);
    stream.destroy(new Error('boom'));
    await expect(reading).rejects.toThrow('boom');
  });

  it('rejects a stream closed before its end as a premature close', async () => {
    const stream = new PassThrough();
    const reading = readStream(stream, 10);
    stream.write('a');
    stream.destroy();
    await expect(reading).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  it('a stream already destroyed is a premature close', async () => {
    const stream = new PassThrough();
    stream.destroy();
    await expect(readStream(stream, 10)).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });
});

describe('takeBuffered', () => {
  function buffered(...chunks: string[]): Readable {
    const stream = new Readable({ read() {} });
    for (const c of chunks) stream.push(Buffer.from(c));
    return stream;
  }

  it('takes the declared bytes once all are buffered, and the stream still ends', async () => {
    const stream = buffered('{"a"', ':1}');
    stream.push(null);
    const ended = once(stream, 'end');
    expect(takeBuffered(stream, 7)?.toString()).toBe('{"a":1}');
    await ended;
  });

  it('takes nothing while bytes are still to come, and leaves the buffer as it was', () => {
    const stream = buffered('{"a"');
    expect(takeBuffered(stream, 7)).toBeUndefined();
    expect(stream.readableLength).toBe(4);
    expect(takeBuffered(stream, NaN)).toBeUndefined();
  });

  it('takes everything of an ended message with no declared length (chunked)', () => {
    expect(takeBuffered(buffered('ab', 'cd'), NaN, true)?.toString()).toBe('abcd');
  });

  it('leaves a stream someone already reads in flowing mode', () => {
    const stream = buffered('abc');
    stream.on('data', () => undefined);
    expect(takeBuffered(stream, 3)).toBeUndefined();
  });
});
