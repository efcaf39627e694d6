/**
 * Collects what is wrong with a policy file, so that every problem is reported at once: one
 * UserError whose lines name the file, the key path and what was expected. Also the duration
 * reading shared by the resolvers (a bad value is reported once and read as NaN).
 */
import { UserError } from '../errors.js';
import { parseDuration } from '../config/durations.js';
import type { Duration } from './types.js';

export class Problems {
  readonly #lines: string[] = [];

  constructor(readonly file: string) {}

  /** `file: path: message`. */
  add(path: string, message: string): void {
    this.#lines.push(`${this.file}: ${path}: ${message}`);
  }

  /** A line that already names the file and the key (e.g. from parseDuration). */
  addLine(line: string): void {
    this.#lines.push(line);
  }

  /** Runs `read`; a UserError it throws becomes a problem line and the result is `fallback`. */
  catching<T>(read: () => T, fallback: T): T {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      this.addLine(err.message);
      return fallback;
    }
  }

  /** Milliseconds, at least `min`; NaN when malformed (NaN fails every later comparison, so one bad value is reported once). */
  duration(value: Duration, path: string, min: number): number {
    const ms = this.catching(() => parseDuration(value, `${this.file}: ${path}`), Number.NaN);
    if (ms < min) this.add(path, `must be at least ${describeMs(min)} (got ${JSON.stringify(value)})`);
    return ms;
  }

  /** null disables the limit; otherwise at least one second. */
  optionalDuration(value: Duration | null, path: string): number | null {
    return value === null ? null : this.duration(value, path, 1000);
  }

  throwIfAny(): void {
    if (this.#lines.length > 0) throw new UserError([...new Set(this.#lines)].join('\n'));
  }
}

function describeMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
