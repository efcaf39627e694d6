import { describe, expect, it } from 'vitest';
import { runBounded } from '../../helpers/complexity-bound.js';
import { templateSegment } from '../../../src/upstream/path-template.js';

describe('templateSegment: one segment of a path template as a pattern', () => {
  it('captures each parameter and counts the literal text', () => {
    const { pattern, names, literalChars } = templateSegment('{name}.{format}');
    expect(names).toEqual(['name', 'format']);
    expect(literalChars).toBe(1);
    expect(pattern.exec('report.v2.json')?.slice(1)).toEqual(['report.v2', 'json']);
    expect(pattern.test('report')).toBe(false);
  });

  it('matches literal text as text, decoded', () => {
    const { pattern, literalChars } = templateSegment('r%C3%A9sum%C3%A9(1).*');
    expect(literalChars).toBe('résumé(1).*'.length);
    expect(pattern.test('résumé(1).*')).toBe(true);
    expect(pattern.test('résumé(1)xx')).toBe(false);
  });

  it('matches several parameters of one segment in linear time', () => {
    // A complexity bound, not a benchmark: milliseconds here; ECMAScript's engine backtracks through
    // `(.+)-(.+)-(.+)\.json` in cubic time (2,000 dashes took 1.6 s), which the vm's timeout
    // interrupts and a test timeout could not.
    const { pattern } = templateSegment('{a}-{b}-{c}.json');
    const segment = '-'.repeat(100_000);
    expect(runBounded('pattern.test(segment)', { pattern, segment })).toBe(false);
  });
});
