import { describe, expect, it } from 'vitest';
import { createCatalog, matchesQuery, paginate } from '../../../src/openapi/catalog.js';
import type { ApiInfo, Capability } from '../../../src/openapi/types.js';

function capability(name: string, description = `Does ${name}.`): Capability {
  return {
    name,
    description,
    argumentsSchema: { type: 'object', properties: {}, additionalProperties: false },
    operation: {
      apiId: 'pets',
      method: 'get',
      path: `/${name}`,
      parameters: [],
      servers: [],
      security: [],
      tags: [],
      deprecated: false,
      responseMediaTypes: [],
      success: { status: 200 },
      pointer: `#/paths/~1${name}/get`,
    },
  };
}

const api: ApiInfo = {
  id: 'pets',
  title: 'Pets',
  version: '1.0.0',
  source: 'pets.yaml',
  flavour: 'openapi-3.0',
  servers: [],
  securitySchemes: {},
};

function namesOf(items: readonly Capability[]): string[] {
  return items.map((c) => c.name);
}

describe('createCatalog', () => {
  const input = ['update_pet', 'list_pets', 'get_pet', 'a_b', 'ab', 'create_pet'].map((n) => capability(n));
  const catalog = createCatalog([api], input, ['w1', 'w2']);

  it('sorts capabilities by name in code-unit order', () => {
    // '_' (0x5f) sorts before lowercase letters, so a_b precedes ab.
    expect(namesOf(catalog.capabilities)).toEqual([
      'a_b',
      'ab',
      'create_pet',
      'get_pet',
      'list_pets',
      'update_pet',
    ]);
  });

  it('does not reorder the array it was given', () => {
    expect(namesOf(input)).toEqual(['update_pet', 'list_pets', 'get_pet', 'a_b', 'ab', 'create_pet']);
  });

  it('looks capabilities up by exact name', () => {
    expect(catalog.get('get_pet')).toBe(input[2]);
    expect(catalog.get('GET_PET')).toBeUndefined();
    expect(catalog.get('get')).toBeUndefined();
    expect(catalog.get('')).toBeUndefined();
  });

  it('does not find inherited object members', () => {
    expect(catalog.get('constructor')).toBeUndefined();
    expect(catalog.get('__proto__')).toBeUndefined();
    expect(catalog.api('toString')).toBeUndefined();
  });

  it('looks APIs up by id and keeps the warnings', () => {
    expect(catalog.api('pets')).toBe(api);
    expect(catalog.api('other')).toBeUndefined();
    expect(catalog.apis).toEqual([api]);
    expect(catalog.warnings).toEqual(['w1', 'w2']);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(catalog)).toBe(true);
    expect(Object.isFrozen(catalog.capabilities)).toBe(true);
    expect(Object.isFrozen(catalog.apis)).toBe(true);
    expect(Object.isFrozen(catalog.warnings)).toBe(true);
    expect(() => (catalog.capabilities as Capability[]).push(capability('x'))).toThrow(TypeError);
  });

  it('copies the warnings it was given', () => {
    const warnings = ['one'];
    const copy = createCatalog([], [], warnings);
    warnings.push('two');
    expect(copy.warnings).toEqual(['one']);
  });
});

describe('matchesQuery', () => {
  const listPets = capability('list_pets', 'Returns every Pet in the STORE, newest first.');

  it('matches everything for an empty or blank query', () => {
    expect(matchesQuery(listPets, '')).toBe(true);
    expect(matchesQuery(listPets, '   \t ')).toBe(true);
  });

  it('is case-insensitive on both sides', () => {
    expect(matchesQuery(listPets, 'LIST')).toBe(true);
    expect(matchesQuery(listPets, 'store')).toBe(true);
    expect(matchesQuery(listPets, 'pet')).toBe(true);
  });

  it('matches words in any order, reading underscores in names as spaces', () => {
    expect(matchesQuery(listPets, 'pets list')).toBe(true);
    expect(matchesQuery(listPets, 'list pets')).toBe(true);
    expect(matchesQuery(listPets, '  newest   pets ')).toBe(true);
  });

  it('matches the name as written, underscores included', () => {
    expect(matchesQuery(listPets, 'list_pets')).toBe(true);
    expect(matchesQuery(listPets, 'pets_list')).toBe(false);
  });

  it('matches parts of words', () => {
    expect(matchesQuery(listPets, 'li pe')).toBe(true);
    expect(matchesQuery(listPets, 'ewes')).toBe(true);
  });

  it('needs every word to match', () => {
    expect(matchesQuery(listPets, 'list dogs')).toBe(false);
    expect(matchesQuery(listPets, 'delete')).toBe(false);
  });

  it('searches the description', () => {
    expect(matchesQuery(listPets, 'first every')).toBe(true);
    expect(matchesQuery(capability('ping', 'Checks health.'), 'health')).toBe(true);
    expect(matchesQuery(capability('ping', 'Checks health.'), 'pets')).toBe(false);
  });
});

describe('paginate', () => {
  const all = createCatalog(
    [],
    ['a', 'b', 'c', 'd', 'e'].map((n) => capability(n)),
    [],
  ).capabilities;

  it('returns the first page and the name to continue after', () => {
    const page = paginate(all, undefined, 2);
    expect(namesOf(page.items)).toEqual(['a', 'b']);
    expect(page.after).toBe('b');
  });

  it('continues strictly after the cursor name', () => {
    expect(namesOf(paginate(all, 'b', 2).items)).toEqual(['c', 'd']);
    expect(paginate(all, 'b', 2).after).toBe('d');
  });

  it('has no cursor on the last page', () => {
    const last = paginate(all, 'd', 2);
    expect(namesOf(last.items)).toEqual(['e']);
    expect(last.after).toBeNull();
  });

  it('has no cursor when the page ends exactly at the last item', () => {
    const page = paginate(all, 'c', 2);
    expect(namesOf(page.items)).toEqual(['d', 'e']);
    expect(page.after).toBeNull();
    expect(paginate(all, undefined, 5).after).toBeNull();
  });

  it('returns everything when the limit exceeds the list', () => {
    const page = paginate(all, undefined, 100);
    expect(namesOf(page.items)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(page.after).toBeNull();
  });

  it('walks the whole list once, in order, page by page', () => {
    const many = createCatalog(
      [],
      Array.from({ length: 23 }, (_, i) => capability(`cap_${String(i).padStart(2, '0')}`)),
      [],
    ).capabilities;
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = paginate(many, after, 5);
      seen.push(...namesOf(page.items));
      after = page.after ?? undefined;
      pages++;
    } while (after !== undefined && pages < 100);
    expect(pages).toBe(5);
    expect(seen).toEqual(namesOf(many));
  });

  it('handles an empty list', () => {
    expect(paginate([], undefined, 10)).toEqual({ items: [], after: null });
    expect(paginate([], 'x', 10)).toEqual({ items: [], after: null });
  });

  describe('cursors that name no current capability (keyset behaviour)', () => {
    it('resumes after the position a removed capability had', () => {
      const withoutC = all.filter((c) => c.name !== 'c');
      const page = paginate(withoutC, 'c', 2);
      expect(namesOf(page.items)).toEqual(['d', 'e']);
      expect(page.after).toBeNull();
    });

    it('neither repeats nor skips when capabilities are added before and after the cursor', () => {
      const first = paginate(all, undefined, 2);
      const reloaded = createCatalog(
        [],
        ['a', 'aa', 'b', 'bb', 'c', 'd', 'e'].map((n) => capability(n)),
        [],
      ).capabilities;
      expect(namesOf(paginate(reloaded, first.after ?? undefined, 2).items)).toEqual(['bb', 'c']);
    });

    it('returns an empty last page for a name after every capability', () => {
      expect(paginate(all, 'zzz', 2)).toEqual({ items: [], after: null });
      expect(paginate(all, '\uffff', 2)).toEqual({ items: [], after: null });
    });

    it('starts at the beginning for a name before every capability, such as the empty string', () => {
      expect(namesOf(paginate(all, '', 2).items)).toEqual(['a', 'b']);
      expect(namesOf(paginate(all, '0', 2).items)).toEqual(['a', 'b']);
      expect(namesOf(paginate(all, 'A', 2).items)).toEqual(['a', 'b']);
    });

    it('positions a name between two capabilities after the smaller one', () => {
      expect(namesOf(paginate(all, 'b0', 2).items)).toEqual(['c', 'd']);
      expect(namesOf(paginate(all, 'bz', 2).items)).toEqual(['c', 'd']);
    });
  });

  it('pages over a filtered list', () => {
    const catalog = createCatalog(
      [],
      [capability('list_pets'), capability('get_pet'), capability('list_users'), capability('create_pet')],
      [],
    );
    const pets = catalog.capabilities.filter((c) => matchesQuery(c, 'pet'));
    const first = paginate(pets, undefined, 2);
    expect(namesOf(first.items)).toEqual(['create_pet', 'get_pet']);
    expect(first.after).toBe('get_pet');
    expect(namesOf(paginate(pets, 'get_pet', 2).items)).toEqual(['list_pets']);
  });

  it('returns an empty page without a cursor for a limit of 0 (the HTTP layer refuses limits below 1)', () => {
    expect(paginate(all, undefined, 0)).toEqual({ items: [], after: null });
  });
});
