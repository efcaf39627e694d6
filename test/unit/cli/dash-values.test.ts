import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { attachDashValues } from '../../../src/cli/dash-values.js';

const OPTIONS = {
  'passkey-id': { type: 'string' },
  reason: { type: 'string' },
  all: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parse(argv: string[]) {
  return parseArgs({
    args: attachDashValues(argv, OPTIONS),
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
}

describe('a string option whose value starts with a dash', () => {
  it('takes the value, as `--name=value` would (an ID printed by `list` pastes back)', () => {
    expect(parse(['remove', '--passkey-id', '-Xb3_q', '--reason', '--lost--']).values).toEqual({
      'passkey-id': '-Xb3_q',
      reason: '--lost--',
    });
    expect(parse(['--passkey-id', '-']).values['passkey-id']).toBe('-');
  });

  it('still reports a forgotten value when the next token is an option of the command', () => {
    expect(() => parse(['--passkey-id', '--all'])).toThrow(/argument is ambiguous/);
    expect(() => parse(['--passkey-id', '--reason=x'])).toThrow(/argument is ambiguous/);
    expect(() => parse(['--passkey-id', '-h'])).toThrow(/argument is ambiguous/);
    expect(() => parse(['--passkey-id'])).toThrow(/argument missing/);
  });

  it('leaves booleans, `--name=value`, and everything after `--` as they are', () => {
    expect(attachDashValues(['--all', '-x'], OPTIONS)).toEqual(['--all', '-x']);
    expect(attachDashValues(['--reason=-a', '-b'], OPTIONS)).toEqual(['--reason=-a', '-b']);
    expect(attachDashValues(['--', '--reason', '-a'], OPTIONS)).toEqual(['--', '--reason', '-a']);
    expect(attachDashValues(['--reason', '--'], OPTIONS)).toEqual(['--reason', '--']);
  });
});
