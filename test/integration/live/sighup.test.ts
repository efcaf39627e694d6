/**
 * Issue 12: SIGHUP to the built CLI (`node dist/cli.js serve`) reloads the OpenAPI documents
 * without a restart; observed through /capability/list.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { serveCli } from '../../helpers/cli-serve.js';
import { ensureBuiltCli, killChildren, ROOT } from '../../helpers/cli-process.js';
import { notesSpec } from '../../helpers/notes-spec.js';
import { syntheticSpec } from '../../helpers/synthetic-spec.js';

const children = new Set<ChildProcess>();
beforeAll(() => {
  expect(ensureBuiltCli(), 'dist/cli.js is missing: run npm run build').toBe(true);
});
afterEach(() => killChildren(children));

async function names(url: string): Promise<string[]> {
  const body = (await (await fetch(`${url}/capability/list`)).json()) as { capabilities: { name: string }[] };
  return body.capabilities.map((c) => c.name);
}

it('SIGHUP re-reads the documents of a running proxy', async () => {
  const spec = notesSpec();
  const db = join(mkdtempSync(join(tmpdir(), 'aap-sighup-')), 'proxy.db');
  const served = await serveCli(['--spec', spec, '--upstream', 'http://127.0.0.1:9', '--db', db], {
    cwd: ROOT,
    children,
  });
  expect(await names(served.url)).toEqual(['get_note', 'list_notes']);
  writeFileSync(spec, readFileSync(notesSpec({ withList: false }), 'utf8'));
  served.child.kill('SIGHUP');
  const deadline = Date.now() + 5_000;
  let seen = await names(served.url);
  while (seen.length !== 1 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    seen = await names(served.url);
  }
  expect(seen).toEqual(['get_note']);
  served.child.kill('SIGTERM');
  expect((await served.exited).code).toBe(0);
});

/** Whether process `pid` has a handler for SIGHUP (bit 0 of SigCgt in /proc/PID/status). */
async function catchesSighup(pid: number): Promise<boolean> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return mask !== undefined && (BigInt(`0x${mask}`) & 1n) === 1n;
}

it('SIGHUP while a large document is still loading neither ends the process nor is lost', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aap-sighup-'));
  const spec = join(dir, 'large.json');
  // Thousands of operations: loading takes long enough to signal the process in the middle of it.
  writeFileSync(spec, JSON.stringify(syntheticSpec(1500)));
  const starting = serveCli(['--spec', spec, '--upstream', 'http://127.0.0.1:9', '--db', join(dir, 'p.db')], {
    cwd: ROOT,
    children,
  });
  const child = [...children].at(-1)!;
  let logged = false;
  child.stdout?.once('data', () => (logged = true));
  // The handler must be there before anything is loaded: before the first line is logged.
  const deadline = Date.now() + 10_000;
  while (!logged && !(await catchesSighup(child.pid!)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2));
  }
  expect(logged, 'the process logged before it could take a SIGHUP').toBe(false);
  child.kill('SIGHUP');
  const served = await starting;
  // The reload asked for while loading runs once the proxy serves.
  const reloadDeadline = Date.now() + 10_000;
  while (!served.logs().some((l) => l.msg === 'reloaded') && Date.now() < reloadDeadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const messages = served.logs().map((l) => l.msg);
  expect(messages.indexOf('reloaded')).toBeGreaterThan(messages.indexOf('listening'));
  served.child.kill('SIGTERM');
  expect((await served.exited).code).toBe(0);
}, 30_000);
