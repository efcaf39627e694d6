/**
 * The one YAML reader of the operator's files (src/config/yaml-text.ts), through both of its
 * callers: a config file and a policy file. Each mistake is the file's, named with it.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/config-file.js';
import { parsePolicyFile } from '../../../src/policy/file.js';
import { userError } from '../../helpers/user-error.js';

/** Ten levels of ten aliases each: 10^10 nodes once expanded. */
function aliasBomb(): string {
  const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
  for (let i = 1; i <= 10; i++)
    lines.push(
      `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return `${lines.join('\n')}\n`;
}

describe('parseYamlText, through the config and the policy', () => {
  const readers = [
    ['proxy.yaml', (text: string) => parseConfig(text, 'proxy.yaml')],
    ['policy.yaml', (text: string) => parsePolicyFile(text, 'policy.yaml')],
  ] as const;

  it.each(readers)("%s: an alias bomb is the file's mistake, refused before it expands", (file, read) => {
    expect(userError(() => read(aliasBomb())).message).toMatch(
      new RegExp(`^${file.replace('.', '\\.')}: Excessive alias count`),
    );
  });

  it.each(readers)('%s: a syntax error and a duplicate key are named with file and line', (file, read) => {
    expect(userError(() => read('a: [1\n')).message).toMatch(new RegExp(`^${file.replace('.', '\\.')}: `));
    expect(userError(() => read('a: 1\na: 2\n')).message).toMatch(
      /Map keys must be unique at line 2, column 1/,
    );
  });
});
