/** The command line's flags have one source (src/cli/flags.ts); help and README follow it. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FLAGS, flagsHelp } from '../../../src/cli/flags.js';
import { ROOT } from '../../helpers/proxy.js';

describe('command-line flags', () => {
  it('--help lists every flag with its argument', () => {
    const help = flagsHelp();
    for (const [name, spec] of Object.entries(FLAGS)) {
      const arg = 'arg' in spec ? ` ${spec.arg}` : '';
      expect(help, name).toContain(`--${name}${arg}`);
    }
  });

  it("the README's option table documents exactly the flags the parser knows", () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const section = readme.slice(
      readme.indexOf('## Command line'),
      readme.indexOf('## Configuration reference'),
    );
    const documented = [...section.matchAll(/^\| `--([a-z-]+)/gm)].map((m) => m[1]).sort();
    const known = Object.keys(FLAGS)
      .filter((f) => f !== 'help' && f !== 'version')
      .sort();
    expect(documented).toEqual(known);
  });
});
