/**
 * Where schema-text.ts writes: a sink that feeds a hash in large pieces and stops at a length
 * limit, and one that only counts (run after a capability passed the limit, so that others
 * reaching the same long definitions stop before writing them). Both remember what they learnt
 * about a definition — its length, its text — per shared definition object, so a component used
 * by many capabilities is written out once per catalog.
 */
import type { Hash } from 'node:crypto';
import type { TextSink } from './schema-text.js';

/** A definition's text longer than this is rewritten each time rather than kept. */
const REMEMBERED_TEXT_MAX = 1 << 20;
/** All remembered texts together, in UTF-16 code units; a reloaded catalog's are given back. */
const REMEMBERED_TOTAL_MAX = 64 << 20;
/** The hash is fed pieces of about this size (one update per token would be slow). */
const PIECE = 1 << 16;

const lengths = new WeakMap<object, number>();
const texts = new WeakMap<object, string>();
let rememberedTotal = 0;
const released = new FinalizationRegistry<number>((size) => {
  rememberedTotal -= size;
});

function remember(def: object, text: string): void {
  if (text.length > REMEMBERED_TEXT_MAX || rememberedTotal + text.length > REMEMBERED_TOTAL_MAX) return;
  texts.set(def, text);
  rememberedTotal += text.length;
  released.register(def, text.length);
}

/** Counts the text written (in UTF-16 code units), with definitions' lengths remembered. */
export class LengthSink implements TextSink {
  length = 0;
  private readonly starts: number[] = [];

  write(text: string): void {
    this.length += text.length;
  }

  replay(def: object): boolean {
    const known = lengths.get(def);
    if (known === undefined) return false;
    this.length += known;
    return true;
  }

  begin(): void {
    this.starts.push(this.length);
  }

  end(def: object): void {
    lengths.set(def, this.length - (this.starts.pop() as number));
  }
}

/** Thrown by a HashSink when the text passes its limit. */
export class TextTooLong extends Error {}

/**
 * Feeds a hash, remembering short definitions' texts to replay them. Stops with TextTooLong as
 * soon as the text would pass `limit`, before writing a definition already known to be too long.
 *
 * Text not yet hashed is kept as the pieces it was written in, not one growing string: cutting a
 * definition's text out of a string built by `+=` flattens all of it, and a capability of
 * Microsoft Graph beta with 1,300 definitions copied its megabyte of pending text at the end of
 * each (an 0.8 s first describe, half of it garbage collection).
 */
export class HashSink implements TextSink {
  /** Text not yet hashed, as written, and its offset in the whole text. */
  private parts: string[] = [];
  private pendingLength = 0;
  private pendingAt = 0;
  private length = 0;
  /** Where the definitions being written began, and whether their text is still wanted. */
  private readonly starts: number[] = [];
  private readonly wanted: boolean[] = [];

  constructor(
    private readonly hash: Hash,
    private readonly limit: number,
  ) {}

  write(text: string): void {
    if (this.length + text.length > this.limit) throw new TextTooLong();
    if (text.length >= PIECE && !this.wanted.includes(true)) {
      // Long remembered texts go to the hash as they are, not through the pending pieces.
      this.flush(true);
      this.hash.update(text);
      this.length += text.length;
      this.pendingAt = this.length;
      return;
    }
    this.parts.push(text);
    this.pendingLength += text.length;
    this.length += text.length;
    if (this.pendingLength >= PIECE) this.flush(false);
  }

  replay(def: object): boolean {
    const length = lengths.get(def);
    if (length === undefined) return false;
    if (this.length + length > this.limit) throw new TextTooLong();
    const known = texts.get(def);
    if (known === undefined) return false;
    this.write(known);
    return true;
  }

  begin(): void {
    this.starts.push(this.length);
    this.wanted.push(true);
  }

  end(def: object): void {
    const start = this.starts.pop() as number;
    const wanted = this.wanted.pop() as boolean;
    lengths.set(def, this.length - start);
    if (wanted && this.length - start <= REMEMBERED_TEXT_MAX) remember(def, this.pendingFrom(start));
  }

  /** Hashes what is pending; called when all is written. */
  finish(): void {
    this.flush(true);
  }

  /** The pending text from offset `start` (of the whole text) to its end. */
  private pendingFrom(start: number): string {
    let at = this.length;
    let i = this.parts.length;
    while (at > start && i > 0) at -= (this.parts[--i] as string).length;
    return this.parts
      .slice(i)
      .join('')
      .slice(start - at);
  }

  private flush(all: boolean): void {
    // Text a definition being written may still want to remember stays pending.
    let keepFrom = this.length;
    if (!all) {
      for (let i = 0; i < this.starts.length; i++) {
        if (!this.wanted[i]) continue;
        const start = this.starts[i] as number;
        if (this.length - start > REMEMBERED_TEXT_MAX) this.wanted[i] = false;
        else keepFrom = Math.min(keepFrom, start);
      }
    }
    let cut = keepFrom - this.pendingAt;
    if (cut <= 0) return;
    // The pieces up to the cut go to the hash, and what of the last lies past it comes back.
    let taken = 0;
    let count = 0;
    while (count < this.parts.length && taken < cut) taken += (this.parts[count++] as string).length;
    let head = this.parts.slice(0, count).join('');
    // Never split a surrogate pair: each half alone would be hashed as U+FFFD.
    const last = head.charCodeAt(cut - 1);
    if (!all && cut < this.pendingLength && last >= 0xd800 && last <= 0xdbff) cut--;
    if (cut <= 0) return;
    const rest = this.parts.slice(count);
    if (taken > cut) {
      rest.unshift(head.slice(cut));
      head = head.slice(0, cut);
    }
    this.hash.update(head);
    this.parts = rest;
    this.pendingLength -= cut;
    this.pendingAt += cut;
  }
}
