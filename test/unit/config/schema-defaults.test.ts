/**
 * Start-up without a config or policy file takes the schemas' defaults from schemaDefaults, not
 * from ajv: both must give exactly what validating `{}` with ajv's useDefaults gives.
 */
import { describe, expect, it } from 'vitest';
import { schemaDefaults } from '../../../src/config/schema-defaults.js';
import { defaultConfig, parseConfig } from '../../../src/config/config-file.js';
import { defaultPolicyFile, parsePolicyFile } from '../../../src/policy/file.js';

describe('schemaDefaults', () => {
  it("the config's defaults are ajv's for {}", () => {
    expect(defaultConfig()).toStrictEqual(parseConfig('{}', '(defaults)'));
  });

  it("the policy's defaults are ajv's for {}, $ref'd and beside a $ref included", () => {
    expect(defaultPolicyFile()).toStrictEqual(parsePolicyFile('{}', '(default policy)'));
  });

  it('each call returns a fresh object (callers may change theirs)', () => {
    const first = defaultConfig();
    expect(defaultConfig()).not.toBe(first);
    expect(defaultConfig().apis).not.toBe(first.apis);
  });

  it('fills defaults inside an object that got its own default, and refuses a $ref it cannot follow', () => {
    const schema = {
      type: 'object',
      properties: { a: { type: 'object', default: {}, properties: { b: { type: 'string', default: 'x' } } } },
    };
    expect(schemaDefaults(schema)).toEqual({ a: { b: 'x' } });
    expect(() => schemaDefaults({ properties: { a: { $ref: 'other.json' } } })).toThrow(/unsupported \$ref/);
  });
});
