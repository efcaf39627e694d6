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
 */
export class HashSink implements TextSink {
  /** Text not yet hashed, and its offset in the whole text. */
  private pending = '';
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
      // Long remembered texts go to the hash as they are, not through `pending`.
      this.flush(true);
      this.hash.update(text);
      this.length += text.length;
      this.pendingAt = this.length;
      return;
    }
    this.pending += text;
    this.length += text.length;
    if (this.pending.length >= PIECE) this.flush(false);
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
    if (wanted && this.length - start <= REMEMBERED_TEXT_MAX)
      remember(def, this.pending.slice(start - this.pendingAt));
  }

  /** Hashes what is pending; called when all is written. */
  finish(): void {
    this.flush(true);
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
    // Never split a surrogate pair: each half alone would be hashed as U+FFFD.
    const last = this.pending.charCodeAt(cut - 1);
    if (!all && cut < this.pending.length && last >= 0xd800 && last <= 0xdbff) cut--;
    if (cut <= 0) return;
    this.hash.update(this.pending.slice(0, cut));
    this.pending = this.pending.slice(cut);
    this.pendingAt += cut;
  }
}
