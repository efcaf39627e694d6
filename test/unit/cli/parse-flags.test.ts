/**
 * The shared argv parser of serve, admin and agent (src/cli/parse-flags.ts). Regression: parseArgs
 * keeps the last of a repeated flag, so `check --policy bad.yaml --policy good.yaml` checked
 * good.yaml alone and exited 0.
 */
import { describe, expect, it } from 'vitest';
import { beforeTerminator, parseFlags } from '../../../src/cli/parse-flags.js';

const OPTIONS = {
  policy: { type: 'string' },
  token: { type: 'string' },
  spec: { type: 'string', multiple: true },
  json: { type: 'boolean' },
  version: { type: 'boolean', short: 'v' },
} as const;

describe('a flag given twice', () => {
  it('is refused, named, when it takes one value', () => {
    expect(() => parseFlags(['check', '--policy', 'bad.yaml', '--policy', 'good.yaml'], OPTIONS)).toThrow(
      "Option '--policy' is given more than once; give it once",
    );
    expect(() => parseFlags(['--policy=a', '--policy', 'b'], OPTIONS)).toThrow("'--policy'");
    expect(() => parseFlags(['--json', '--json'], OPTIONS)).toThrow("'--json'");
  });

  it('counts the short and the long spelling as one flag', () => {
    expect(() => parseFlags(['-v', '--version'], OPTIONS)).toThrow(
      "Option '--version' is given more than once",
    );
  });

  it('never shows the values (a repeated token is a secret)', () => {
    expect(() => parseFlags(['--token', 's3cret-one', '--token', 's3cret-two'], OPTIONS)).toThrow(
      expect.objectContaining({ message: expect.not.stringMatching(/s3cret/) }) as Error,
    );
  });

  it('is allowed for a `multiple` flag, and after `--` (arguments, not flags)', () => {
    const parsed = parseFlags(
      ['--spec', 'a.yaml', '--spec', 'b.yaml', '--', '--policy', '--policy'],
      OPTIONS,
    );
    expect(parsed.values).toEqual({ spec: ['a.yaml', 'b.yaml'] });
    expect(parsed.positionals).toEqual(['--policy', '--policy']);
  });

  it('still takes a value that starts with a dash (dash-values.ts)', () => {
    expect(parseFlags(['--policy', '-odd.yaml'], OPTIONS).values).toEqual({ policy: '-odd.yaml' });
  });
});

describe('beforeTerminator', () => {
  it('is the argv before `--`, where a scan for --version may look', () => {
    expect(beforeTerminator(['serve', '--', '--version'])).toEqual(['serve']);
    expect(beforeTerminator(['serve', '--version'])).toEqual(['serve', '--version']);
  });
});
