import { describe, expect, it } from 'vitest';
import { credentialKeys, nameKey } from '../../../src/openapi/credential-names.js';

describe('nameKey: the spellings a server reads as one parameter name (issue 10, class 12)', () => {
  it.each([
    ['query', 'API_KEY'],
    ['query', 'api%5Fkey'],
    ['query', 'api%255Fkey'],
    ['query', 'api%25255Fkey'],
    ['query', '+api_key+'],
    ['query', ' api_key\t'],
    ['query', 'api_key[]'],
    ['query', 'api_key[a][b]'],
    ['cookie', 'Api_Key'],
  ] as const)('%s %j is api_key', (location, name) => {
    expect(nameKey(location, name)).toBe('api_key');
  });

  it('a header name with CGI underscores is the dashed name (PHP, WSGI and Rack read them alike)', () => {
    expect(nameKey('header', 'X_API_KEY')).toBe(nameKey('header', 'x-api-key'));
  });

  it('underscores stay underscores outside headers', () => {
    expect(nameKey('query', 'api-key')).not.toBe(nameKey('query', 'api_key'));
  });

  it('other names stay other names', () => {
    for (const name of ['apikey', 'api_key2', 'xapi_key', 'api_ke', 'api_key%']) {
      expect(nameKey('query', name), name).not.toBe('api_key');
    }
  });

  it('credentialKeys lists only apiKey schemes in that location', () => {
    const schemes = {
      q: { type: 'apiKey', in: 'query' as const, name: 'Token' },
      h: { type: 'apiKey', in: 'header' as const, name: 'X-Key' },
      b: { type: 'http', scheme: 'bearer' },
    };
    expect([...credentialKeys('query', schemes)]).toEqual(['token']);
    expect([...credentialKeys('header', schemes)]).toEqual(['x-key']);
    expect([...credentialKeys('cookie', schemes)]).toEqual([]);
  });
});
