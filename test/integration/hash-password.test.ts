/** `agent-auth-proxy hash-password` run as an operator would: the password on stdin, the hash on stdout. */
import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuiltCli, ROOT } from '../helpers/cli-process.js';
import { parsePasswordHash, verifyPassword } from '../../src/util/password.js';

function run(
  stdin: string,
  args: string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'hash-password', ...args], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

beforeAll(() => {
  expect(ensureBuiltCli()).toBe(true);
});

describe('agent-auth-proxy hash-password', () => {
  it('prints a scrypt hash of the password on stdin (one trailing newline is not part of it)', async () => {
    const result = await run('correct horse battery staple\n');
    expect(result.code).toBe(0);
    const hash = result.stdout.trim();
    expect(hash).toMatch(/^scrypt\$32768\$8\$1\$/);
    const parsed = parsePasswordHash(hash);
    expect(await verifyPassword('correct horse battery staple', parsed)).toBe(true);
    expect(await verifyPassword('correct horse battery staple\n', parsed)).toBe(false);
  });

  it('refuses an empty or short password instead of hashing it', async () => {
    const result = await run('\n');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('at least 8 characters');
  });

  it('takes no password from argv (argv is visible to other users)', async () => {
    const result = await run('', ['hunter2-hunter2']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });
});
