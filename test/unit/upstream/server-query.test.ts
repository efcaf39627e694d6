import { describe, expect, it } from 'vitest';
import type { ApiInfo } from '../../../src/openapi/types.js';
import { resolveBaseUrl } from '../../../src/upstream/base-url.js';
import { userError } from '../../helpers/user-error.js';

// A document's first server URL with a query (`?api-version=…`) used to be taken as the base URL
// and its query silently dropped from every call (runtime.ts parseBase keeps origin and path).

function api(url: string, extra: Partial<ApiInfo> = {}): ApiInfo {
  return {
    id: 'versioned',
    title: 'Versioned',
    version: '1.0.0',
    source: '/specs/versioned.yaml',
    flavour: 'openapi-3.0',
    servers: [{ url, variables: {} }],
    securitySchemes: {},
    ...extra,
  };
}

describe('a server URL with a query', () => {
  it('is refused at load, naming the document and the fix, with query values masked', () => {
    const { message } = userError(() =>
      resolveBaseUrl(
        api('https://api.example/v1?api-version=2024-01-01&code=SECRETKEY'),
        {},
        'apis[0] (versioned)',
      ),
    );
    expect(message).toContain('apis[0] (versioned)');
    expect(message).toContain('/specs/versioned.yaml');
    expect(message).toContain('https://api.example/v1?api-version=…&code=…');
    expect(message).toMatch(/set upstream to the URL without the query/);
    expect(message).not.toContain('SECRETKEY');
  });

  it('a relative server URL with a query, resolved against a remote document, too', () => {
    const remote = api('/v1?key=abc', { source: 'https://docs.example/openapi.yaml' });
    expect(userError(() => resolveBaseUrl(remote, {}, 'apis[0]')).message).toMatch(/has a query/);
  });

  it('is not looked at when the operator sets upstream, and a URL without a query passes', () => {
    const withQuery = api('https://api.example/v1?api-version=1', { upstream: 'https://api.example/v1' });
    expect(resolveBaseUrl(withQuery, {}, 'apis[0]')).toBe('https://api.example/v1');
    expect(resolveBaseUrl(api('https://api.example/v1'), {}, 'apis[0]')).toBe('https://api.example/v1');
  });
});
