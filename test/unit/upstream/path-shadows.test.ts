import { describe, expect, it } from 'vitest';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { Capability } from '../../../src/openapi/types.js';
import { PathShadows } from '../../../src/upstream/path-shadows.js';

const ok = { '200': { description: 'ok' } };
const param = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

function catalogOf(paths: Record<string, unknown>): readonly Capability[] {
  return deriveCatalog([
    { source: 'api.yaml', doc: { openapi: '3.0.3', info: { title: 'A', version: '1' }, paths } },
  ]).capabilities;
}

const capabilities = catalogOf({
  '/users/{userId}': {
    get: { operationId: 'getUser', parameters: [param('userId')], responses: ok },
    delete: { operationId: 'deleteUser', parameters: [param('userId')], responses: ok },
  },
  '/users/me': { get: { operationId: 'getMe', responses: ok } },
  '/a/{x}': { get: { operationId: 'getAx', parameters: [param('x')], responses: ok } },
  '/{y}/b': { get: { operationId: 'getYb', parameters: [param('y')], responses: ok } },
  '/files/{name}': { get: { operationId: 'getFile', parameters: [param('name')], responses: ok } },
  '/files/{name}.json': { get: { operationId: 'getFileJson', parameters: [param('name')], responses: ok } },
});
const shadows = new PathShadows(capabilities);
const named = (name: string): Capability => capabilities.find((c) => c.name === name) as Capability;
const refused = (name: string, path: string): boolean => {
  try {
    shadows.refuseShadowed(named(name), path);
    return false;
  } catch {
    return true;
  }
};

describe('PathShadows: a call whose path is a sibling operation’s', () => {
  it('is refused when a concrete sibling of the same method matches it', () => {
    expect(refused('get_user', '/users/me')).toBe(true);
    expect(refused('get_user', '/users/me?expand=all')).toBe(true);
    expect(refused('get_user', '/users/42')).toBe(false);
    // The sibling is a GET: a DELETE of /users/me is its own operation's path.
    expect(refused('delete_user', '/users/me')).toBe(false);
    // The sibling itself is not shadowed by the templated one.
    expect(refused('get_me', '/users/me')).toBe(false);
  });

  it('reads the built path decoded, as the upstream will', () => {
    expect(refused('get_user', '/users/m%65')).toBe(true);
    expect(refused('get_user', '/users/me%2Fx')).toBe(false);
  });

  it('is refused on a tie, which leaves the upstream to choose, and on a partly literal segment', () => {
    expect(refused('get_ax', '/a/b')).toBe(true);
    expect(refused('get_yb', '/a/b')).toBe(true);
    expect(refused('get_ax', '/a/c')).toBe(false);
    expect(refused('get_file', '/files/report.json')).toBe(true);
    expect(refused('get_file', '/files/report.csv')).toBe(false);
  });
});
