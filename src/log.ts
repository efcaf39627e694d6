/**
 * Structured logging, backed by pino: one JSON object per line with `level` (a label such as
 * "info"), `time` (ISO 8601) and `msg`, then the caller's fields; or, with the `pretty` format,
 * the same record as human text through pino-pretty (in-process and synchronous, so a test's
 * `write` sees each line at once). Callers pass flat fields explicitly; nothing here serializes
 * request headers or bodies, so credentials cannot reach the log by accident (§11).
 */
import { pino, type DestinationStream, type Logger as Pino } from 'pino';
import { createRequire } from 'node:module';
import type { prettyFactory as PrettyFactory } from 'pino-pretty';
import type { LogFormat, LogLevel } from './log-levels.js';

// pino-pretty (CommonJS) is required only for the `pretty` format: several MiB of memory otherwise.
const require = createRequire(import.meta.url);

export type { LogFormat, LogLevel } from './log-levels.js';

export type LogFields = Record<string, string | number | boolean | null | undefined | readonly string[]>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Whether a line at `level` is written: fields that cost work to build are built only then. */
  enabled(level: Exclude<LogLevel, 'silent'>): boolean;
}

/**
 * A logger at `level` writing whole lines to `write` (default: standard output, synchronously,
 * so the last lines before an exit are not lost). `now` is the clock of `time` (tests pass
 * theirs). `fields` go on every line (`worker` with `--workers`).
 */
export function createLogger(
  level: LogLevel,
  write?: (line: string) => void,
  now: () => number = Date.now,
  format: LogFormat = 'json',
  fields?: Readonly<Record<string, number>>,
): Logger {
  const p = pino(
    {
      level,
      // No pid/hostname: the container already says where a line comes from (and `worker` which
      // of its processes, src/cluster/).
      base: fields ?? undefined,
      messageKey: 'msg',
      timestamp: () => `,"time":"${new Date(now()).toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination(write, format),
  );
  return wrap(p);
}

function destination(write: ((line: string) => void) | undefined, format: LogFormat): DestinationStream {
  const out = write ? { write } : pino.destination({ dest: 1, sync: true });
  if (format === 'json') return out;
  // String levels are not pino's numbers: pino-pretty prints the label it finds as is.
  const { prettyFactory } = require('pino-pretty') as { prettyFactory: typeof PrettyFactory };
  const pretty = prettyFactory({ colorize: false, translateTime: false, ignore: '' });
  return { write: (line: string) => void out.write(pretty(line)) };
}

function wrap(p: Pino): Logger {
  return {
    debug: (m, f) => p.debug(f ?? {}, m),
    info: (m, f) => p.info(f ?? {}, m),
    warn: (m, f) => p.warn(f ?? {}, m),
    error: (m, f) => p.error(f ?? {}, m),
    enabled: (level) => p.isLevelEnabled(level),
  };
}

export const silentLogger: Logger = createLogger('silent', () => undefined);
