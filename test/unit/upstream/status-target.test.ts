import { describe, expect, it } from 'vitest';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import type { Capability } from '../../../src/openapi/types.js';
import { statusTarget } from '../../../src/upstream/status-target.js';

const ok = { '200': { description: 'ok' } };
const catalog = deriveCatalog([
  {
    source: 'jobs.yaml',
    doc: {
      openapi: '3.0.3',
      info: { title: 'Jobs', version: '1' },
      paths: {
        '/jobs/{jobId}': {
          get: {
            operationId: 'getJob',
            parameters: [
              { name: 'jobId', in: 'path', required: true, schema: { type: 'integer' } },
              { name: 'verbose', in: 'query', schema: { type: 'boolean' } },
            ],
            responses: ok,
          },
        },
        '/jobs/export': { get: { operationId: 'exportJobs', responses: ok } },
        '/runs/{runId}': {
          get: {
            operationId: 'getRun',
            parameters: [
              { name: 'runId', in: 'path', required: true, schema: { $ref: '#/components/schemas/RunId' } },
            ],
            responses: ok,
          },
        },
        '/files/{name}.json': {
          get: {
            operationId: 'getFile',
            parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
            responses: ok,
          },
        },
        '/exports/{a}-{b}-{c}.json': {
          get: {
            operationId: 'getExport',
            parameters: ['a', 'b', 'c'].map((name) => ({
              name,
              in: 'path',
              required: true,
              schema: { type: 'string' },
            })),
            responses: ok,
          },
        },
        '/a/{x}': {
          get: {
            operationId: 'ambiguousA',
            parameters: [{ name: 'x', in: 'path', required: true, schema: { type: 'string' } }],
            responses: ok,
          },
        },
        '/{y}/b': {
          get: {
            operationId: 'ambiguousB',
            parameters: [{ name: 'y', in: 'path', required: true, schema: { type: 'string' } }],
            responses: ok,
          },
        },
      },
      components: { schemas: { RunId: { type: 'integer' } } },
    },
  },
]);
const gets: Capability[] = catalog.capabilities.filter((c) => c.operation.method === 'get');
const api = { origin: 'https://api.example', basePath: '/v1' };
const map = (location: string, relativeTo = '/v1/jobs') => statusTarget(api, gets, location, relativeTo);

describe('statusTarget: an upstream URL as a call of a GET operation (issue 10, class 4)', () => {
  it('types an argument whose schema is a $defs reference (issue #14)', () => {
    expect(map('/v1/runs/7')).toMatchObject({ capability: { name: 'get_run' }, args: { runId: 7 } });
  });

  it('maps a path to its operation and typed arguments, relative or absolute', () => {
    expect(map('/v1/jobs/42?verbose=true')).toMatchObject({
      capability: { name: 'get_job' },
      args: { jobId: 42, verbose: true },
      url: 'https://api.example/v1/jobs/42?verbose=true',
    });
    expect(map('jobs/7', '/v1/')?.args).toEqual({ jobId: 7 });
    expect(map('https://api.example/v1/jobs/8')?.capability.name).toBe('get_job');
  });

  it('a concrete path wins over a template', () => {
    expect(map('/v1/jobs/export')?.capability.name).toBe('export_jobs');
  });

  it('matches templates with literal text around a parameter, decoding the value', () => {
    expect(map('/v1/files/r%C3%A9sum%C3%A9.json')?.args).toEqual({ name: 'résumé' });
  });

  it('matches several parameters in one segment', () => {
    expect(map('/v1/exports/x-y-z.json')?.args).toEqual({ a: 'x', b: 'y', c: 'z' });
  });

  it('equally specific templates are ambiguous and map to nothing', () => {
    expect(map('/v1/a/b')).toBeUndefined();
  });

  it.each([
    ['another origin', 'https://evil.example/v1/jobs/1'],
    ['another port', 'https://api.example:8443/v1/jobs/1'],
    ['another scheme', 'http://api.example/v1/jobs/1'],
    ['userinfo', 'https://user:pw@api.example/v1/jobs/1'],
    ['outside the base path', '/admin/secret-dump'],
    ['the base path as a prefix only', '/v10/jobs/1'],
    ['traversal out of the base path', '/v1/../admin'],
    ['no operation', '/v1/admin/secret-dump'],
    ['an encoded slash', '/v1/jobs/1%2F..%2F..%2Fadmin'],
    ['an encoded backslash', '/v1/jobs/1%5Cx'],
    ['a semicolon', '/v1/jobs/1;x=y'],
    ['a double encoding', '/v1/jobs/%252e%252e'],
    ['a bad escape', '/v1/jobs/%zz'],
    ['a control character', '/v1/jobs/1%0A'],
    ['an undeclared query parameter', '/v1/jobs/1?admin=true'],
    ['a repeated query parameter', '/v1/jobs/1?verbose=true&verbose=true'],
    ['a very long URL', `/v1/jobs/${'1'.repeat(5000)}`],
    ['a very long segment', `/v1/files/${'a'.repeat(300)}.json`],
    ['not a URL', 'http://['],
  ])('refuses %s', (_what, location) => {
    expect(map(location)).toBeUndefined();
  });

  it('an API without an origin maps nothing', () => {
    expect(statusTarget({ basePath: '' }, gets, '/jobs/1', '/')).toBeUndefined();
  });
});
