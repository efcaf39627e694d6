/**
 * Issue 12: SIGHUP to the built CLI (`node dist/cli.js serve`) reloads the OpenAPI documents
 * without a restart; observed through /capability/list.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { serveCli } from '../../helpers/cli-serve.js';
import { ensureBuiltCli, killChildren, ROOT } from '../../helpers/cli-process.js';
import { notesSpec } from '../../helpers/notes-spec.js';

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
