/**
 * Loading OpenAPI documents from files or URLs and resolving their `$ref`s with swagger-parser's
 * bundler, so that only document-local `$ref`s remain. A spec is untrusted input: remote `$ref`s
 * are fetched only when the operator allows it, through the same guarded fetcher as remote specs
 * (§8.12), and a remote spec can never read local files.
 */
import { existsSync, statSync, type Stats } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve as resolvePath, sep } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
// The bundler's own file-URL → path rule (its package has no exports map; the version is pinned).
import { toFileSystemPath } from '@apidevtools/json-schema-ref-parser/dist/lib/util/url.js';
import { parse as parseYaml } from 'yaml';
import { UserError } from '../errors.js';
import { hasOnlyPlainLocalRefs } from './local-refs.js';
import { toPointer } from './pointer.js';
import {
  DEFAULT_FETCH_LIMITS,
  fetchDocument,
  NotPublicFetch,
  type FetchLimits,
  type SharedBytes,
  formatBytes,
} from './fetch.js';
import { refIsPublicOnly } from './public-address.js';
import { maskUrlsIn, shownUrl } from '../util/shown-url.js';
import { bundlerFileResolver, digest, type SourceReads } from './source-reads.js';
import { jsonTextOf, readJsonText } from './json-text.js';
import { collectGarbage } from '../util/collect-garbage.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

export interface LoadOptions {
  /** Allow `$ref`s to http(s) URLs inside documents. */
  readonly allowRemoteRefs: boolean;
  /** Let a local document's `$ref`s read files outside its own directory (default: refused). */
  readonly allowLocalRefsAnywhere?: boolean;
  /** Allow plain-http URLs for specs and remote `$ref`s. */
  readonly allowHttp: boolean;
  readonly fetchLimits?: Partial<FetchLimits>;
}

export interface LoadedDocument {
  readonly source: string;
  readonly doc: unknown;
}

/** The limits remote documents and `$ref`s are fetched with. */
export function fetchLimitsOf(options: LoadOptions): Partial<FetchLimits> {
  return { ...DEFAULT_FETCH_LIMITS, ...options.fetchLimits, allowHttp: options.allowHttp };
}

export function isUrl(source: string): boolean {
  return /^https?:\/\//i.test(source);
}

/**
 * `source` loaded and bundled. With `reads`, everything read for it is recorded there, so that a
 * reload can tell whether it would read the same (source-reads.ts).
 */
export async function loadDocument(
  source: string,
  options: LoadOptions,
  reads?: SourceReads,
): Promise<LoadedDocument> {
  const limits = fetchLimitsOf(options);
  const remoteRoot = isUrl(source);
  // What messages, warnings and the start-up log name the document by: a token in a spec URL's
  // query (how some hosts serve private documents) is fetched with, never shown.
  const shown = remoteRoot ? shownUrl(source) : source;
  let location = source;
  let parsed: unknown;
  let rootAddress: string | undefined;
  if (remoteRoot) {
    const fetched = await fetchDocument(source, limits);
    location = fetched.url;
    rootAddress = fetched.address;
    reads?.fetched(source, fetched);
    parsed = parseFetched(fetched.body, shown);
  } else {
    location = resolvePath(source);
    if (!existsSync(location) || !statSync(location).isFile())
      throw new UserError(`${source}: spec file not found`);
  }

  // json-schema-ref-parser replaces a resolver's error with `Error reading file "<url>"`; the
  // reason (remote $refs not allowed, plain http, a local file from a remote spec, a failed
  // fetch…) is kept here per URL and put back into the message.
  const reasons = new Map<string, string>();
  const remember = <E>(url: string, err: E): E => {
    if (err instanceof UserError) reasons.set(url, err.message);
    return err;
  };
  let rootDirs: Promise<readonly string[] | undefined> | undefined;
  const remoteBudget = new RemoteRefBudget(limits.maxBytes ?? DEFAULT_FETCH_LIMITS.maxBytes);
  const resolvers = {
    // Built-in resolvers are replaced: the file one is refused to remote documents (and records
    // what it reads for the others), and the HTTP one ignores our size, timeout and scheme limits.
    file: remoteRoot
      ? false
      : {
          ...bundlerFileResolver,
          read: async (file: { url: string }): Promise<Buffer> => {
            // Worked out once per load, not once per file a multi-file document reads.
            rootDirs ??= options.allowLocalRefsAnywhere ? Promise.resolve(undefined) : documentDirs(location);
            await checkLocalFile(
              file.url,
              limits.maxBytes ?? DEFAULT_FETCH_LIMITS.maxBytes,
              await rootDirs,
            ).catch((err: unknown) => {
              throw remember(file.url, err);
            });
            const bytes = await bundlerFileResolver.read(file);
            reads?.record(file.url, 'file', digest(bytes));
            return bytes;
          },
        },
    http: false,
    guardedHttp: {
      order: 1,
      canRead: /^https?:\/\//i,
      read: async (file: { url: string }): Promise<Buffer> => {
        try {
          if (!options.allowRemoteRefs) {
            throw new UserError(
              `remote $ref to ${file.url} is not allowed; pass --allow-remote-refs (or specs.allow_remote_refs: true) to fetch it`,
            );
          }
          // A remote spec's $refs were chosen by whoever serves it (public-address.ts); a local
          // spec is the operator's.
          const publicOnly = remoteRoot && refIsPublicOnly({ url: location, address: rootAddress }, file.url);
          const fetched = await fetchDocument(file.url, {
            ...limits,
            ...remoteBudget.next(file.url),
            publicOnly,
          });
          reads?.fetched(file.url, fetched, publicOnly);
          return fetched.body;
        } catch (err) {
          throw remember(file.url, err instanceof NotPublicFetch ? notPublicRef(err) : err);
        }
      },
    },
    refuseOther: {
      order: 2,
      canRead: (file: { url: string }) =>
        !/^https?:\/\//i.test(file.url) && (remoteRoot || /^[a-z][a-z0-9+.-]+:/i.test(file.url)),
      read: (file: { url: string }): Promise<Buffer> =>
        Promise.reject(
          remember(
            file.url,
            new UserError(
              `$ref to ${file.url} is not allowed${remoteRoot ? ': a remote spec cannot read local files' : ''}`,
            ),
          ),
        ),
    },
  };

  try {
    // The typings do not admit custom resolvers; the runtime does (json-schema-ref-parser options).
    const bundle = SwaggerParser.bundle.bind(SwaggerParser) as unknown as (
      ...args: unknown[]
    ) => Promise<unknown>;
    const parse = SwaggerParser.parse.bind(SwaggerParser) as unknown as (
      ...args: unknown[]
    ) => Promise<unknown>;
    // The root is parsed on its own, without continueOnError: with it, a root that is not valid
    // YAML/JSON reaches swagger-parser as null and fails with an unrelated TypeError. A local
    // JSON root parsed here still goes through swagger-parser's checks of its version fields;
    // a file that cannot be read fails here, reported below with its name like other load errors.
    let root = parsed;
    if (!remoteRoot) {
      const json = readJsonFile(location, reads);
      root =
        json === undefined
          ? await parse(location, { resolve: resolvers })
          : await parse(location, json, { resolve: resolvers });
    }
    // Parsing and the walk below are each a long step on a large document: a turn between them.
    await nextTurn();
    if (hasOnlyPlainLocalRefs(root)) return { source: shown, doc: root };
    const doc = await bundle(location, root, { resolve: resolvers, continueOnError: true });
    return { source: shown, doc };
  } catch (err) {
    // Remote $refs may carry tokens in their queries too.
    throw new UserError(maskUrlsIn(describeLoadError(shown, location, err, reasons)));
  }
}

/**
 * A local JSON document parsed here rather than by swagger-parser, which reads the file into a
 * Buffer and keeps it while it parses the text decoded from it. Here the file is read 64 KiB at
 * a time into text held one byte a character (json-text.ts), and a full collection before
 * parsing frees the pieces it was read in: parsing is the peak of loading a document. Microsoft
 * Graph beta's 47 MB peaked at 309 MiB with its 45 MiB of bytes beside 90 MiB of text (two bytes
 * a character) and the 69 MiB parsed, and at 230 MiB without the bytes. Undefined for anything
 * but JSON text, which swagger-parser parses and reports on as before (reading the file again,
 * through the resolver that records it).
 */
function readJsonFile(path: string, reads: SourceReads | undefined): unknown {
  // Only a load that records its reads hashes (`serve`; `capabilities` and `check` do not).
  const { text, sha256 } = readJsonText(path, { digest: reads !== undefined });
  if (!/^\s*\{/.test(text)) return undefined;
  if (sha256 !== undefined) reads?.record(path, 'text', sha256);
  collectGarbage();
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A fetched root: JSON held one byte a character (json-text.ts), as a local one is; else YAML. */
function parseFetched(body: Buffer, source: string): unknown {
  const json = jsonTextOf(body);
  if (json !== undefined) {
    try {
      return JSON.parse(json);
    } catch {
      // Reported below from the text as the server sent it, where positions are its own.
    }
  }
  return parseText(body.toString('utf8'), source);
}

function parseText(text: string, source: string): unknown {
  try {
    return text.trimStart().startsWith('{') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new UserError(`${source}: not valid JSON or YAML: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
}

interface ParserErrorLike {
  name?: string;
  message?: string;
  source?: string;
  path?: readonly (string | number)[] | null;
  errors?: readonly ParserErrorLike[];
}

/** swagger-parser errors → one message per problem: file, JSON pointer, what is wrong. */
function describeLoadError(
  source: string,
  root: string,
  err: unknown,
  reasons: ReadonlyMap<string, string>,
): string {
  if (err instanceof UserError) return err.message;
  const e = err as ParserErrorLike;
  const list: readonly ParserErrorLike[] = e.errors && e.errors.length > 0 ? e.errors : [e];
  const lines = list.map((item) => {
    const where = item.path && item.path.length > 0 ? ` at ${toPointer(item.path.map(String))}` : '';
    const file = item.source ?? source;
    const message = (item.message ?? String(err)).split('\n')[0] ?? '';
    const unreadable =
      item.name === 'ResolverError' ? /^Error reading file "(.*)"$/.exec(message)?.[1] : undefined;
    const reason = unreadable === undefined ? undefined : reasons.get(unreadable);
    if (reason !== undefined) return `${file}${where}: ${reason}`;
    if (item.name === 'MissingPointerError') {
      // The pointer is where the $ref stands in the root document; the error's source is the file
      // the $ref points into, which differs from the root for a $ref into another file.
      const hash = /Missing \$ref pointer "([^"]*)"/.exec(message)?.[1];
      const inRoot = item.source === undefined || item.source === root;
      const target = hash === undefined ? undefined : inRoot ? hash : `${file}${hash}`;
      return `${inRoot ? file : root}${where}: dangling $ref${target ? ` "${target}"` : ''}: ${message}`;
    }
    return `${file}${where}: ${message}`;
  });
  return lines.length === 1
    ? (lines[0] as string)
    : `${source}: ${lines.length} problems:\n  ${lines.join('\n  ')}`;
}

/**
 * A file a local document's `$ref` names is read only if it is a regular file within the size a
 * fetched document may have: a FIFO or device (`/dev/stdin`, `/dev/zero`) would leave loading
 * waiting, or reading, for ever. With `within` (documentDirs), only a file under one of those
 * directories (its symbolic links resolved), so that a document cannot show agents another file
 * of the machine (the proxy's own config and its credentials, say) in a description. One that
 * does not exist is left to the resolver's own message.
 */
async function checkLocalFile(
  url: string,
  maxBytes: number,
  within: readonly string[] | undefined,
): Promise<void> {
  const path = toFileSystemPath(url).replace(/[/\\]$/, '');
  let stats: Stats;
  let real: string;
  try {
    stats = await stat(path);
    real = await realpath(path);
  } catch {
    return;
  }
  if (within !== undefined && !within.some((dir) => isUnder(dir, real))) {
    throw new UserError(
      `$ref to ${url} is not allowed: outside the document's directory; pass --allow-local-refs-anywhere (or specs.allow_local_refs_anywhere: true) to allow it`,
    );
  }
  if (!stats.isFile()) throw new UserError(`$ref to ${url} is not allowed: not a regular file`);
  if (stats.size > maxBytes) {
    throw new UserError(
      `$ref to ${url} is not allowed: larger than ${maxBytes} bytes (the document size limit)`,
    );
  }
}

/**
 * The directories a local document's `$ref`s may read under: its directory as named, and the one
 * it really is in (symbolic links resolved on both sides, as a Kubernetes ConfigMap mount uses them).
 */
async function documentDirs(root: string): Promise<readonly string[]> {
  return [await realpath(dirname(root)), dirname(await realpath(root))];
}

/** Whether `path` is `dir` itself or lies below it. */
function isUnder(dir: string, path: string): boolean {
  const from = relative(dir, path);
  return from === '' || (!isAbsolute(from) && from !== '..' && !from.startsWith(`..${sep}`));
}

function notPublicRef(err: NotPublicFetch): UserError {
  return new UserError(
    `${err.message} A remote spec's $refs reach only public addresses (and its own origin, when that is private); to use a document on a private address, download the spec and its documents and load them as files.`,
  );
}

/** Remote `$ref`s one document may fetch, and the time all of them together may take. */
export const MAX_REMOTE_REFS = 100;
export const REMOTE_REFS_DEADLINE_MS = 60_000;
/** What all of one document's remote `$ref`s may add up to, in multiples of the size cap. */
const REMOTE_REFS_SIZE_FACTOR = 4;

/**
 * What one document's remote `$ref`s may take together: each is capped on its own
 * (`specs.max_bytes`, the fetch deadline), but a document naming many would otherwise make the
 * proxy read and hold that many times the cap, and hold a reload for that many deadlines. They
 * are fetched at once, so bytes are counted as they arrive.
 */
class RemoteRefBudget implements SharedBytes {
  private fetches = 0;
  private bytes = 0;
  private readonly until = Date.now() + REMOTE_REFS_DEADLINE_MS;
  readonly description: string;

  constructor(private readonly maxBytes: number) {
    this.description = `one document's remote $refs may add up to at most ${formatBytes(maxBytes * REMOTE_REFS_SIZE_FACTOR)} (${REMOTE_REFS_SIZE_FACTOR} × the document size limit)`;
  }

  /** The limits of the next fetch, or a UserError once there may be no more. */
  next(url: string): { deadlineMs: number; shared: SharedBytes } {
    const left = this.until - Date.now();
    if (++this.fetches > MAX_REMOTE_REFS || left <= 0) {
      throw new UserError(
        `$ref to ${url} is not fetched: one document may fetch at most ${MAX_REMOTE_REFS} remote $refs, within ${REMOTE_REFS_DEADLINE_MS / 1000} s`,
      );
    }
    return { deadlineMs: Math.min(left, DEFAULT_FETCH_LIMITS.deadlineMs), shared: this };
  }

  take(bytes: number): boolean {
    this.bytes += bytes;
    return this.bytes <= this.maxBytes * REMOTE_REFS_SIZE_FACTOR;
  }
}
