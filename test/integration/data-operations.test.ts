/**
 * Data operations on a real proxy's SQLite file. `agent-auth-proxy db backup FILE`: the copy is a
 * consistent snapshot taken while registrations keep committing, it opens as a proxy database
 * (same schema, every host acknowledged before the backup started), and mistakes change nothing.
 * Activity retention (§9.2): the configured `audit.retention` is what the proxy prunes by.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { MIGRATIONS } from '../../src/storage/migrations.js';
import { activityRecord } from '../helpers/activity.js';
import { generateTestKey } from '../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../helpers/protocol.js';
import { PETSTORE } from '../helpers/proxy.js';

let p: TestProtocol;
let dir = '';
let db = '';

async function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { out: (t) => void (stdout += t), err: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

/** Pre-registers a host through the operator API (one committed write); its id. */
async function addHost(name: string): Promise<string> {
  const key = await generateTestKey();
  const reply = await p.admin('POST', '/admin/hosts', { name, public_key: key.publicJwk });
  expect(reply.status).toBe(201);
  return reply.body.host_id as string;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'aap-backup-'));
  db = join(dir, 'proxy.db');
  p = await startProtocol({ overrides: { db } });
});
afterAll(async () => {
  await p?.close();
});

describe('db backup', () => {
  it('copies the live database while writes go on: a checked copy holding every host acknowledged before it started', async () => {
    const before = [];
    for (let i = 0; i < 20; i++) before.push(await addHost(`before ${i}`));
    const target = join(dir, 'backup.db');
    // Writes keep committing while the backup runs.
    const during = Promise.all(Array.from({ length: 20 }, (_, i) => addHost(`during ${i}`)));
    const result = await cli(['db', 'backup', target, '--db', db]);
    await during;
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      new RegExp(`^backed up ${db} \\(schema version ${MIGRATIONS.length}, \\d+ bytes\\) to ${target}\\n$`),
    );

    const copy = new Database(target, { readonly: true, fileMustExist: true });
    try {
      expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(copy.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      const ids = new Set((copy.prepare('SELECT id FROM hosts').all() as { id: string }[]).map((r) => r.id));
      for (const id of before) expect(ids.has(id)).toBe(true);
      expect(ids.size).toBeGreaterThanOrEqual(before.length);
      expect(ids.size).toBeLessThanOrEqual(before.length + 20);
    } finally {
      copy.close();
    }

    // The copy serves as a proxy's database.
    const restored = await startProtocol({ overrides: { db: target } });
    try {
      const host = await restored.admin('GET', `/admin/hosts/${before[0]}`);
      expect(host.status).toBe(200);
      expect(host.body.name).toBe('before 0');
    } finally {
      await restored.close();
    }
  });

  it('finishes on a database of thousands of pages while the proxy writes all along (a copy in steps started over at every write)', async () => {
    // ~16 MB of activity: thousands of 100-page steps, each of which a write would undo.
    const fill = new Database(db);
    try {
      fill.pragma('busy_timeout = 5000');
      const insert = fill.prepare(
        "INSERT INTO activity (at, type, outcome, detail) VALUES (?, 'execute', 'success', ?)",
      );
      fill.transaction(() => {
        for (let i = 0; i < 40_000; i++) insert.run(i, JSON.stringify({ pad: 'x'.repeat(300), i }));
      })();
    } finally {
      fill.close();
    }
    let writing = true;
    const writes = (async () => {
      while (writing) await addHost('busy');
    })();
    const target = join(dir, 'busy.db');
    const result = await cli(['db', 'backup', target, '--db', db]);
    writing = false;
    await writes;
    expect(result.code, result.stderr).toBe(0);
    expect(existsSync(`${target}-journal`)).toBe(false);
    // The filler goes again: the retention tests below count this database's activity.
    const clean = new Database(db);
    try {
      clean.pragma('busy_timeout = 5000');
      clean.prepare("DELETE FROM activity WHERE type = 'execute' AND at < 40000").run();
    } finally {
      clean.close();
    }
  }, 20_000);

  it('says a file that is not a database is not one (exit 2), and leaves no copy', async () => {
    const notDb = join(dir, 'notes.txt');
    writeFileSync(notDb, 'these are not the pages you are looking for '.repeat(200));
    const target = join(dir, 'from-notes.db');
    const result = await cli(['db', 'backup', target, '--db', notDb]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${notDb}: not a database this proxy can read`);
    expect(existsSync(target)).toBe(false);
  });

  it('the database named by a config file', async () => {
    const config = join(dir, 'proxy.yaml');
    writeFileSync(config, 'database: proxy.db\n');
    const target = join(dir, 'from-config.db');
    const result = await cli(['db', 'backup', target, '--config', config]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`backed up ${db} `);
  });

  it('refuses to overwrite, a missing source (which it does not create), a missing directory and a bad command line', async () => {
    const existing = join(dir, 'existing.db');
    writeFileSync(existing, 'keep me');
    const overwrite = await cli(['db', 'backup', existing, '--db', db]);
    expect(overwrite).toMatchObject({ code: 2, stdout: '' });
    expect(overwrite.stderr).toBe(
      `agent-auth-proxy: ${existing}: already exists; name a new file (a backup never overwrites)\n`,
    );

    const missing = join(dir, 'no-such.db');
    const noSource = await cli(['db', 'backup', join(dir, 'x.db'), '--db', missing]);
    expect(noSource.code).toBe(2);
    expect(noSource.stderr).toContain(`${missing}: cannot open the database`);
    expect(existsSync(missing)).toBe(false);
    expect(existsSync(join(dir, 'x.db'))).toBe(false);

    const noDir = await cli(['db', 'backup', join(dir, 'nope', 'b.db'), '--db', db]);
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toContain('does not exist');

    for (const args of [['db'], ['db', 'restore', 'f.db'], ['db', 'backup'], ['db', 'backup', 'a', 'b']]) {
      const bad = await cli(args);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(bad.stderr).toContain('the command is db backup FILE');
    }
    const foreign = await cli(['db', 'backup', join(dir, 'y.db'), '--spec', 'x.yaml']);
    expect(foreign.stderr).toContain('db does not take --spec');
  });
});

describe('activity retention (§9.2)', () => {
  const DAY = 86_400_000;
  const at = (q: TestProtocol, daysAgo: number) =>
    activityRecord(q.clock.now() - daysAgo * DAY, `test.${daysAgo}`);
  const types = async (q: TestProtocol): Promise<string[]> =>
    (await q.proxy.protocol.store.activity({ limit: 100 }))
      .map((r) => r.type)
      .filter((t) => t.startsWith('test.'))
      .sort();

  it('by default records older than 90 days are deleted, newer ones kept', async () => {
    await p.proxy.protocol.store.appendActivities([at(p, 91), at(p, 89)]);
    expect(await p.proxy.pruneActivity()).toBe(1);
    expect(await types(p)).toEqual(['test.89']);
  });

  it('audit.retention from the config file; null keeps everything', async () => {
    for (const [retention, expected] of [
      ['7d', ['test.1']],
      ['null', ['test.1', 'test.8']],
    ] as const) {
      const config = join(dir, `retention-${retention}.yaml`);
      writeFileSync(config, `apis:\n  - spec: ${PETSTORE}\naudit:\n  retention: ${retention}\n`);
      const q = await startProtocol({ overrides: { config, db: join(dir, `retention-${retention}.db`) } });
      try {
        await q.proxy.protocol.store.appendActivities([at(q, 8), at(q, 1)]);
        await q.proxy.pruneActivity();
        expect(await types(q)).toEqual(expected);
      } finally {
        await q.close();
      }
    }
  });
});
