import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runBounded } from '../../helpers/complexity-bound.js';
import {
  baseName,
  limitLength,
  MAX_NAME_LENGTH,
  NAME_PATTERN,
  nameFromMethodAndPath,
  suffixed,
  toSnakeCase,
  withPrefix,
} from '../../../src/openapi/names.js';

const SNAKE = /^[a-z0-9_]+$/;

function sha8(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/** Deterministic pseudo-random strings over letters, digits, punctuation, spaces and non-ASCII. */
function* randomStrings(count: number, seed = 42): Generator<string> {
  // Code points on purpose, a lone combining accent (U+0301) and an astral emoji included.
  const chars = ['a', 'Z', '0', '9', '_', '-', '.', '/', '{', '}', ' ', '\t', '$', '@', '!', '~'];
  chars.push('é', '日', '本', 'ß', 'Å', '\u0301', '😀', 'Ω', 'x');
  let state = seed;
  const next = (): number => {
    state = (state * 48271) % 2147483647; // MINSTD: exact in doubles
    return state;
  };
  for (let i = 0; i < count; i++) {
    const length = next() % 90;
    let s = '';
    for (let j = 0; j < length; j++) s += chars[next() % chars.length] as string;
    yield s;
  }
}

describe('toSnakeCase', () => {
  /** The rule before the look-ahead: names must not move (they are what grants are stored under). */
  const former = (input: string): string =>
    input
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '');

  it('gives the names the former rule gave', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...'ABCXYZabcxyz019_-. /'.split('')), maxLength: 24 }),
        (s) => toSnakeCase(s) === former(s),
      ),
      { numRuns: 2000 },
    );
  });

  it('names a long run of capitals in linear time (60,000 took 3.5 s with the former rule)', () => {
    // A complexity bound, not a benchmark: this takes milliseconds, the former rule hours (it is
    // quadratic); the vm's timeout interrupts it, which a test timeout cannot do to synchronous code.
    const named = runBounded('name(text)', { name: toSnakeCase, text: 'A'.repeat(1_000_000) });
    expect(named).toHaveLength(1_000_000);
  });

  it.each([
    ['listPets', 'list_pets'],
    ['get-pet-by-id', 'get_pet_by_id'],
    ['Pets.List', 'pets_list'],
    ['ListPets', 'list_pets'],
    ['list_pets', 'list_pets'],
    ['LIST_PETS', 'list_pets'],
    ['pets list', 'pets_list'],
    ['pets/list', 'pets_list'],
  ])('%s → %s', (input, expected) => {
    expect(toSnakeCase(input)).toBe(expected);
  });

  it.each([
    ['getHTTPStatus', 'get_http_status'],
    ['getHTTPResponse', 'get_http_response'],
    ['userID', 'user_id'],
    ['HTTPServer', 'http_server'],
    ['parseXMLDocument', 'parse_xml_document'],
    ['ID', 'id'],
  ])('splits acronyms: %s → %s', (input, expected) => {
    expect(toSnakeCase(input)).toBe(expected);
  });

  it.each([
    ['getV2Users', 'get_v2_users'],
    ['HTTP2Server', 'http2_server'],
    ['v1.2.3', 'v1_2_3'],
    ['123abc', '123abc'],
    ['pets2', 'pets2'],
  ])('keeps digits with the word before them: %s → %s', (input, expected) => {
    expect(toSnakeCase(input)).toBe(expected);
  });

  it('collapses runs of punctuation and whitespace into one underscore and trims the ends', () => {
    expect(toSnakeCase('  get  pets!!  ')).toBe('get_pets');
    expect(toSnakeCase('__Foo__Bar__')).toBe('foo_bar');
    expect(toSnakeCase('a--b..c//d')).toBe('a_b_c_d');
    expect(toSnakeCase('{petId}')).toBe('pet_id');
  });

  it('strips accents from Latin letters', () => {
    expect(toSnakeCase('café_crème')).toBe('cafe_creme');
    expect(toSnakeCase('Ångström')).toBe('angstrom');
    expect(toSnakeCase('ﬁle')).toBe('file'); // NFKD splits the ligature
  });

  it('drops characters that have no ASCII form', () => {
    expect(toSnakeCase('日本語')).toBe('');
    expect(toSnakeCase('get日本Pets')).toBe('get_pets');
    expect(toSnakeCase('😀')).toBe('');
    expect(toSnakeCase('')).toBe('');
  });

  it('is idempotent and never yields doubled, leading or trailing underscores', () => {
    for (const s of randomStrings(300)) {
      const once = toSnakeCase(s);
      expect(toSnakeCase(once)).toBe(once);
      expect(once).toMatch(/^([a-z0-9]+(_[a-z0-9]+)*)?$/);
    }
  });
});

describe('nameFromMethodAndPath', () => {
  it.each([
    ['get', '/pets/{petId}', 'get_pets_by_pet_id'],
    ['get', '/', 'get_root'],
    ['post', '/pets', 'post_pets'],
    ['delete', '/users/{userId}/posts/{post-id}', 'delete_users_by_user_id_posts_by_post_id'],
    ['get', '/pets/{petId}.json', 'get_pets_by_pet_id_json'],
    ['get', '/v1/{a}{b}', 'get_v1_by_a_by_b'],
    ['put', '//pets//', 'put_pets'],
    ['GET', '/Pets/List', 'get_pets_list'],
  ])('%s %s → %s', (method, path, expected) => {
    expect(nameFromMethodAndPath(method, path)).toBe(expected);
  });

  it('treats a path with no ASCII segments as the root', () => {
    expect(nameFromMethodAndPath('get', '/日本')).toBe('get_root');
  });
});

describe('baseName', () => {
  it('uses the operationId in snake_case when there is one', () => {
    expect(baseName('listPets', 'get', '/pets')).toBe('list_pets');
  });

  it('falls back to method and path without an operationId', () => {
    expect(baseName(undefined, 'get', '/pets/{petId}')).toBe('get_pets_by_pet_id');
  });

  it('falls back to method and path when the operationId has nothing usable', () => {
    expect(baseName('', 'get', '/pets')).toBe('get_pets');
    expect(baseName('日本', 'get', '/pets')).toBe('get_pets');
    expect(baseName('---', 'post', '/')).toBe('post_root');
  });
});

describe('limitLength', () => {
  it('leaves names of at most 64 characters alone', () => {
    const name = 'a'.repeat(MAX_NAME_LENGTH);
    expect(limitLength(name)).toBe(name);
    expect(limitLength('list_pets')).toBe('list_pets');
  });

  it('keeps the first 55 characters of a longer name and appends _ and 8 hex digits of its SHA-256', () => {
    const name = `${'a'.repeat(40)}_${'b'.repeat(40)}`;
    const limited = limitLength(name);
    expect(limited).toHaveLength(MAX_NAME_LENGTH);
    expect(limited).toBe(`${name.slice(0, 55)}_${sha8(name)}`);
    expect(limited).toMatch(/_[0-9a-f]{8}$/);
  });

  it('is the same on every call', () => {
    const name = 'x'.repeat(100);
    expect(limitLength(name)).toBe(limitLength(name));
  });

  it('gives different results to long names that share their first 55 characters', () => {
    const head = 'c'.repeat(60);
    expect(limitLength(`${head}_one`)).not.toBe(limitLength(`${head}_two`));
  });

  it('does not leave an underscore before the hash separator', () => {
    const name = `${'a'.repeat(54)}_${'b'.repeat(20)}`; // the cut falls right after the underscore
    const limited = limitLength(name);
    expect(limited).toBe(`${'a'.repeat(54)}_${sha8(name)}`);
    expect(limited).not.toContain('__');
  });

  it('honours a smaller maximum', () => {
    expect(limitLength('abcdefghijklmnopqrstuvwxyz', 20)).toHaveLength(20);
  });
});

describe('withPrefix', () => {
  it('prepends the prefix with an underscore', () => {
    expect(withPrefix('shop', 'list_pets')).toBe('shop_list_pets');
  });

  it('snake-cases the prefix', () => {
    expect(withPrefix('Shop-API', 'list_pets')).toBe('shop_api_list_pets');
  });

  it('adds nothing for an absent or empty prefix', () => {
    expect(withPrefix(undefined, 'list_pets')).toBe('list_pets');
    expect(withPrefix('', 'list_pets')).toBe('list_pets');
    expect(withPrefix('--', 'list_pets')).toBe('list_pets');
  });

  it('limits the prefixed name to 64 characters', () => {
    const name = 'n'.repeat(60);
    const prefixed = withPrefix('shop', name);
    expect(prefixed).toHaveLength(MAX_NAME_LENGTH);
    expect(prefixed.startsWith('shop_nnn')).toBe(true);
    expect(prefixed).toBe(limitLength(`shop_${name}`));
  });
});

describe('suffixed', () => {
  it('appends _n', () => {
    expect(suffixed('list_pets', 2)).toBe('list_pets_2');
    expect(suffixed('list_pets', 12)).toBe('list_pets_12');
  });

  it('stays within 64 characters by shortening the name before the suffix', () => {
    const name = 'x'.repeat(MAX_NAME_LENGTH);
    const two = suffixed(name, 2);
    const hundred = suffixed(name, 100);
    expect(two).toHaveLength(MAX_NAME_LENGTH);
    expect(two.endsWith('_2')).toBe(true);
    expect(hundred).toHaveLength(MAX_NAME_LENGTH);
    expect(hundred.endsWith('_100')).toBe(true);
    expect(two).not.toBe(suffixed(name, 3));
  });
});

describe('NAME_PATTERN', () => {
  it('accepts [a-z0-9_] names of 1 to 64 characters', () => {
    expect(NAME_PATTERN.test('a')).toBe(true);
    expect(NAME_PATTERN.test('list_pets_2')).toBe(true);
    expect(NAME_PATTERN.test('z'.repeat(64))).toBe(true);
  });

  it.each(['', 'z'.repeat(65), 'ListPets', 'list-pets', 'list pets', 'café'])('rejects %j', (name) => {
    expect(NAME_PATTERN.test(name)).toBe(false);
  });
});

describe('every generated name is a valid capability name', () => {
  // As deriveCatalog composes them: withPrefix (which limits the length) over baseName.
  it('for operationIds and paths of any characters, with and without prefix and suffix', () => {
    const inputs = [...randomStrings(400, 7)];
    for (const [i, s] of inputs.entries()) {
      const path = `/${s}/{${inputs[(i + 1) % inputs.length] ?? ''}}`;
      const names = [
        withPrefix(undefined, baseName(s, 'get', path)),
        withPrefix(undefined, baseName(undefined, 'patch', path)),
        withPrefix(s, baseName(s, 'post', path)),
        suffixed(withPrefix('p', baseName(s, 'delete', path)), i + 2),
      ];
      for (const name of names) {
        expect(name).toMatch(SNAKE);
        expect(name).toMatch(NAME_PATTERN);
        expect(name.length).toBeLessThanOrEqual(MAX_NAME_LENGTH);
      }
    }
  });
});
