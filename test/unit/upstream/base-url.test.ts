import { describe, expect, it } from 'vitest';
import type { ApiInfo, ServerTemplate } from '../../../src/openapi/types.js';
import { resolveBaseUrl } from '../../../src/upstream/base-url.js';
import { userError } from '../../helpers/user-error.js';

// Where execution sends requests: the operator's `upstream`, else the document's first server
// with variables from config (never from agents) or their defaults.

const WHERE = 'apis[0]';

function api(servers: ServerTemplate[], extra: Partial<ApiInfo> = {}): ApiInfo {
  return {
    id: 'shop',
    title: 'Shop',
    version: '1.0.0',
    source: '/specs/shop.yaml',
    flavour: 'openapi-3.0',
    servers,
    securitySchemes: {},
    ...extra,
  };
}

const regional: ServerTemplate = {
  url: 'https://{region}.api.example.com/{version}',
  variables: {
    region: { default: 'eu', enum: ['eu', 'us'] },
    version: { default: 'v1' },
  },
};

describe('resolveBaseUrl', () => {
  it('uses the configured upstream over the document servers', () => {
    expect(resolveBaseUrl(api([regional], { upstream: 'http://10.0.0.5:8080/api' }), {}, WHERE)).toBe(
      'http://10.0.0.5:8080/api',
    );
  });

  it('uses the configured upstream even with server variables that would not fit the document', () => {
    expect(resolveBaseUrl(api([regional], { upstream: 'http://u' }), { nope: 'x' }, WHERE)).toBe('http://u');
  });

  it('fills server variables with their defaults', () => {
    expect(resolveBaseUrl(api([regional]), {}, WHERE)).toBe('https://eu.api.example.com/v1');
  });

  it('fills server variables from config, defaults for the rest', () => {
    expect(resolveBaseUrl(api([regional]), { region: 'us' }, WHERE)).toBe('https://us.api.example.com/v1');
    expect(resolveBaseUrl(api([regional]), { region: 'us', version: 'v2' }, WHERE)).toBe(
      'https://us.api.example.com/v2',
    );
  });

  it('uses the first server only', () => {
    const second: ServerTemplate = { url: 'https://backup.example.com', variables: {} };
    expect(resolveBaseUrl(api([{ url: 'https://main.example.com', variables: {} }, second]), {}, WHERE)).toBe(
      'https://main.example.com',
    );
  });

  it('refuses a value outside the enum, naming the key and the allowed values', () => {
    const err = userError(() => resolveBaseUrl(api([regional]), { region: 'ap' }, WHERE));
    expect(err.message).toContain('apis[0].server_variables.region');
    expect(err.message).toContain('"ap"');
    expect(err.message).toContain('eu, us');
  });

  it('refuses a variable the server does not declare, naming the key', () => {
    const err = userError(() => resolveBaseUrl(api([regional]), { tenant: 'acme' }, WHERE));
    expect(err.message).toContain('apis[0].server_variables.tenant');
  });

  it('refuses a variable in a server URL without variables at all', () => {
    const plain: ServerTemplate = { url: 'https://api.example.com', variables: {} };
    const err = userError(() => resolveBaseUrl(api([plain]), { region: 'eu' }, WHERE));
    expect(err.message).toContain('apis[0].server_variables.region');
  });

  it('is undefined when there is neither an upstream nor a server', () => {
    expect(resolveBaseUrl(api([]), {}, WHERE)).toBeUndefined();
  });

  it('resolves a relative server URL against a document fetched from a URL (OpenAPI 3 §4.8.5)', () => {
    const relative: ServerTemplate = { url: '/v2', variables: {} };
    const fromUrl = api([relative], { source: 'https://docs.example.com/specs/shop.yaml' });
    expect(resolveBaseUrl(fromUrl, {}, WHERE)).toBe('https://docs.example.com/v2');
    const dotted = api([{ url: 'api', variables: {} }], {
      source: 'https://docs.example.com/specs/shop.yaml',
    });
    expect(resolveBaseUrl(dotted, {}, WHERE)).toBe('https://docs.example.com/specs/api');
  });

  it('is undefined for a relative server URL of a document read from a file', () => {
    expect(resolveBaseUrl(api([{ url: '/v2', variables: {} }]), {}, WHERE)).toBeUndefined();
  });

  it('fills variables before resolving a relative URL', () => {
    const relative: ServerTemplate = { url: '/{version}', variables: { version: { default: 'v3' } } };
    const fromUrl = api([relative], { source: 'http://docs.example.com/openapi.json' });
    expect(resolveBaseUrl(fromUrl, {}, WHERE)).toBe('http://docs.example.com/v3');
  });
});
