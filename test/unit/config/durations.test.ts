import { describe, expect, it } from 'vitest';

import { UserError } from '../../../src/errors.js';
import { formatDuration, parseDuration } from '../../../src/config/durations.js';

describe('parseDuration', () => {
  it.each([
    ['30s', 30_000],
    ['30m', 1_800_000],
    ['12h', 43_200_000],
    ['7d', 604_800_000],
    ['0s', 0],
    ['1s', 1000],
    ['90s', 90_000],
    ['007m', 420_000],
  ])('parses %j as %d ms', (value, ms) => {
    expect(parseDuration(value, 'jwt.max_age')).toBe(ms);
  });

  it.each([
    [0, 0],
    [1, 1000],
    [60, 60_000],
    [86_400, 86_400_000],
  ])('reads the number %d as seconds', (value, ms) => {
    expect(parseDuration(value, 'jwt.max_age')).toBe(ms);
  });

  it.each([
    '',
    '30',
    's',
    '30 s',
    ' 30s',
    '30s ',
    '30S',
    '30ms',
    '30w',
    '30y',
    '1.5h',
    '-5s',
    '+5s',
    '1e3s',
    '5m30s',
    '0x10s',
    '３０s',
    '99999999999999999d',
  ])('rejects the string %j', (value) => {
    expect(() => parseDuration(value, 'policy.session_ttl')).toThrow(UserError);
  });

  it.each([-1, 1.5, 0.1, NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER, 2 ** 53])(
    'rejects the number %d',
    (value) => {
      expect(() => parseDuration(value, 'policy.session_ttl')).toThrow(UserError);
    },
  );

  it('rejects values that are not strings or numbers at runtime (config from YAML)', () => {
    for (const value of [true, null, undefined, ['30s'], { s: 30 }]) {
      expect(() => parseDuration(value as never, 'x')).toThrow(UserError);
    }
  });

  it('names the setting and the bad value in the message', () => {
    expect(() => parseDuration('30 minutes', 'rate_limits.per_agent.window')).toThrow(
      /^rate_limits\.per_agent\.window: invalid duration "30 minutes";/,
    );
    expect(() => parseDuration(-5, 'jwt.skew')).toThrow(/^jwt\.skew: invalid duration -5;/);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [1000, '1s'],
    [30_000, '30s'],
    [90_000, '90s'],
    [60_000, '1m'],
    [1_800_000, '30m'],
    [5_400_000, '90m'],
    [3_600_000, '1h'],
    [43_200_000, '12h'],
    [86_400_000, '1d'],
    [90_000_000, '25h'],
    [604_800_000, '7d'],
    [1500, '1500ms'],
    [1, '1ms'],
  ])('formats %d ms as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([-1, NaN, Infinity])('rejects %d', (ms) => {
    expect(() => formatDuration(ms)).toThrow(RangeError);
  });

  it('round-trips through parseDuration for whole seconds', () => {
    for (const ms of [
      0, 1000, 59_000, 60_000, 61_000, 3_600_000, 3_660_000, 86_400_000, 172_800_000, 999_000,
    ]) {
      expect(parseDuration(formatDuration(ms), 'x')).toBe(ms);
    }
  });
});
