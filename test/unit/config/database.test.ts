/**
 * Choosing the store (issue 13): a path keeps SQLite, a postgres:// URL selects PostgreSQL, and
 * the password may come from the environment or a file instead of the URL, never twice and never
 * into a log line or an error message.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  describeDatabase,
  redactedUrl,
  resolveDatabase,
  type PostgresConfig,
} from '../../../src/config/database.js';

const POSTGRES: PostgresConfig = { pool_size: 10, connection_timeout_ms: 5000, statement_timeout_ms: 5000 };
const base = { postgres: POSTGRES, base: '/etc/proxy', cwd: '/work', env: {} };

describe('resolveDatabase', () => {
  it('keeps SQLite for a path: --db relative to the working directory, database relative to the config', () => {
    expect(resolveDatabase({ ...base, flag: 'x.db', configured: undefined })).toEqual({
      kind: 'sqlite',
      file: '/work/x.db',
    });
    expect(resolveDatabase({ ...base, flag: undefined, configured: 'y.db' })).toEqual({
      kind: 'sqlite',
      file: '/etc/proxy/y.db',
    });
    expect(resolveDatabase({ ...base, flag: undefined, configured: undefined })).toEqual({
      kind: 'sqlite',
      file: '/work/data/agent-auth-proxy.db',
    });
  });

  it('keeps :memory: a throwaway database from the config key as from the flag, not a file of that name', () => {
    for (const named of [
      { flag: ':memory:', configured: undefined },
      { flag: undefined, configured: ':memory:' },
    ]) {
      expect(resolveDatabase({ ...base, ...named })).toEqual({ kind: 'sqlite', file: ':memory:' });
    }
  });

  it('selects PostgreSQL for postgres:// and postgresql:// URLs, with the pool settings', () => {
    for (const url of ['postgres://aap@db:5432/aap', 'postgresql://aap@db/aap']) {
      expect(resolveDatabase({ ...base, flag: url, configured: undefined })).toEqual({
        kind: 'postgres',
        url,
        poolSize: 10,
        connectionTimeoutMs: 5000,
        statementTimeoutMs: 5000,
      });
    }
  });

  it('puts the password from AGENT_AUTH_PROXY_DB_PASSWORD or postgres.password_file into the URL', () => {
    const fromEnv = resolveDatabase({
      ...base,
      flag: 'postgres://aap@db:5432/aap',
      configured: undefined,
      env: { AGENT_AUTH_PROXY_DB_PASSWORD: 's3cret/with@odd:chars' },
    });
    expect(fromEnv.kind === 'postgres' && new URL(fromEnv.url).password).toBe(
      encodeURIComponent('s3cret/with@odd:chars'),
    );
    const dir = mkdtempSync(join(tmpdir(), 'aap-dbpw-'));
    writeFileSync(join(dir, 'pw'), 'from-a-file\n');
    const fromFile = resolveDatabase({
      ...base,
      base: dir,
      flag: undefined,
      configured: 'postgres://aap@db/aap',
      postgres: { ...POSTGRES, password_file: 'pw' },
    });
    expect(fromFile.kind === 'postgres' && new URL(fromFile.url).password).toBe('from-a-file');
  });

  it('refuses two passwords, a URL without a host and an unreadable password file, without echoing secrets', () => {
    const call =
      (flag: string, env: Record<string, string> = {}, passwordFile?: string): (() => unknown) =>
      () =>
        resolveDatabase({
          ...base,
          flag,
          configured: undefined,
          env,
          postgres: { ...POSTGRES, ...(passwordFile ? { password_file: passwordFile } : {}) },
        });
    expect(call('postgres://aap:inline-pw@db/aap', { AGENT_AUTH_PROXY_DB_PASSWORD: 'other-pw' })).toThrow(
      /has a password and AGENT_AUTH_PROXY_DB_PASSWORD gives another/,
    );
    expect(call('postgres:///aap')).toThrow(/names no host/);
    expect(call('postgres://aap@db/aap', {}, '/nonexistent/pw')).toThrow(/password_file: .* not found/);
    try {
      call('postgres://aap:inline-pw@db:bad-port/aap')();
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/not a valid postgres:\/\/ URL/);
      expect((err as Error).message).not.toContain('inline-pw');
    }
  });
});

describe('what a log line shows of the database', () => {
  it('the file, or the URL with its password replaced', () => {
    expect(describeDatabase({ kind: 'sqlite', file: '/data/p.db' })).toBe('/data/p.db');
    const shown = describeDatabase({
      kind: 'postgres',
      url: 'postgres://aap:hunter2-secret@db:5432/aap?sslmode=require&password=also-secret',
      poolSize: 1,
      connectionTimeoutMs: 1,
      statementTimeoutMs: 1,
    });
    expect(shown).not.toContain('hunter2-secret');
    expect(shown).not.toContain('also-secret');
    expect(shown).toContain('db:5432/aap');
    expect(redactedUrl('not a url :pw')).toBe('(invalid URL)');
  });
});
