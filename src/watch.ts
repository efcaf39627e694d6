/**
 * `--watch` (issue 12): the config file, the policy file and local OpenAPI documents are watched,
 * and a change calls the same reload as SIGHUP after `debounceMs` of quiet (an editor's save is
 * several events; a deploy may write several files). Directories are watched, not files: editors
 * replace a file by renaming, which ends a watch on the file itself. A Kubernetes ConfigMap or
 * Secret volume never changes the file's own name: its files are links through `..data`, which
 * the kubelet swaps to a new `..<timestamp>` directory by renaming `..data_tmp`, so those names
 * count too (a reload whose files read the same changes nothing).
 */
import { statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, isAbsolute, resolve } from 'node:path';
import type { Settings } from './config/settings.js';

export const DEFAULT_WATCH_DEBOUNCE_MS = 300;
/** How the kubelet's atomic writer names its directories and link (`..data`, `..2024_…`). */
const ATOMIC_WRITER_PREFIX = '..';

/** The local files a reload reads: config, policy, documents (URLs are not watched). */
export function watchedFiles(settings: Settings, configFile: string | undefined): string[] {
  const files = [
    ...(configFile ? [resolve(configFile)] : []),
    ...(settings.policyFile ? [settings.policyFile] : []),
    ...settings.apis.map((a) => a.spec).filter((s) => isAbsolute(s)),
  ];
  return [...new Set(files)];
}

/** Starts watching; the returned function stops it. */
export function watchFiles(
  files: readonly string[],
  onChange: () => void,
  debounceMs = DEFAULT_WATCH_DEBOUNCE_MS,
): () => void {
  const byDir = new Map<string, Set<string>>();
  for (const f of files) {
    const names = byDir.get(dirname(f)) ?? new Set<string>();
    names.add(basename(f));
    byDir.set(dirname(f), names);
  }
  let timer: NodeJS.Timeout | undefined;
  const changed = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      onChange();
    }, debounceMs);
  };
  const watchers: FSWatcher[] = [];
  for (const [dir, names] of byDir) {
    const w = watch(dir, (_event, name) => {
      // Some platforms give no name: then any change in the directory counts.
      if (name === null || names.has(name) || name.startsWith(ATOMIC_WRITER_PREFIX)) changed();
    });
    w.unref();
    watchers.push(w);
  }
  return () => {
    if (timer) clearTimeout(timer);
    for (const w of watchers) w.close();
  };
}

/** Each file's stamp (device, inode, size, times) by its path: what tells a file changed since. */
export type FileStamps = ReadonlyMap<string, string>;

/**
 * The files' stamps now. stat follows links, so a ConfigMap's swapped `..data` shows as another
 * inode; a missing file has a stamp too.
 */
export function fileStamps(files: readonly string[]): Map<string, string> {
  return new Map(files.map((file) => [file, stampOf(file)]));
}

function stampOf(file: string): string {
  try {
    const s = statSync(file);
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return 'missing';
  }
}

/**
 * Starts watching the files stamped in `read` (taken before the proxy read them); the returned
 * function stops it. A change between that read and the watch's start, which the watch cannot
 * see (a proxy loads large documents for seconds), calls `onChange` once now.
 */
export function watchFilesSince(read: FileStamps, onChange: () => void, debounceMs?: number): () => void {
  const unwatch = watchFiles([...read.keys()], onChange, debounceMs);
  const now = fileStamps([...read.keys()]);
  if ([...read].some(([file, stamp]) => now.get(file) !== stamp)) onChange();
  return unwatch;
}
