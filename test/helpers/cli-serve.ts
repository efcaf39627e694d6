/**
 * `node dist/cli.js serve …` as a child process on 127.0.0.1, port 0: resolves with its URL once
 * it logs `listening` (or the message given), and keeps what it logs. No import from src/: these tests check the build.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './cli-process.js';

export interface ServedCli {
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves with the exit code (null after a signal) and the signal, once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the process wrote to stderr so far. */
  stderr(): string;
  /** The JSON log lines the process wrote to stdout so far, parsed. */
  logs(): Record<string, unknown>[];
}

/** Starts the CLI with `args`; every child is added to `children` so the test can kill leftovers by PID. */
export async function serveCli(
  args: readonly string[],
  options: {
    cwd: string;
    env?: NodeJS.ProcessEnv;
    children: Set<ChildProcess>;
    /** The log message that means it serves (default `listening`; `workers listening` with --workers). */
    ready?: string;
  },
): Promise<ServedCli> {
  const ready = options.ready ?? 'listening';
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  options.children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => {
      options.children.delete(child);
      resolve({ code, signal });
    });
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      // Complete lines only: a chunk may end in the middle of one.
      for (const line of stdout.slice(0, stdout.lastIndexOf('\n') + 1).split('\n')) {
        try {
          const entry = JSON.parse(line) as { msg?: string; url?: string };
          if (entry.msg === ready && entry.url) resolve(entry.url);
        } catch {
          // not a log line
        }
      }
    });
    void exited.then(() => reject(new Error(`the proxy exited before listening: ${stderr}`)));
  });
  const logs = (): Record<string, unknown>[] =>
    stdout.split('\n').flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  return { child, url, exited, stderr: () => stderr, logs };
}
