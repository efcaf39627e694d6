import { describe, expect, it } from 'vitest';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import {
  globToRegExp,
  isSelected,
  matchesSelector,
  type OperationSelector,
  type SelectableOperation,
} from '../../../src/openapi/selectors.js';

const listPets: SelectableOperation = {
  method: 'get',
  path: '/pets',
  operationId: 'listPets',
  tags: ['pets'],
};
const getPet: SelectableOperation = {
  method: 'get',
  path: '/pets/{petId}',
  operationId: 'getPet',
  tags: ['pets', 'read'],
};
const uploadPhoto: SelectableOperation = {
  method: 'post',
  path: '/pets/{petId}/photos',
  operationId: 'uploadPetPhoto',
  tags: ['pets', 'media'],
};
const deleteUser: SelectableOperation = {
  method: 'delete',
  path: '/admin/users/{id}',
  operationId: 'admin.deleteUser',
  tags: ['admin'],
};
const anonymous: SelectableOperation = { method: 'get', path: '/health', tags: [] };
const ALL = [listPets, getPet, uploadPhoto, deleteUser, anonymous];

function selected(include?: OperationSelector[], exclude?: OperationSelector[]): (string | undefined)[] {
  return ALL.filter((op) => isSelected(op, include, exclude)).map((op) => op.operationId ?? op.path);
}

describe('matchesSelector: tags', () => {
  it('matches when the operation has any listed tag', () => {
    expect(matchesSelector({ tags: ['read'] }, getPet)).toBe(true);
    expect(matchesSelector({ tags: ['admin', 'media'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ tags: ['admin'] }, listPets)).toBe(false);
  });

  it('compares tags exactly (case-sensitive, no globs)', () => {
    expect(matchesSelector({ tags: ['Pets'] }, listPets)).toBe(false);
    expect(matchesSelector({ tags: ['pet*'] }, listPets)).toBe(false);
  });

  it('never matches an untagged operation', () => {
    expect(matchesSelector({ tags: ['pets'] }, anonymous)).toBe(false);
  });
});

describe('matchesSelector: methods', () => {
  it('matches any listed method, case-insensitively', () => {
    expect(matchesSelector({ methods: ['GET'] }, listPets)).toBe(true);
    expect(matchesSelector({ methods: ['Delete'] }, deleteUser)).toBe(true);
    expect(matchesSelector({ methods: ['PUT', 'POST'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ methods: ['POST'] }, listPets)).toBe(false);
  });
});

describe('matchesSelector: operation_ids', () => {
  it('matches an exact operationId', () => {
    expect(matchesSelector({ operation_ids: ['getPet'] }, getPet)).toBe(true);
    expect(matchesSelector({ operation_ids: ['getPet'] }, listPets)).toBe(false);
  });

  it('treats * as any run of characters, including none', () => {
    expect(matchesSelector({ operation_ids: ['*Pet*'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ operation_ids: ['list*'] }, listPets)).toBe(true);
    expect(matchesSelector({ operation_ids: ['getPet*'] }, getPet)).toBe(true);
    expect(matchesSelector({ operation_ids: ['get*'] }, listPets)).toBe(false);
  });

  it('anchors the glob at both ends', () => {
    expect(matchesSelector({ operation_ids: ['Pet'] }, getPet)).toBe(false);
    expect(matchesSelector({ operation_ids: ['get'] }, getPet)).toBe(false);
  });

  it('takes regular-expression characters literally', () => {
    expect(matchesSelector({ operation_ids: ['admin.*'] }, deleteUser)).toBe(true);
    expect(
      matchesSelector({ operation_ids: ['admin.*'] }, { ...deleteUser, operationId: 'adminXdelete' }),
    ).toBe(false);
  });

  it('is case-sensitive', () => {
    expect(matchesSelector({ operation_ids: ['getpet'] }, getPet)).toBe(false);
  });

  it('never matches an operation without an operationId', () => {
    expect(matchesSelector({ operation_ids: ['*'] }, anonymous)).toBe(false);
    expect(matchesSelector({ operation_ids: ['*'] }, listPets)).toBe(true);
  });
});

describe('matchesSelector: paths', () => {
  it('matches a path template literally, braces included', () => {
    expect(matchesSelector({ paths: ['/pets/{petId}'] }, getPet)).toBe(true);
    expect(matchesSelector({ paths: ['/pets/{id}'] }, getPet)).toBe(false);
  });

  it('lets * match within one segment only', () => {
    expect(matchesSelector({ paths: ['/pets/*'] }, getPet)).toBe(true);
    expect(matchesSelector({ paths: ['/pets/*'] }, uploadPhoto)).toBe(false);
    expect(matchesSelector({ paths: ['/pets/*/photos'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ paths: ['/pets*'] }, listPets)).toBe(true);
    expect(matchesSelector({ paths: ['/pets*'] }, getPet)).toBe(false);
  });

  it('lets ** match across segments', () => {
    expect(matchesSelector({ paths: ['/pets/**'] }, getPet)).toBe(true);
    expect(matchesSelector({ paths: ['/pets/**'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ paths: ['/admin/**'] }, deleteUser)).toBe(true);
    expect(matchesSelector({ paths: ['/**/photos'] }, uploadPhoto)).toBe(true);
    expect(matchesSelector({ paths: ['/**'] }, anonymous)).toBe(true);
  });

  it('does not let /x/** match /x itself (there is no segment below it)', () => {
    expect(matchesSelector({ paths: ['/pets/**'] }, listPets)).toBe(false);
  });

  it('matches when any listed glob matches', () => {
    expect(matchesSelector({ paths: ['/nothing', '/health'] }, anonymous)).toBe(true);
  });
});

describe('matchesSelector: combining keys', () => {
  it('matches everything when the selector sets no key', () => {
    for (const op of ALL) expect(matchesSelector({}, op)).toBe(true);
  });

  it('requires every key it sets to match', () => {
    expect(matchesSelector({ tags: ['pets'], methods: ['GET'] }, listPets)).toBe(true);
    expect(matchesSelector({ tags: ['pets'], methods: ['POST'] }, listPets)).toBe(false);
    expect(matchesSelector({ methods: ['GET'], paths: ['/pets/*'] }, listPets)).toBe(false);
    expect(
      matchesSelector(
        { tags: ['media'], methods: ['POST'], operation_ids: ['upload*'], paths: ['/pets/**'] },
        uploadPhoto,
      ),
    ).toBe(true);
  });

  it('never matches when a key is an empty list', () => {
    expect(matchesSelector({ tags: [] }, listPets)).toBe(false);
    expect(matchesSelector({ methods: [] }, listPets)).toBe(false);
  });
});

describe('isSelected: include and exclude', () => {
  it('keeps everything without filters or with an empty include list', () => {
    expect(selected()).toEqual(['listPets', 'getPet', 'uploadPetPhoto', 'admin.deleteUser', '/health']);
    expect(selected([])).toHaveLength(ALL.length);
  });

  it('keeps only operations matching any include selector', () => {
    expect(selected([{ tags: ['admin'] }, { paths: ['/health'] }])).toEqual(['admin.deleteUser', '/health']);
  });

  it('drops operations matching any exclude selector', () => {
    expect(selected(undefined, [{ methods: ['DELETE'] }, { paths: ['/pets/**'] }])).toEqual([
      'listPets',
      '/health',
    ]);
  });

  it('applies exclude after include', () => {
    expect(selected([{ tags: ['pets'] }], [{ operation_ids: ['get*'] }])).toEqual([
      'listPets',
      'uploadPetPhoto',
    ]);
  });

  it('drops everything with an exclude selector that sets no key', () => {
    expect(selected(undefined, [{}])).toEqual([]);
  });
});

describe('globToRegExp', () => {
  it('maps ? to one character (within a segment for paths)', () => {
    expect(globToRegExp('get?et', false).test('getPet')).toBe(true);
    expect(globToRegExp('get?et', false).test('getet')).toBe(false);
    expect(globToRegExp('/a?b', true).test('/a/b')).toBe(false);
    expect(globToRegExp('a?b', false).test('a/b')).toBe(true);
  });

  it('lets * cross slashes in operationId globs but not in path globs', () => {
    expect(globToRegExp('a*b', false).test('a/x/b')).toBe(true);
    expect(globToRegExp('a*b', true).test('a/x/b')).toBe(false);
  });

  it('escapes every regular-expression metacharacter', () => {
    const glob = 'a.b+c^d$e(f)g|h[i]j\\k{l}';
    expect(globToRegExp(glob, false).test(glob)).toBe(true);
    expect(globToRegExp('a.b', false).test('aXb')).toBe(false);
    expect(globToRegExp('a+', false).test('aa')).toBe(false);
  });

  it('does not mix up the same glob compiled for paths and for ids', () => {
    expect(globToRegExp('/x/*', true).test('/x/y/z')).toBe(false);
    expect(globToRegExp('/x/*', false).test('/x/y/z')).toBe(true);
    expect(globToRegExp('/x/*', true).test('/x/y/z')).toBe(false);
  });
});

describe('include/exclude in deriveCatalog', () => {
  const ok = { '200': { description: 'ok' } };
  const doc = {
    openapi: '3.0.3',
    info: { title: 'Pets', version: '1' },
    paths: {
      '/pets': {
        get: { operationId: 'listPets', tags: ['pets'], responses: ok },
        post: { operationId: 'createPet', tags: ['pets'], responses: ok },
      },
      '/pets/{petId}': {
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: { operationId: 'getPet', tags: ['pets'], responses: ok },
        delete: { operationId: 'deletePet', tags: ['pets'], responses: ok },
      },
      '/admin/stats': { get: { operationId: 'adminStats', tags: ['admin'], responses: ok } },
      '/health': { get: { responses: ok } },
    },
  };
  const names = (include?: OperationSelector[], exclude?: OperationSelector[]): string[] =>
    deriveCatalog([
      {
        source: 'pets.json',
        doc,
        ...(include ? { include } : {}),
        ...(exclude ? { exclude } : {}),
      },
    ]).capabilities.map((c) => c.name);

  it('derives every operation without filters', () => {
    expect(names()).toEqual([
      'admin_stats',
      'create_pet',
      'delete_pet',
      'get_health',
      'get_pet',
      'list_pets',
    ]);
  });

  it('keeps included operations only', () => {
    expect(names([{ tags: ['admin'] }, { operation_ids: ['get*'] }])).toEqual(['admin_stats', 'get_pet']);
  });

  it('drops excluded operations', () => {
    expect(names(undefined, [{ methods: ['DELETE'] }, { paths: ['/admin/**'] }])).toEqual([
      'create_pet',
      'get_health',
      'get_pet',
      'list_pets',
    ]);
  });

  it('matches path-level operations by method and path together', () => {
    expect(names([{ methods: ['GET'], paths: ['/pets/*'] }])).toEqual(['get_pet']);
  });
});
