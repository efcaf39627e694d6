/**
 * The modes of what the proxy writes (README "Storage and durability", "Backups"), under the
 * common umask 022: the database holds per-call arguments and upstream results, CSRF tokens, OIDC
 * nonces and PKCE verifiers, pending user codes, activity. A new database, its -wal and -shm, its
 * directory and a backup are the proxy's user's alone. Observed before: 0644 files, 0755 directory.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import { openReplayJournal } from '../../../src/storage/replay-journal.js';

let dir: string;
let oldUmask: number;
const mode = (p: string): string => (statSync(p).mode & 0o777).toString(8).padStart(4, '0');

beforeAll(() => {
  oldUmask = process.umask(0o022);
  dir = mkdtempSync(join(tmpdir(), 'aap-audit-disk-'));
});
afterAll(() => {
  process.umask(oldUmask);
  rmSync(dir, { recursive: true, force: true });
});

describe('files beside the database', () => {
  it('a new SQLite database, its -wal and -shm and its new directory are not readable by group or others', async () => {
    const file = join(dir, 'data', 'proxy.db');
    const store = openSqliteStore({ file });
    const modes = Object.fromEntries(
      [file, `${file}-wal`, `${file}-shm`].filter(existsSync).map((p) => [p.slice(dir.length), mode(p)]),
    );
    // (The replay journal's segments are 0600 in a 0755 directory: fine, and not asserted here.)
    openReplayJournal(file, Date.now())?.close();
    await (store as unknown as { close(): Promise<void> }).close();
    // Expect owner-only files, as the agent key file and the replay segments (0600) already are.
    expect(Object.keys(modes)).toHaveLength(3);
    for (const m of Object.values(modes)) expect(m, JSON.stringify(modes)).toBe('0600');
    expect(mode(join(dir, 'data'))).toBe('0700');
  });

  it('db backup writes a copy only its owner can read', async () => {
    const file = join(dir, 'b', 'proxy.db');
    const store = openSqliteStore({ file });
    await (store as unknown as { close(): Promise<void> }).close();
    const target = join(dir, 'backup.db');
    const io = { out: () => undefined, err: () => undefined };
    expect(await runCli(['db', 'backup', target, '--db', file], io)).toBe(0);
    expect(mode(target)).toBe('0600');
  });
});
