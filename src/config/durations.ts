/**
 * Durations in config and policy files (JWT lifetimes, skew, session TTLs, rate-limit windows):
 * `"30s"`, `"30m"`, `"12h"`, `"7d"`, or a bare number of seconds. Whole numbers only, so a
 * value means exactly what it says and formats back unchanged.
 */
import { UserError } from '../errors.js';

// Largest first, so formatDuration picks the largest unit that divides exactly.
const UNITS: readonly (readonly [unit: string, ms: number])[] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
];
const UNIT_MS: ReadonlyMap<string, number> = new Map(UNITS);

const PATTERN = /^(\d+)([smhd])$/;
const PATTERN_WITH_MS = /^(\d+)(ms|[smhd])$/;

/** Milliseconds for `value`; throws a UserError naming `where` and the value when it is not valid. */
export function parseDuration(
  value: string | number,
  where: string,
  options: { allowMs?: boolean } = {},
): number {
  const ms = toMs(value, options.allowMs === true);
  if (ms === undefined) {
    const shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
    throw new UserError(
      `${where}: invalid duration ${shown}; expected a whole number with a unit ${options.allowMs ? 'ms, ' : ''}s, m, h or d ` +
        `(e.g. "30s", "12h", "7d") or a non-negative whole number of seconds.`,
    );
  }
  return ms;
}

/** A duration of the proxy's config file, where `ms` is a unit too (`"250ms"`): parseDuration with allowMs. */
export function parseConfigDuration(value: string | number, where: string): number {
  return parseDuration(value, where, { allowMs: true });
}

/**
 * The longest delay a timer of this proxy is given: Node holds at most 2^31 − 1 ms (about 24.8
 * days) and fires a longer one at once, so `execution.timeout: 25d` failed every call in 1 ms.
 */
export const MAX_TIMER_MS = 24 * 86_400_000;

/**
 * A config duration that becomes a timer: parseConfigDuration, then at least `minMs` (1 where
 * 0 would fire at once and mean nothing, 0 where it means "none") and at most MAX_TIMER_MS.
 */
export function parseTimerDuration(value: string | number, where: string, minMs: number): number {
  const ms = parseConfigDuration(value, where);
  if (ms < minMs || ms > MAX_TIMER_MS) {
    throw new UserError(
      `${where}: must be ${minMs === 0 ? 'at most' : `from ${formatDuration(minMs)} to`} ${formatDuration(MAX_TIMER_MS)} (got ${JSON.stringify(value)})`,
    );
  }
  return ms;
}

/** The largest unit that represents `ms` exactly: 90000 → "90s", 7200000 → "2h"; else "1500ms". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`Not a duration: ${ms}`);
  if (ms === 0) return '0s';
  for (const [unit, unitMs] of UNITS) {
    if (ms % unitMs === 0) return `${ms / unitMs}${unit}`;
  }
  return `${ms}ms`;
}

// `unknown`: config values arrive from YAML/JSON/env, whatever the static type claims.
function toMs(value: unknown, allowMs: boolean): number | undefined {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && value >= 0 ? exact(value * 1000) : undefined;
  }
  if (typeof value !== 'string') return undefined;
  const match = (allowMs ? PATTERN_WITH_MS : PATTERN).exec(value);
  const unitMs = match?.[2] === undefined ? undefined : match[2] === 'ms' ? 1 : UNIT_MS.get(match[2]);
  if (match?.[1] === undefined || unitMs === undefined) return undefined;
  return exact(Number(match[1]) * unitMs);
}

/** Rejects values too large to hold exactly, which can only be typos ("99999999999999d"). */
function exact(ms: number): number | undefined {
  return Number.isSafeInteger(ms) ? ms : undefined;
}
