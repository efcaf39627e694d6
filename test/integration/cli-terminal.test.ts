/**
 * What the command line prints of an OpenAPI document (untrusted input, README): its summaries'
 * terminal escape sequences are shown as escapes (`\u001b`), by the proxy's own `capabilities`
 * and by the agent client reading them from a real proxy. Observed before: printed raw, so a
 * document could clear the operator's screen and write lines of its own.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { startProtocol, type TestProtocol } from '../helpers/protocol.js';

const ESC = '\u001b';
let dir: string;
let spec: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-audit-out-'));
  spec = join(dir, 'hostile.json');
  writeFileSync(
    spec,
    JSON.stringify({
      openapi: '3.0.3',
      info: { title: 'hostile', version: '1' },
      servers: [{ url: 'https://api.example.com' }],
      paths: {
        '/pets': {
          get: {
            operationId: 'list_pets',
            // Clears the screen, homes the cursor, and writes what the operator should believe.
            summary: `List pets${ESC}[2J${ESC}[H${ESC}]0;title\u0007`,
            responses: { '200': { description: 'ok' } },
          },
        },
      },
    }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const ran = { code: 0, stdout: '', stderr: '' };
  const io = { out: (t: string) => void (ran.stdout += t), err: (t: string) => void (ran.stderr += t) };
  ran.code = await runCli(argv, io);
  return ran;
}

describe('text from an OpenAPI document on the terminal', () => {
  it('capabilities (table) shows a summary’s escape sequences as escapes', async () => {
    const ran = await run(['capabilities', '--spec', spec]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toContain('list_pets');
    expect(ran.stdout).not.toContain(ESC);
  });
});

describe('the same document through a real proxy to the agent client', () => {
  let p: TestProtocol;
  beforeAll(async () => {
    p = await startProtocol({ overrides: { mockUpstream: true, specs: [spec] } });
  });
  afterAll(async () => {
    await p.close();
  });

  it('shows its escape sequences as escapes too', async () => {
    const file = join(dir, 'agent.json');
    const out = { code: 0, stdout: '', stderr: '' };
    const io = { out: (t: string) => void (out.stdout += t), err: (t: string) => void (out.stderr += t) };
    const rt = { now: () => p.clock.now(), sleep: () => Promise.resolve() };
    expect(await runCli(['agent', 'init', '--file', file], io, rt)).toBe(0);
    out.stdout = '';
    out.code = await runCli(['agent', 'capabilities', '--file', file, '--url', p.proxy.url], io, rt);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain('list_pets');
    expect(out.stdout).not.toContain(ESC);
  });
});
