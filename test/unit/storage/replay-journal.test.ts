/**
 * The replay journal (§4.6): accepted jtis appended to segment files beside the database, read
 * back by the next process, deleted once every jti in them has expired. Real files.
 */
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UserError } from '../../../src/errors.js';
import {
  FOREIGN_GRACE_MS,
  IDLE_ROTATE_MS,
  openReplayJournal,
  ReplayJournal,
} from '../../../src/storage/replay-journal.js';

const NOW = 1_700_000_000_000;
const opened: ReplayJournal[] = [];
afterEach(() => {
  for (const journal of opened.splice(0)) journal.close();
  vi.useRealTimers();
});

function dir(): string {
  return join(mkdtempSync(join(tmpdir(), 'aap-journal-')), 'proxy.db-replay');
}

function open(path: string, now = NOW, segmentBytes?: number): ReplayJournal {
  const journal = new ReplayJournal(path, now, segmentBytes === undefined ? {} : { segmentBytes });
  opened.push(journal);
  return journal;
}

function segments(path: string): string[] {
  return readdirSync(path)
    .filter((f) => f.endsWith('.jsonl'))
    .sort();
}

function restoredBy(path: string, now = NOW + 1): string[] {
  const next = new ReplayJournal(path, now);
  opened.push(next);
  return next.takeRestored().map((s) => s.jti);
}

describe('ReplayJournal', () => {
  describe('group write while busy', () => {
    it('not busy: a record is written before record returns', () => {
      const path = dir();
      const journal = open(path);
      expect(journal.record({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 })).toBe(true);
      expect(restoredBy(path)).toEqual(['j1']);
    });

    it("busy: the turn's records wait, then go in together; each request's promise settles after", async () => {
      const path = dir();
      const journal = open(path);
      journal.groupWhile(() => true);
      const first = journal.record({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
      const second = journal.record({ identity: 'agent:b', jti: 'j2', expiresAt: NOW + 2000 });
      expect(first).toBeInstanceOf(Promise);
      // Nothing is on disk yet: a request that waits on its promise has not gone on.
      expect(restoredBy(path)).toEqual([]);
      expect(await Promise.all([first, second])).toEqual([true, true]);
      expect(restoredBy(path)).toEqual(['j1', 'j2']);
    });

    it('once a group is open this turn, a record joins it even if no longer busy', async () => {
      const path = dir();
      const journal = open(path);
      let busy = true;
      journal.groupWhile(() => busy);
      const first = journal.record({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
      busy = false;
      const second = journal.record({ identity: 'agent:a', jti: 'j2', expiresAt: NOW + 1000 });
      expect(second).toBeInstanceOf(Promise);
      await Promise.all([first, second]);
      // The next turn, not busy: written at once again.
      expect(journal.record({ identity: 'agent:a', jti: 'j3', expiresAt: NOW + 1000 })).toBe(true);
      expect(restoredBy(path)).toEqual(['j1', 'j2', 'j3']);
    });

    it('close writes a group still waiting for its turn, and its requests go on', async () => {
      const path = dir();
      const journal = new ReplayJournal(path, NOW);
      journal.groupWhile(() => true);
      const waiting = journal.record({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
      journal.close();
      expect(await waiting).toBe(true);
      expect(restoredBy(path)).toEqual(['j1']);
    });
  });

  it('gives the next process every jti still live, and none that expired', () => {
    const path = dir();
    const first = open(path);
    first.append({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
    first.append({ identity: 'host:h', jti: 'j1', expiresAt: NOW + 5000 });
    first.append({ identity: 'agent:a', jti: 'old', expiresAt: NOW });
    // No close(): the lines are in the file as soon as append returns (what SIGKILL leaves).
    const second = new ReplayJournal(path, NOW + 1);
    opened.push(second);
    expect(second.takeRestored()).toEqual([
      { identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 },
      { identity: 'host:h', jti: 'j1', expiresAt: NOW + 5000 },
    ]);
    // Handed over once: the journal keeps no copy in memory.
    expect(second.takeRestored()).toEqual([]);
  });

  it('keeps any jti and identity text intact (quotes, newlines, unicode)', () => {
    const path = dir();
    const odd = { identity: 'agent:"x"\n', jti: 'line\nbreak "quoted" \u2028 é', expiresAt: NOW + 1000 };
    open(path).append(odd);
    expect(open(path).takeRestored()).toEqual([odd]);
  });

  it('skips a torn or corrupt line and reads the rest', () => {
    const path = dir();
    const journal = open(path);
    journal.append({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
    const [file] = segments(path);
    appendFileSync(join(path, file as string), '[1700000001000,"agent:a","tor');
    appendFileSync(join(path, file as string), '\n{"not":"an entry"}\n[1,2,3]\n\u0000\u0000\u0000\n');
    journal.append({ identity: 'agent:a', jti: 'j2', expiresAt: NOW + 1000 });
    expect(
      open(path)
        .takeRestored()
        .map((s) => s.jti),
    ).toEqual(['j1', 'j2']);
  });

  describe('a short write (full disk, file-size limit)', () => {
    /** fs.writeSync whose write number `short` (from 1) writes only the first `keep` bytes. */
    function shortOnce(short: number, keep: number): (fd: number, text: string) => number {
      let calls = 0;
      return (fd, text) => writeSync(fd, ++calls === short ? text.slice(0, keep) : text);
    }

    it('is refused, and the next line is not appended to the torn half (regression: replay after restart)', () => {
      const path = dir();
      const journal = new ReplayJournal(path, NOW, { writeSync: shortOnce(2, 10) });
      opened.push(journal);
      journal.append({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
      // Accepted with half a line on disk, the jti would be skipped when read: replayable.
      expect(() => journal.append({ identity: 'agent:a', jti: 'j2', expiresAt: NOW + 1000 })).toThrow(
        /short write/,
      );
      journal.append({ identity: 'agent:a', jti: 'j3', expiresAt: NOW + 1000 });
      // Cut back to the last whole line: only whole lines are on disk.
      const [file] = segments(path);
      expect(readFileSync(join(path, file as string), 'utf8')).toMatch(/^(\[[^\n]*\]\n){2}$/);
      expect(restoredBy(path)).toEqual(['j1', 'j3']);
    });

    it("a busy turn's group write cut short rejects every request in it", async () => {
      const path = dir();
      const journal = new ReplayJournal(path, NOW, { writeSync: shortOnce(1, 30) });
      opened.push(journal);
      journal.groupWhile(() => true);
      const first = journal.record({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
      const second = journal.record({ identity: 'agent:b', jti: 'j2', expiresAt: NOW + 1000 });
      await expect(first).rejects.toThrow(/short write/);
      await expect(second).rejects.toThrow(/short write/);
      await expect(journal.record({ identity: 'agent:a', jti: 'j3', expiresAt: NOW + 1000 })).resolves.toBe(
        true,
      );
      expect(restoredBy(path)).toEqual(['j3']);
    });

    it('counts bytes, not characters: a whole line of non-ASCII text is not taken for a short one', () => {
      const path = dir();
      const journal = open(path);
      journal.append({ identity: 'agent:é', jti: 'ü😀', expiresAt: NOW + 1000 });
      journal.append({ identity: 'agent:a', jti: 'j2', expiresAt: NOW + 1000 });
      expect(restoredBy(path)).toEqual(['ü😀', 'j2']);
    });

    it('reads the whole line written after a torn half on the same line (files of earlier versions)', () => {
      const path = dir();
      open(path).close();
      writeFileSync(
        join(path, 'abcdefabcdef-0.jsonl'),
        `[1700000001000,"agent:a","to${JSON.stringify([NOW + 1000, 'agent:a', 'j2'])}\n`,
      );
      expect(restoredBy(path)).toEqual(['j2']);
    });
  });

  it('starts a new segment past segmentBytes, and the next process reads them all', () => {
    const path = dir();
    const journal = open(path, NOW, 200);
    for (let i = 0; i < 30; i++)
      journal.append({ identity: 'agent:a', jti: `j${i}`, expiresAt: NOW + 1000 + i });
    expect(segments(path).length).toBeGreaterThanOrEqual(5);
    expect(open(path).takeRestored()).toHaveLength(30);
  });

  it('sweep deletes its own closed segments once every jti in them expired, never the open one', () => {
    const path = dir();
    const journal = open(path, NOW, 200);
    for (let i = 0; i < 30; i++)
      journal.append({ identity: 'agent:a', jti: `j${i}`, expiresAt: NOW + 1000 + i * 100 });
    const before = segments(path).length;
    expect(journal.sweep(NOW + 999)).toBe(0);
    const deleted = journal.sweep(NOW + 2000);
    expect(deleted).toBeGreaterThan(0);
    expect(segments(path).length).toBe(before - deleted);
    // What is left still holds every jti live at that time.
    const live = Array.from({ length: 30 }, (_, i) => NOW + 1000 + i * 100).filter((t) => t > NOW + 2000);
    expect(open(path, NOW + 2000).takeRestored()).toHaveLength(live.length);
    journal.sweep(NOW + 10_000);
    // Left: the segment each of the two journals has open.
    expect(segments(path)).toHaveLength(2);
  });

  it("another process's segment is deleted only once expired and not written for FOREIGN_GRACE_MS", () => {
    const path = dir();
    open(path).close();
    const foreign = join(path, 'abcdefabcdef-0.jsonl');
    writeFileSync(foreign, `${JSON.stringify([NOW + 1000, 'agent:z', 'j'])}\n`);
    const journal = open(path);
    expect(journal.takeRestored()).toEqual([{ identity: 'agent:z', jti: 'j', expiresAt: NOW + 1000 }]);
    expect(journal.sweep(NOW + 1000)).toBe(0); // expired, but written just now: its writer may go on
    const old = new Date(Date.now() - FOREIGN_GRACE_MS - 1000);
    utimesSync(foreign, old, old);
    expect(journal.sweep(NOW + 999)).toBe(0); // idle, but a jti in it is still live
    expect(journal.sweep(NOW + 1000)).toBeGreaterThan(0);
    expect(segments(path)).not.toContain('abcdefabcdef-0.jsonl');
  });

  it('a writer idle for IDLE_ROTATE_MS appends to a new segment, so nobody deletes a file in use', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(NOW);
    const path = dir();
    const journal = open(path);
    journal.append({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
    vi.setSystemTime(NOW + IDLE_ROTATE_MS - 1);
    journal.append({ identity: 'agent:a', jti: 'j2', expiresAt: NOW + 1000 });
    expect(segments(path)).toHaveLength(1);
    vi.setSystemTime(NOW + 2 * IDLE_ROTATE_MS);
    journal.append({ identity: 'agent:a', jti: 'j3', expiresAt: NOW + 1000 });
    expect(segments(path)).toHaveLength(2);
  });

  it('writes its files readable by the owner only', () => {
    const path = dir();
    open(path).append({ identity: 'agent:a', jti: 'j1', expiresAt: NOW + 1000 });
    expect(statSync(join(path, segments(path)[0] as string)).mode & 0o077).toBe(0);
  });
});

describe('openReplayJournal', () => {
  it('keeps the journal in <db>-replay, and none for an in-memory database', () => {
    const db = join(mkdtempSync(join(tmpdir(), 'aap-journal-')), 'proxy.db');
    const journal = openReplayJournal(db, NOW);
    expect(journal).toBeInstanceOf(ReplayJournal);
    journal?.append({ identity: 'agent:a', jti: 'j', expiresAt: NOW + 1 });
    journal?.close();
    expect(readdirSync(`${db}-replay`)).toHaveLength(1);
    expect(openReplayJournal(':memory:', NOW)).toBeUndefined();
  });

  it('refuses a directory it cannot create with a UserError naming it', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'aap-journal-')), 'not-a-dir');
    writeFileSync(file, '');
    expect(() => openReplayJournal(join(file, 'proxy.db'), NOW)).toThrow(UserError);
    expect(() => openReplayJournal(join(file, 'proxy.db'), NOW)).toThrow(/replay journal/);
  });
});
