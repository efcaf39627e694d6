/**
 * Catalog figures of real documents (issue 14): the shared corpus and the large-API corpus of
 * scripts/api-corpus.json, each in fresh processes of the built proxy (dist/):
 *   - catalog: the document loaded into the catalog `serve` would serve; time, peak RSS, and the
 *     largest capability (JSON.stringify length of its input + output schemas);
 *   - serve: `agent-auth-proxy serve` from spawn until discovery answers, and its peak RSS;
 *   - capabilities --json: peak RSS and the size of what it prints.
 * A child that fails or crashes is a row with its error, never the end of the run.
 */
import { spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureApiCorpus } from '../scripts/fetch-api-corpus.js';
import { CORPUS_DIR, corpusDocuments } from '../test/helpers/corpus.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const CATALOG_CHILD = fileURLToPath(new URL('./corpus-catalog-child.mjs', import.meta.url));
const MAX_RSS_HOOK = fileURLToPath(new URL('./report-max-rss.mjs', import.meta.url));
const CHILD_TIMEOUT_MS = 300_000;

export interface CorpusDocumentRef {
  readonly id: string;
  /** The shared corpus, the large-API corpus, or any other file named on the command line. */
  readonly set: 'shared' | 'large' | 'file';
  readonly flavour: string;
  readonly file: string;
}

export type Outcome<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

export interface CatalogFigures {
  readonly ms: number;
  readonly capabilities: number;
  readonly maxRssMiB: number;
  /** The largest capability as agents are shown it. */
  readonly largest: { readonly name: string; readonly kib: number };
  /** The largest with every component it reaches whole (what it was before summarizing). */
  readonly largestReached: { readonly name: string; readonly kib: number };
  /** Capabilities shown with some components summarized. */
  readonly summarized: number;
  readonly over256KiB: number;
}

export interface CorpusRow extends CorpusDocumentRef {
  readonly sizeMiB: number;
  readonly catalog: Outcome<CatalogFigures>;
  readonly serve: Outcome<{ readonly ms: number; readonly maxRssMiB: number }>;
  readonly json: Outcome<{ readonly maxRssMiB: number; readonly outputMiB: number }>;
}

/**
 * The documents to measure: the shared corpus, then the large set (fetched first if missing); or,
 * given `ids`, those in that order, each a corpus document's id or the path of any other OpenAPI
 * file (the public collection's Microsoft Graph beta, say).
 */
export function corpusBenchDocuments(options: { ids?: readonly string[] }): CorpusDocumentRef[] {
  const shared = corpusDocuments().map((d) => ({
    id: d.id,
    set: 'shared' as const,
    flavour: d.flavour,
    file: `${CORPUS_DIR}${d.entry}`,
  }));
  const large = ensureApiCorpus((line) => {
    console.log(line);
  }).map((d) => ({ id: d.id, set: 'large' as const, flavour: d.flavour, file: d.file }));
  const known: CorpusDocumentRef[] = [...shared, ...large];
  const ids = options.ids ?? [];
  if (ids.length === 0) return known;
  return ids.map((id) => known.find((d) => d.id === id) ?? fileDocument(id));
}

function fileDocument(path: string): CorpusDocumentRef {
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new Error(`${path}: neither the id of a corpus document nor a file`);
  }
  return {
    id: basename(path).replace(/\.(json|ya?ml)$/i, ''),
    set: 'file',
    flavour: flavourOf(path),
    file: path,
  };
}

/** The version field near the top of a document, as the corpus lists name flavours. */
function flavourOf(path: string): string {
  const fd = openSync(path, 'r');
  const bytes = Buffer.alloc(64 * 1024);
  const head = bytes.toString('utf8', 0, readSync(fd, bytes));
  closeSync(fd);
  const version = /["']?(openapi|swagger)["']?\s*:\s*["']?(\d+\.\d+)/.exec(head);
  if (version === null) return 'unknown';
  return version[1] === 'swagger' ? `swagger-${version[2]}` : `openapi-${version[2]}`;
}

export async function runCorpusBench(
  docs: readonly CorpusDocumentRef[],
  onRow: (row: CorpusRow) => void,
): Promise<CorpusRow[]> {
  const rows: CorpusRow[] = [];
  for (const doc of docs) {
    const row: CorpusRow = {
      ...doc,
      sizeMiB: statSync(doc.file).size / 2 ** 20,
      catalog: await measureCatalog(doc.file),
      serve: await measureServe(doc.file),
      json: await measureCapabilitiesJson(doc.file),
    };
    onRow(row);
    rows.push(row);
  }
  return rows;
}

async function measureCatalog(file: string): Promise<Outcome<CatalogFigures>> {
  const run = await runChild([CATALOG_CHILD, file], {});
  if (run.error !== undefined) return { ok: false, error: run.error };
  const out = JSON.parse(run.stdout) as {
    ms: number;
    capabilities: number;
    maxRssKiB: number;
    largest: { name: string; bytes: number };
    largestReached: { name: string; bytes: number };
    summarized: number;
    over256KiB: number;
  };
  return {
    ok: true,
    value: {
      ms: out.ms,
      capabilities: out.capabilities,
      maxRssMiB: out.maxRssKiB / 1024,
      largest: { name: out.largest.name, kib: out.largest.bytes / 1024 },
      largestReached: { name: out.largestReached.name, kib: out.largestReached.bytes / 1024 },
      summarized: out.summarized,
      over256KiB: out.over256KiB,
    },
  };
}

/**
 * `serve` from spawn (node's own start included) until /.well-known/agent-configuration answers,
 * and its peak RSS by then (VmHWM from /proc: Linux only). Run without the max-RSS preload, which
 * would add its own 20 MiB to the figure the GitHub target is about.
 */
async function measureServe(file: string): Promise<Outcome<{ ms: number; maxRssMiB: number }>> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-corpus-'));
  const started = performance.now();
  let ready = -1;
  let readyRssKiB = NaN;
  const run = await runChild(
    [
      CLI,
      'serve',
      '--spec',
      file,
      // Never called: start-up does not contact the upstream.
      '--upstream',
      'http://127.0.0.1:9',
      '--port',
      '0',
      '--db',
      join(dir, 'proxy.db'),
    ],
    {
      preload: false,
      onLine: async (line, stop, pid) => {
        const url = listeningUrl(line);
        if (url === undefined) return;
        for (;;) {
          const res = await fetch(`${url}/.well-known/agent-configuration`).catch(() => undefined);
          if (res?.ok) break;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        ready = performance.now() - started;
        readyRssKiB = peakRssKiB(pid);
        stop();
      },
    },
  );
  rmSync(dir, { recursive: true, force: true });
  if (ready < 0) return { ok: false, error: run.error ?? 'exited before listening' };
  return { ok: true, value: { ms: ready, maxRssMiB: readyRssKiB / 1024 } };
}

function peakRssKiB(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

function listeningUrl(line: string): string | undefined {
  try {
    const entry = JSON.parse(line) as { msg?: string; url?: string };
    return entry.msg === 'listening' ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

async function measureCapabilitiesJson(
  file: string,
): Promise<Outcome<{ maxRssMiB: number; outputMiB: number }>> {
  const run = await runChild([CLI, 'capabilities', '--spec', file, '--json'], { countOnly: true });
  if (run.error !== undefined) return { ok: false, error: run.error };
  return { ok: true, value: { maxRssMiB: run.maxRssKiB / 1024, outputMiB: run.stdoutBytes / 2 ** 20 } };
}

interface ChildRun {
  readonly stdout: string;
  readonly stdoutBytes: number;
  readonly maxRssKiB: number;
  /** Set when the child failed: its exit code or signal and the end of its stderr. */
  readonly error?: string;
}

/**
 * Runs `node ARGS`, by default with the max-RSS hook preloaded. `onLine` sees stdout line by line and may
 * stop the child (SIGTERM, a clean shutdown); `countOnly` counts stdout instead of keeping it.
 */
function runChild(
  args: readonly string[],
  options: {
    /** Preload report-max-rss.mjs (default); it costs the child about 20 MiB of RSS itself. */
    preload?: boolean;
    countOnly?: boolean;
    onLine?: (line: string, stop: () => void, pid: number | undefined) => Promise<void>;
  },
): Promise<ChildRun> {
  const dir = mkdtempSync(join(tmpdir(), 'aap-rss-'));
  const rssFile = join(dir, 'max-rss');
  const preload = options.preload === false ? [] : ['--import', MAX_RSS_HOOK];
  const child = spawn(process.execPath, [...preload, ...args], {
    env: { ...process.env, BENCH_MAX_RSS_FILE: rssFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stdoutBytes = 0;
  let stderr = '';
  let pending = '';
  let stopped = false;
  const stop = (): void => {
    stopped = true;
    child.kill('SIGTERM');
  };
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  child.stdout.on('data', (chunk: Buffer) => {
    stdoutBytes += chunk.length;
    if (options.countOnly) return;
    stdout += chunk.toString('utf8');
    if (!options.onLine) return;
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) void options.onLine(line, stop, child.pid);
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      let maxRssKiB = NaN;
      try {
        maxRssKiB = Number(readFileSync(rssFile, 'utf8'));
      } catch {
        // No exit hook ran: the process was killed or V8 aborted (out of memory).
      }
      rmSync(dir, { recursive: true, force: true });
      const failed = !stopped && (code !== 0 || signal !== null);
      resolve({
        stdout,
        stdoutBytes,
        maxRssKiB,
        ...(failed ? { error: `${signal ?? `exit ${code}`}: ${lastLines(stderr)}` } : {}),
      });
    });
  });
}

/** The error's own line (V8's and node's messages name it), else the last lines of stderr. */
function lastLines(text: string): string {
  const lines = text.trim().split('\n').filter(Boolean);
  const error = lines.find((l) => /error|out of memory/i.test(l) && !/^\s+at /.test(l));
  return (error ?? lines.slice(-2).join(' | ')).trim().slice(0, 300) || '(no output)';
}
