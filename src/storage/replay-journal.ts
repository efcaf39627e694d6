/**
 * The replay journal (§4.6, §8.4): every accepted JWT id, appended to a file beside the database
 * before the request goes on, so that a token accepted before a restart is refused after it.
 *
 * Why not a table: a SQLite commit per request, even without an fsync (synchronous=NORMAL), took
 * 5% of the proxy's CPU on the execute benchmark (locking and WAL bookkeeping, ~7 system calls);
 * one append is one write() system call, about a tenth of that. The in-memory replay cache stays
 * the index; this file is only read at start-up.
 *
 * Guarantee: `append` returns, and `record` settles, once the line is in the operating system's
 * page cache, so it survives a crash or SIGKILL of the process; the request waits for that before
 * it goes on. An fsync runs off the event loop every second (and at close), so an OS crash or
 * power loss loses at most about the last second of jtis; a torn last line is skipped when read.
 *
 * A short write (a full disk, a file-size limit: write() took part of the line) is a failed write:
 * the request is refused (503), as when nothing was written, since a torn line is skipped when read
 * and its jti could be replayed after a restart. The segment is cut back to its last whole line,
 * so the next line does not land after the torn half (and get skipped with it); when even that
 * fails, the writer moves to a new segment.
 *
 * Group write: while `busy()` says other requests are under way (set by the composition root:
 * upstream calls in flight), `record` does not write at once; the lines recorded in one turn of
 * the event loop go in one write() at its end, and each of those requests goes on after it. One
 * write() per request was the largest single item of the proxy's own CPU in the execute
 * benchmark's profile at concurrency 32. A lone request (busy() false) writes at once, so it
 * waits for no turn.
 *
 * Layout: `<dir>/<instance>-<n>.jsonl`, one segment file per process at a time, a line
 * `[expiresAt, identity, jti]` per jti. Each process writes only its own segments, so several
 * processes may share a database. A segment is deleted once every jti in it has expired: by its
 * writer, or by any process once nobody has written to it for `FOREIGN_GRACE_MS`. A writer never
 * appends to a segment it left idle for `IDLE_ROTATE_MS` (it starts a new one), so a segment that
 * old is finished and nobody can be writing to it while it is deleted.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
  close,
} from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../errors.js';
import type { ReplayLedger } from './replay-ledger.js';
import type { SeenJti } from './types.js';

/**
 * The journal of the database `dbFile`, in the directory `<dbFile>-replay`; none for `:memory:`,
 * whose state does not outlive the process anyway.
 */
export function openReplayJournal(
  dbFile: string,
  now: number,
  options: ReplayJournalOptions = {},
): ReplayJournal | undefined {
  if (dbFile === ':memory:') return undefined;
  const dir = `${dbFile}-replay`;
  try {
    return new ReplayJournal(dir, now, options);
  } catch (err) {
    throw new UserError(`${dir}: cannot open the replay journal (${(err as Error).message})`);
  }
}

export interface ReplayJournalOptions {
  /** A segment is closed and a new one started past this size. Default 4 MiB. */
  readonly segmentBytes?: number;
  /** How often written lines are fsynced, off the event loop. Default 1 s. */
  readonly syncIntervalMs?: number;
  /** fs.writeSync, for a test to make a write short (a full disk cannot be had on demand). */
  readonly writeSync?: (fd: number, text: string) => number;
}

const SEGMENT = /^[0-9a-f]{12}-\d+\.jsonl$/;
/** A writer idle this long starts a new segment rather than append to the old one. */
export const IDLE_ROTATE_MS = 60_000;
/** Another process's segment is deleted only when nobody has written to it for this long. */
export const FOREIGN_GRACE_MS = 10 * 60_000;

interface OpenSegment {
  readonly path: string;
  readonly fd: number;
  bytes: number;
  /** Wall-clock time (Date.now) of the last append, for idle rotation. */
  lastWriteAt: number;
  maxExpiresAt: number;
  /** fsyncs in flight, so the descriptor is closed only after them. */
  syncing: number;
  closing: boolean;
  dirty: boolean;
}

export class ReplayJournal implements ReplayLedger {
  readonly #dir: string;
  readonly #segmentBytes: number;
  readonly #writeSync: (fd: number, text: string) => number;
  readonly #instance = randomBytes(6).toString('hex');
  /** This process's closed segments → the latest expiry in them. */
  readonly #retired = new Map<string, number>();
  /** Segments other processes (running or gone) wrote → the latest expiry in them. */
  readonly #foreign = new Map<string, number>();
  readonly #restored: SeenJti[] = [];
  readonly #timer: NodeJS.Timeout;
  #current: OpenSegment;
  #sequence = 0;
  #busy: () => boolean = () => false;
  /** Lines waiting for this turn's group write, and the one promise their requests wait on. */
  #group:
    { lines: string[]; maxExpiresAt: number; written: Promise<boolean>; settle: GroupSettle } | undefined;

  /** Opens the journal in `dir` and reads what earlier processes wrote that is live at `now`. */
  constructor(dir: string, now: number, options: ReplayJournalOptions = {}) {
    this.#dir = dir;
    this.#segmentBytes = options.segmentBytes ?? 4 * 1024 * 1024;
    this.#writeSync = options.writeSync ?? writeSync;
    mkdirSync(dir, { recursive: true });
    for (const file of readdirSync(dir)) {
      if (!SEGMENT.test(file)) continue;
      const path = join(dir, file);
      this.#foreign.set(path, readSegment(path, now, this.#restored));
    }
    this.sweep(now);
    this.#current = this.#open();
    this.#timer = setInterval(() => this.#sync(this.#current), options.syncIntervalMs ?? 1000);
    this.#timer.unref();
  }

  /** The live jtis found at open, in file order; handed over once (then forgotten here). */
  takeRestored(): SeenJti[] {
    return this.#restored.splice(0);
  }

  /** From now on, records made while `busy()` is true share one write per event-loop turn. */
  groupWhile(busy: () => boolean): void {
    this.#busy = busy;
  }

  /**
   * The ledger's record (replay-ledger.ts): in one process the memory has judged already, so it
   * is always "first". Written at once, or (busy) with the rest of this turn's, then settled.
   */
  record(seen: SeenJti): boolean | Promise<boolean> {
    if (this.#group === undefined && !this.#busy()) {
      this.append(seen);
      return true;
    }
    if (this.#group === undefined) {
      let settle: GroupSettle = () => undefined;
      const written = new Promise<boolean>((resolve, reject) => {
        settle = (err) => (err === undefined ? resolve(true) : reject(err));
      });
      this.#group = { lines: [], maxExpiresAt: 0, written, settle };
      setImmediate(() => this.#writeGroup());
    }
    this.#group.lines.push(lineOf(seen));
    if (seen.expiresAt > this.#group.maxExpiresAt) this.#group.maxExpiresAt = seen.expiresAt;
    return this.#group.written;
  }

  /** Appends one accepted jti: one write() before it returns; throws if the disk refuses it. */
  append(seen: SeenJti): void {
    this.#write(lineOf(seen), seen.expiresAt);
  }

  #writeGroup(): void {
    const group = this.#group;
    if (group === undefined) return;
    this.#group = undefined;
    try {
      this.#write(group.lines.join(''), group.maxExpiresAt);
    } catch (err) {
      group.settle(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    group.settle();
  }

  #write(text: string, maxExpiresAt: number): void {
    const wallNow = Date.now();
    if (this.#current.bytes > 0 && wallNow - this.#current.lastWriteAt >= IDLE_ROTATE_MS) this.#rotate();
    const segment = this.#current;
    const written = this.#writeSync(segment.fd, text);
    // ASCII (every line but one with a non-ASCII jti or identity) is one byte a code unit, so the
    // common case costs no byte count; UTF-8 never takes fewer bytes than code units.
    if (written !== text.length && written !== Buffer.byteLength(text)) this.#torn(segment, written);
    segment.bytes += written;
    segment.lastWriteAt = wallNow;
    segment.dirty = true;
    if (maxExpiresAt > segment.maxExpiresAt) segment.maxExpiresAt = maxExpiresAt;
    if (segment.bytes >= this.#segmentBytes) this.#rotate();
  }

  /**
   * After a short write: cuts the segment back to its last whole line (the file is opened for
   * append, so the next write lands there); then throws, so the request whose jti is not wholly
   * on disk is refused.
   */
  #torn(segment: OpenSegment, written: number): never {
    try {
      ftruncateSync(segment.fd, segment.bytes);
    } catch {
      // The torn tail stays (skipped when read): the next write starts a new segment (the idle
      // rule in #write), never appending to it, and is refused itself if that cannot be done.
      segment.bytes += written;
      segment.lastWriteAt = Number.NEGATIVE_INFINITY;
    }
    throw new Error(`${segment.path}: short write (${written} bytes of a longer line; disk full?)`);
  }

  /**
   * Deletes segments whose every jti has expired at `now`: this process's closed ones at once,
   * other processes' once idle for FOREIGN_GRACE_MS. Returns how many.
   */
  sweep(now: number): number {
    let deleted = 0;
    for (const [path, maxExpiresAt] of this.#retired) {
      if (maxExpiresAt > now) continue;
      unlinkQuietly(path);
      this.#retired.delete(path);
      deleted++;
    }
    const idleSince = Date.now() - FOREIGN_GRACE_MS;
    for (const [path, maxExpiresAt] of this.#foreign) {
      if (maxExpiresAt > now) continue;
      const modified = modifiedAt(path);
      if (modified !== undefined && modified > idleSince) continue;
      unlinkQuietly(path);
      this.#foreign.delete(path);
      deleted++;
    }
    return deleted;
  }

  /** Flushes to disk and closes: after a clean shutdown even power loss forgets nothing. */
  close(): void {
    clearInterval(this.#timer);
    if (this.#current.closing) return;
    // A group still waiting for its turn is written now: its requests are waiting on it.
    this.#writeGroup();
    const segment = this.#current;
    segment.closing = true;
    try {
      fsyncSync(segment.fd);
    } finally {
      if (segment.syncing === 0) closeSync(segment.fd);
    }
  }

  #open(): OpenSegment {
    const path = join(this.#dir, `${this.#instance}-${this.#sequence++}.jsonl`);
    const fd = openSync(path, 'a', 0o600);
    return {
      path,
      fd,
      bytes: 0,
      lastWriteAt: Date.now(),
      maxExpiresAt: 0,
      syncing: 0,
      closing: false,
      dirty: false,
    };
  }

  #rotate(): void {
    const old = this.#current;
    this.#current = this.#open();
    this.#retired.set(old.path, old.maxExpiresAt);
    old.closing = true;
    this.#sync(old);
  }

  /** fsync on the thread pool; a closing segment's descriptor is closed after its last one. */
  #sync(segment: OpenSegment): void {
    if (!segment.dirty) {
      if (segment.closing && segment.syncing === 0) close(segment.fd, ignore);
      return;
    }
    segment.dirty = false;
    segment.syncing++;
    fsync(segment.fd, () => {
      segment.syncing--;
      if (segment.closing && segment.syncing === 0) close(segment.fd, ignore);
    });
  }
}

type GroupSettle = (err?: Error) => void;

function lineOf(seen: SeenJti): string {
  return `${JSON.stringify([seen.expiresAt, seen.identity, seen.jti])}\n`;
}

/** Adds the segment's live entries to `into`; returns its latest expiry (0 when none). */
function readSegment(path: string, now: number, into: SeenJti[]): number {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return 0;
  }
  let maxExpiresAt = 0;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const seen = entryOf(line) ?? salvaged(line);
    if (seen === undefined) continue; // a line torn by a power loss
    if (seen.expiresAt > maxExpiresAt) maxExpiresAt = seen.expiresAt;
    if (seen.expiresAt > now) into.push(seen);
  }
  return maxExpiresAt;
}

/** The entry a whole line holds; undefined for a torn or corrupt one. */
function entryOf(line: string): SeenJti | undefined {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!Array.isArray(entry) || entry.length !== 3) return undefined;
  const [expiresAt, identity, jti] = entry as unknown[];
  if (typeof expiresAt !== 'number' || typeof identity !== 'string' || typeof jti !== 'string')
    return undefined;
  return { identity, jti, expiresAt };
}

/**
 * A whole entry written right after a torn half line, which shares its line: what a writer
 * before short writes were refused left after a full disk. Tried only for lines that do not parse;
 * a wrong salvage could only make a jti refused, never accepted.
 */
function salvaged(line: string): SeenJti | undefined {
  for (let at = line.indexOf('[', 1); at > 0; at = line.indexOf('[', at + 1)) {
    const seen = entryOf(line.slice(at));
    if (seen !== undefined) return seen;
  }
  return undefined;
}

/** mtime in ms, or undefined when the file is gone. */
function modifiedAt(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone (another process swept it)
  }
}

function ignore(): void {
  // nothing to do: the descriptor is being dropped either way
}
