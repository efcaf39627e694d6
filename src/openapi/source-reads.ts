/**
 * What a loaded document was read from, so that a reload can tell that nothing it would read has
 * changed, and keep the catalog in force, without parsing or deriving anything again (Microsoft
 * Graph's 20 MB: a reload that reads and hashes it again takes 0.06-0.07 s; one that loads it,
 * 1.8 s and a second catalog's memory). Every read that went into a document is recorded with a
 * SHA-256 of the bytes read: the root, and each file or URL a `$ref` reached. Parsing is
 * deterministic, so contents that hash the same lead to the same `$ref`s, hence the same reads,
 * hence the same document; a read that now fails or differs means the document must be loaded
 * again.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { FileResolver } from '@apidevtools/json-schema-ref-parser';
import { fetchDocument, type FetchedDocument, type FetchLimits } from './fetch.js';

export interface SourceRead {
  /** A local path (`text`), a location as the bundler's file resolver takes it, or a URL. */
  readonly location: string;
  /** Read here as JSON text (a local JSON root: json-text.ts), by the bundler's file resolver, or fetched. */
  readonly as: 'text' | 'file' | 'url';
  readonly sha256: string;
  /**
   * Fetched: the URL it was served from after redirects, part of what was read, since a remote
   * root's relative `$ref`s resolve against it.
   */
  readonly servedFrom?: string;
  /** Fetched from public addresses only (a remote spec's `$ref`: public-address.ts), and so again. */
  readonly publicOnly?: boolean;
}

/**
 * The bundler's own file resolver (json-schema-ref-parser's), so that a file is read again from
 * exactly the path the bundler made of its `$ref`, with no second copy of that URL-to-path logic.
 * Its `read` is typed as every resolver's is (string, object or function); this one is a function
 * that reads only the file's `url` and resolves to its bytes (lib/resolvers/file.js).
 */
export const bundlerFileResolver = FileResolver as typeof FileResolver & {
  read: (file: { readonly url: string }) => Promise<Buffer>;
};

/** The reads of one load, in the order they happened. */
export class SourceReads {
  readonly #reads: SourceRead[] = [];

  /** A read of `location`, whose bytes had this digest (`digest`). */
  record(location: string, as: 'text' | 'file', sha256: string): void {
    this.#reads.push(Object.freeze({ location, as, sha256 }));
  }

  fetched(location: string, fetched: FetchedDocument, publicOnly = false): void {
    this.#reads.push(
      Object.freeze({
        location,
        as: 'url',
        sha256: digest(fetched.body),
        servedFrom: fetched.url,
        ...(publicOnly ? { publicOnly } : {}),
      }),
    );
  }

  list(): readonly SourceRead[] {
    return Object.freeze([...this.#reads]);
  }
}

/**
 * Whether every one of `reads` gives the same contents now. One at a time, so that no two large
 * documents are held at once; a failure counts as a change (a load then reports it).
 */
export async function unchangedSources(
  reads: readonly SourceRead[],
  limits: Partial<FetchLimits>,
): Promise<boolean> {
  for (const read of reads) {
    try {
      if (!(await readsTheSame(read, limits))) return false;
    } catch {
      return false;
    }
  }
  return true;
}

async function readsTheSame(read: SourceRead, limits: Partial<FetchLimits>): Promise<boolean> {
  switch (read.as) {
    case 'text':
      return (await digestOfFile(read.location)) === read.sha256;
    case 'file':
      return digest(await bundlerFileResolver.read({ url: read.location })) === read.sha256;
    case 'url': {
      const fetched = await fetchDocument(read.location, { ...limits, publicOnly: read.publicOnly === true });
      return fetched.url === read.servedFrom && digest(fetched.body) === read.sha256;
    }
  }
}

/**
 * The file's digest, read a piece at a time: the whole of it at once (Microsoft Graph's: 20 MB)
 * would be garbage only a full collection frees, and a reload that keeps its catalog runs none.
 */
async function digestOfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('base64');
}

/** SHA-256, base64: what reads are compared by. */
export function digest(content: Buffer): string {
  return createHash('sha256').update(content).digest('base64');
}
