/**
 * The regular expressions a document brings run in time linear in the string an agent sends:
 * `pattern`, `patternProperties` and `format: url`, in validators compiled on the event loop and
 * off it (util/linear-regexp.ts, url-format.ts). Each bound is a complexity bound, not a
 * benchmark: the linear answer takes milliseconds, ECMAScript's backtracking engine minutes or
 * longer; the vm's timeout interrupts it, which a test timeout cannot do to synchronous code.
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import type { ValidateFunction } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { runBounded } from '../../helpers/complexity-bound.js';
import { createSchemaValidator, formatTable } from '../../../src/openapi/ajv.js';
import { isUrl } from '../../../src/openapi/url-format.js';
import { OffThreadCompiler } from '../../../src/protocol/off-thread-compiler.js';

const require = createRequire(import.meta.url);
const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: { url: RegExp } };

/** `validate(value)`, interrupted past the complexity bound. */
function boundedValidate(validate: ValidateFunction, value: unknown): boolean {
  return runBounded('validate(value)', { validate, value }) as boolean;
}

const NESTED_QUANTIFIER = '^(a+)+$'; // 28 characters and a `!` took 5 s on ECMAScript's engine
const CATASTROPHIC = 'a'.repeat(100_000) + '!';
const URL_QUADRATIC = 'http://' + ':'.repeat(1_000_000) + '@'; // 40,000 colons took 1.2 s

const SCHEMAS = {
  pattern: { type: 'string', pattern: NESTED_QUANTIFIER },
  patternProperties: { type: 'object', patternProperties: { [NESTED_QUANTIFIER]: { type: 'integer' } } },
  url: { type: 'string', format: 'url' },
};

const offThread = new OffThreadCompiler();
afterAll(() => offThread.close());

const compilers: [string, (schema: object) => Promise<ValidateFunction>][] = [
  ['on the event loop', (schema) => Promise.resolve(createSchemaValidator().compile(schema))],
  ['off the event loop', async (schema) => (await offThread.compile(schema, [])).validate],
];

describe.each(compilers)('a validator compiled %s', (_where, compile) => {
  it('matches `pattern` in linear time and still enforces it', async () => {
    const validate = await compile(SCHEMAS.pattern);
    expect(boundedValidate(validate, CATASTROPHIC)).toBe(false);
    expect(boundedValidate(validate, 'aaa')).toBe(true);
    expect(boundedValidate(validate, 'aab')).toBe(false);
  });

  it('matches `patternProperties` names in linear time and still applies them', async () => {
    const validate = await compile(SCHEMAS.patternProperties);
    expect(boundedValidate(validate, { [CATASTROPHIC]: 'not matched, so not checked' })).toBe(true);
    expect(boundedValidate(validate, { aaa: 1 })).toBe(true);
    expect(boundedValidate(validate, { aaa: 'matched, so checked' })).toBe(false);
  });

  it('checks `format: url` in linear time', async () => {
    const validate = await compile(SCHEMAS.url);
    expect(boundedValidate(validate, URL_QUADRATIC)).toBe(false);
    expect(boundedValidate(validate, 'https://example.com/a?b=c')).toBe(true);
    expect(boundedValidate(validate, 'https://10.0.0.1/')).toBe(false); // ajv-formats refuses private hosts
  });

  it('tells the patterns of one schema apart, checked and unchecked', async () => {
    const validate = await compile({
      type: 'object',
      properties: {
        digits: { type: 'string', pattern: '^[0-9]+$' },
        letters: { type: 'string', pattern: '^[a-z]+$' },
        password: { type: 'string', pattern: '^(?=.*\\d).{8,}$' },
      },
    });
    expect(boundedValidate(validate, { digits: '12', letters: 'ab', password: 'x' })).toBe(true);
    expect(boundedValidate(validate, { digits: 'ab' })).toBe(false);
    expect(boundedValidate(validate, { letters: '12' })).toBe(false);
  });

  it('accepts every string for a pattern RE2 cannot run (lookaround), instead of failing to compile', async () => {
    const validate = await compile({ type: 'string', pattern: '^(?=.*\\d).{8,}$' });
    expect(boundedValidate(validate, 'short')).toBe(true);
  });
});

describe('format: url', () => {
  it('answers as ajv-formats’ expression does, on strings built from the parts that matter to it', () => {
    const parts = [
      'http://',
      'https://',
      'ftp://',
      'HTTP://',
      'a',
      'x',
      'com',
      'ä',
      '0',
      '1',
      '10',
      '127',
      '16',
      '172',
      '169',
      '254',
      '192',
      '168',
      '255',
      '8080',
      '.',
      '-',
      ':',
      '@',
      '/',
      ' ',
      '%',
      '?',
      '#',
    ];
    fc.assert(
      fc.property(
        fc.constantFrom('http://', 'https://', 'ftp://', 'HTTP://', ''),
        fc.array(fc.constantFrom(...parts), { maxLength: 14 }),
        (scheme, rest) => {
          const text = scheme + rest.join('');
          return isUrl(text) === fullFormats.url.test(text);
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it.each([
    'http://example.com',
    'https://user:pass@example.com:8443/a/b?c#d',
    'ftp://8.8.8.8/file',
    'http://ünicode.example/',
  ])('accepts %s', (url) => {
    expect([isUrl(url), fullFormats.url.test(url)]).toEqual([true, true]);
  });

  it.each([
    'http://localhost/',
    'http://192.168.1.1/',
    'http://172.20.0.1/',
    'http://169.254.169.254/latest',
    'mailto:someone@example.com',
    'http://exa mple.com/',
  ])('refuses %s', (url) => {
    expect([isUrl(url), fullFormats.url.test(url)]).toEqual([false, false]);
  });
});

describe('every format a validator knows', () => {
  // Strings shaped after what makes backtracking expressions slow: long runs of one character
  // (or pair) after a prefix the expression accepts, ending in a character that fails it.
  const prefixes = ['', 'a', 'http://', 'mailto:', '1', 'P', '2026-01-01T'];
  const runs = ['a', '0', '-', '.', ':', '/', '@', 'a.', 'a-', '::', '1:', '%20'];
  const ends = ['', '!', ' ', '@', ':'];
  const formats = Object.keys(formatTable()).filter(
    (f) => !['int32', 'int64', 'float', 'double'].includes(f),
  );

  it.each(formats)('%s answers 100,000-character adversarial strings in linear time', (format) => {
    const validate = createSchemaValidator().compile({ type: 'string', format });
    const strings = prefixes.flatMap((p) =>
      runs.flatMap((r) => ends.map((e) => p + r.repeat(100_000 / r.length) + e)),
    );
    // One vm call for all 420 (42 MB): ajv-formats' url took 1.2 s for one string of 40,000.
    const answers = runBounded('strings.map((s) => validate(s))', { strings, validate }) as boolean[];
    expect(answers).toHaveLength(strings.length);
  });
});
