/**
 * Every temp file the tests make (SQLite databases, configs, PostgreSQL clusters, browser
 * profiles, CLI children's files) goes under one directory per run, removed when the run ends:
 * `os.tmpdir()` reads TMPDIR on each call, and the workers and their children inherit it. Without
 * it each run left about a thousand directories in /tmp.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'aap-test-'));
  // The PostgreSQL test clusters run as an unprivileged user when the tests run as root: it must
  // be able to pass through to its own (0700) directory.
  chmodSync(root, 0o711);
  process.env.TMPDIR = root;
  return () => rmSync(root, { recursive: true, force: true });
}
